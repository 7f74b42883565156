"""The kernel environment's errors (spec "The kernel environment"): each carries what a caller needs to act."""

from __future__ import annotations

from collections.abc import Sequence

from eukhe.core.kernel_local import KERNEL_MISSING_TEXT
from eukhe.errors import EukheError


class KernelEnvError(EukheError):
    """Something about the kernel's Python environment."""

    code = "kernel_env_error"


class KernelNotInstalledError(KernelEnvError):
    """A session's kernel cannot be set up from local files; only the `ipython` tool answers this."""

    code = "kernel_not_installed"

    def __init__(self, cause: str | None = None) -> None:
        super().__init__(KERNEL_MISSING_TEXT)
        self.cause = cause


class KernelSetupError(KernelEnvError):
    """A build command failed: which step, its argv, its exit status and the end of what it printed."""

    code = "kernel_setup_failed"

    def __init__(self, action: str, argv: Sequence[str], returncode: int, output: str) -> None:
        self.action = action
        self.argv = tuple(argv)
        self.returncode = returncode
        self.output = output
        super().__init__(format_setup_failure(action, returncode, output))


class UvNotFoundError(KernelEnvError):
    """No uv was found, and this caller may not install one (a session never downloads)."""

    code = "uv_not_found"


class UserPythonMissingError(KernelEnvError):
    """EUKHE_KERNEL_PYTHON names a file that is not there."""

    code = "kernel_user_python_missing"

    def __init__(self, path: str) -> None:
        super().__init__(f"EUKHE_KERNEL_PYTHON names {path!r}, which is not an executable file")
        self.path = path


class AddedPackagesError(KernelEnvError):
    """Packages cannot be added to the kernel venv this way (the kernel runs on a user's Python)."""

    code = "kernel_added_packages"


class BootstrapLockTimeoutError(KernelEnvError):
    """Another process held the bootstrap lock for longer than this caller waits."""

    code = "kernel_bootstrap_lock_timeout"


HINTS = {
    "python_install": "uv could not install its pinned Python; on a machine that cannot reach uv's Python "
    "downloads, use an existing interpreter: `eukhe kernel install --python /path/to/python3`",
    "lock_install": "the locked wheels could not be installed with their hashes checked (a hash that does not "
    "match, a requirement without a hash, or no network for a download)",
    "venv": "uv could not create the venv from the chosen Python",
    "runtime_install": "the kernel runtime could not be installed from its local directory",
    "check": "`uv pip check` found the venv inconsistent",
    "python": "--python must name a runnable Python 3.11 or newer",
    "added_compile": "the packages named with --with could not be resolved into wheels for the kernel's Python, "
    "each with its hashes (a name no index has, no wheel for this Python, or a conflict with the kernel lock's "
    "pins); nothing was changed",
}


def format_setup_failure(action: str, returncode: int, output: str, *, tail_lines: int = 12) -> str:
    """One clear message for a failed build command: the step, why it matters, uv's last lines (a run of hash lines,
    e.g. the dozens a hash mismatch expects, counted in one line, so the lines that say why stay in the tail)."""
    tail = "\n".join(collapse_hash_lines(output.strip().splitlines())[-tail_lines:])
    hint = HINTS.get(action, "")
    text = f"kernel install failed at step {action} (exit {returncode})"
    if hint:
        text += f": {hint}"
    if tail:
        text += "\n" + tail
    return text


def collapse_hash_lines(lines: list[str], keep: int = 2) -> list[str]:
    """Each run of more than `keep` lines that are only a hash (`sha256:...`) as its first `keep` and a count."""
    out: list[str] = []
    run: list[str] = []
    for line in [*lines, ""]:
        if line.strip().startswith("sha256:") and " " not in line.strip():
            run.append(line)
            continue
        more = len(run) - keep
        out += run if more <= 0 else [*run[:keep], f"  ... ({more} more hash{'' if more == 1 else 'es'})"]
        run = []
        out.append(line)
    return out[:-1]
