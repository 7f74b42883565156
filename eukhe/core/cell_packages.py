"""What a session's cells import beyond the kernel's own venv, and what a cell's ModuleNotFoundError says.

A session never downloads for the kernel's own venv. An agent adds a package for its cells the way it adds one for
its project: into the working directory's own virtual environment, `<cwd>/.venv`, with a confined `pip install` or
`uv pip install`. The shell reads the facts of that directory before each cell (names and times, no file's
content) and this module decides, with no I/O:

1. `site_for_cell`: which site-packages directory the kernel adds to the end of its `sys.path` before the cell runs
   (`.venv/lib/<the kernel's python>/site-packages`, when the setting `workspace_venv` is `auto` and it is there),
   again when the directory changed since (a package was installed or removed), and the notice the cell's answer
   carries: the first time a kernel imports from it, or why it does not (a venv for another Python).
2. `missing_module_hint`: the one line a cell's `ModuleNotFoundError` ends with, saying how to install the
   module where the cells import from (or, when they import from nothing else, how the user adds it to the kernel
   venv). No other error gets a line.

Invariant: a directory is added only when it is the kernel's own Python's (`lib/python3.11` for a 3.11 kernel):
packages built for another Python (compiled extensions, newer syntax) are never put on a kernel's path.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from eukhe.core.fact_errors import FactError, is_count

WORKSPACE_VENV = ".venv"
"""The venv in the working directory that cells import from (uv's default name, and the one the hint names)."""

SETTING = "workspace_venv"
"""The setting's name, as the settings files and the notices say it."""


class VenvSetting(enum.Enum):
    """Whether cells import from the working directory's `.venv` (the setting `workspace_venv`)."""

    AUTO = "auto"  # when `<cwd>/.venv` holds a site-packages for the kernel's Python (the default)
    OFF = "off"  # never: cells import from the kernel venv only


class CellPackagesFactError(FactError):
    """A fact of the workspace venv the shell cannot have read: `field` names the first wrong one."""

    what = "a workspace-venv fact"


_LIB = re.compile(r"(python|pypy)([0-9]+)\.([0-9]+)(t?)")
"""A directory name under a venv's `lib/`: `python3.11`, `python3.13t` (free-threaded), `pypy3.10`."""


def is_lib(name: str) -> bool:
    """Whether a directory name under a venv's `lib/` is a Python's (`python3.11`)."""
    return _LIB.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class VenvFacts:
    """What the shell saw of `<cwd>/.venv` just now: `libs` are the names under its `lib/` whose `site-packages`
    is a directory (sorted; the kernel's own alone when it is there, as the others do not matter then), `stamp` the
    modification time (ns) of the kernel's own one (None: it is not there)."""

    path: str  # `<cwd>/.venv`, as the host and a Local kernel (confined or not) both see it
    exists: bool  # `<cwd>/.venv` is a directory
    libs: tuple[str, ...] = ()
    stamp: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise CellPackagesFactError("path", self.path)
        if not isinstance(self.exists, bool):
            raise CellPackagesFactError("exists", self.exists)
        if not isinstance(self.libs, tuple) or not all(isinstance(lib, str) and is_lib(lib) for lib in self.libs):
            raise CellPackagesFactError("libs", self.libs)
        if self.libs and not self.exists:
            raise CellPackagesFactError("libs", self.libs)
        if self.stamp is not None and not is_count(self.stamp):
            raise CellPackagesFactError("stamp", self.stamp)

    def site(self, lib: str) -> str:
        """The site-packages directory of `lib` in this venv."""
        return f"{self.path}/lib/{lib}/site-packages"


@dataclass(frozen=True, slots=True)
class Told:
    """What one kernel was told so far: the site-packages directory it added and that directory's stamp then."""

    site: str | None = None
    stamp: int | None = None


NOTHING_TOLD = Told()


@dataclass(frozen=True, slots=True)
class CellSite:
    """Before a cell: the directories the kernel adds (again: new `.pth` files, fresh import caches), what it has
    been told after that, and the notice for the cell's answer (None: nothing to say)."""

    add: tuple[str, ...]
    told: Told
    notice: str | None = None


def version_of(lib: str) -> str:
    """`3.11` of `python3.11`, `3.13t` of `python3.13t`, `pypy 3.10` of `pypy3.10`."""
    match = _LIB.fullmatch(lib)
    if match is None:
        return lib
    kind, major, minor, threaded = match.groups()
    return f"{'pypy ' if kind == 'pypy' else ''}{major}.{minor}{threaded}"


def kernel_lib(version: str, implementation: str = "cpython", free_threaded: bool = False) -> str:
    """The directory name a venv of the kernel's Python has under `lib/`, from its version (`3.11.7`)."""
    major, _, rest = version.partition(".")
    minor = rest.split(".", 1)[0]
    kind = "pypy" if implementation == "pypy" else "python"
    return f"{kind}{major}.{minor}{'t' if free_threaded else ''}"


def site_for_cell(setting: VenvSetting, venv: VenvFacts, lib: str, told: Told) -> CellSite:
    """What the kernel (whose Python's venv directory is `lib`) is told before a cell, given what it was told."""
    if not isinstance(setting, VenvSetting):
        raise CellPackagesFactError("setting", setting)
    if not isinstance(venv, VenvFacts):
        raise CellPackagesFactError("venv", venv)
    if not isinstance(lib, str) or not _LIB.fullmatch(lib):
        raise CellPackagesFactError("lib", lib)
    if setting is VenvSetting.OFF:
        return CellSite((), told)
    if lib in venv.libs:
        site = venv.site(lib)
        if told.site == site and told.stamp == venv.stamp:
            return CellSite((), told)
        notice = None
        if told.site != site:
            notice = f"cells import from {site} too ({SETTING}); what is installed there later imports at the next cell"
        return CellSite((site,), Told(site, venv.stamp), notice)
    if venv.libs:
        return CellSite((), told, mismatch_notice(venv, lib))
    return CellSite((), told)


def mismatch_notice(venv: VenvFacts, lib: str) -> str:
    """Why cells do not import from a venv for another Python."""
    theirs = ", ".join(version_of(other) for other in venv.libs)
    return (
        f"cells do not import from {venv.path}: it is for Python {theirs}, the kernel runs {version_of(lib)} "
        f"({SETTING})"
    )


DISTRIBUTIONS: Mapping[str, str] = {
    "PIL": "pillow",
    "cv2": "opencv-python",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
    "docx": "python-docx",
    "pptx": "python-pptx",
    "fitz": "pymupdf",
    "git": "gitpython",
    "jwt": "pyjwt",
    "serial": "pyserial",
    "usb": "pyusb",
    "magic": "python-magic",
    "zmq": "pyzmq",
    "Crypto": "pycryptodome",
    "OpenSSL": "pyopenssl",
    "Bio": "biopython",
    "attr": "attrs",
    "mpl_toolkits": "matplotlib",
    "google.protobuf": "protobuf",
    "pkg_resources": "setuptools",
    "gi": "pygobject",
    "wx": "wxpython",
    "Levenshtein": "levenshtein",
    "tomli_w": "tomli-w",
    "umap": "umap-learn",
}
"""Modules whose distribution on PyPI has another name (a dotted key is looked up before its first part)."""

_MISSING = re.compile(r"No module named '([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)'")
"""Python's own message for a missing module; `... '; 'x' is not a package` (a module where a package was wanted)
does not match: installing would not help."""


def distribution_of(module: str) -> str:
    """The name to install for a module: the table's, else the module's first part."""
    top = module.split(".", 1)[0]
    return DISTRIBUTIONS.get(module) or DISTRIBUTIONS.get(top) or top


def shell_word(text: str) -> str:
    """`text` as one word of a POSIX shell command (quoted only when it needs to be)."""
    if text and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def missing_module_hint(
    ename: str,
    evalue: str,
    *,
    setting: VenvSetting,
    venv: VenvFacts,
    lib: str,
    stdlib: Collection[str] = (),
) -> str | None:
    """The line a cell's error ends with: only for a `ModuleNotFoundError` of a module pip could install (not one of
    the standard library's, `stdlib`, whose absence is the interpreter's build)."""
    if ename != "ModuleNotFoundError":
        return None
    match = _MISSING.fullmatch(evalue)
    if match is None:
        return None
    module = match.group(1)
    if module.split(".", 1)[0] in stdlib:
        return None
    name = distribution_of(module)
    here = shell_word(venv.path)
    version = version_of(lib)
    by_user = f"the user can add it to the kernel venv: eukhe kernel install --with {shell_word(name)}"
    if setting is VenvSetting.OFF:
        return f"[{module} is not in the kernel venv, and cells import from no other ({SETTING} is off): {by_user}]"
    install = f"uv pip install --python {here} {shell_word(name)}"
    if lib in venv.libs:
        return f"[pip install {name} into {venv.path} ({install}) and run the cell again: cells import from it]"
    if venv.libs:
        return (
            f"[{module} is not in the kernel venv, and {venv.path} is for Python "
            f"{', '.join(version_of(other) for other in venv.libs)} while the kernel runs {version}, so cells do not "
            f"import from it: a venv for {version} there would do (uv venv --clear --python {version} {here} && "
            f"{install}, then run the cell again), or {by_user}]"
        )
    return (
        f"[pip install {name} into {venv.path} (uv venv --python {version} {here} && {install}) and run the cell "
        "again: cells import from it]"
    )
