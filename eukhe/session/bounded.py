"""Where the session gets `BoundedOutput` (S2 "Limits" 4): `eukhe.output`, the one bounder of the project."""

from __future__ import annotations

from eukhe.output import BoundedOutput, BoundedResult

__all__ = ["BoundedOutput", "BoundedResult"]
