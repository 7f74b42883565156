"""The daemon fuzz targets run against a real daemon in a private world (the real tests' fixture)."""

from tests.real.conftest import world

__all__ = ["world"]
