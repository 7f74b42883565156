"""A PEP 517 build backend for the kernel runtime that needs nothing but the standard library.

Why: a session rebuilds the kernel venv with every uv command `--offline`; a backend fetched from an index (hatchling,
setuptools) could be missing from the cache. This one lives beside the `pyproject.toml` (`backend-path = ["."]`) and
packs the `eukhe_kernel` directory next to it into a deterministic `py3-none-any` wheel.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Any

NAME = "eukhe_runtime"
VERSION = "0.1.0"
PACKAGE = "eukhe_kernel"
ROOT = Path(__file__).resolve().parent
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same sources make the same wheel


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _sources() -> list[tuple[str, bytes]]:
    """The package's files, sorted, without caches."""
    package = ROOT / PACKAGE
    files = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    if not files:
        raise FileNotFoundError(f"no {PACKAGE} package beside {ROOT / 'pyproject.toml'}")
    return [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in files if p.suffix != ".pyc"]


def _metadata() -> bytes:
    return f"Metadata-Version: 2.1\nName: eukhe-runtime\nVersion: {VERSION}\nRequires-Python: >=3.11\n".encode()


def _wheel_file() -> bytes:
    return b"Wheel-Version: 1.0\nGenerator: eukhe_runtime_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _dist_info() -> str:
    return f"{NAME}-{VERSION}.dist-info"


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing to install before building."""
    return []


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing to install before building."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """Write the dist-info directory (METADATA, WHEEL) without building the wheel."""
    target = Path(metadata_directory) / _dist_info()
    target.mkdir(parents=True, exist_ok=True)
    (target / "METADATA").write_bytes(_metadata())
    (target / "WHEEL").write_bytes(_wheel_file())
    return _dist_info()


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """Pack `eukhe_kernel/` and its dist-info into `eukhe_runtime-<version>-py3-none-any.whl`."""
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    entries = [
        *_sources(),
        (f"{_dist_info()}/METADATA", _metadata()),
        (f"{_dist_info()}/WHEEL", _wheel_file()),
    ]
    record_lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in entries]
    record_lines.append(f"{_dist_info()}/RECORD,,")
    entries.append((f"{_dist_info()}/RECORD", ("\n".join(record_lines) + "\n").encode()))
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for path, data in entries:
            info = zipfile.ZipInfo(path, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return name


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """Not offered: the runtime installs from its directory, never from an sdist."""
    raise NotImplementedError("eukhe-runtime installs from its local directory only")
