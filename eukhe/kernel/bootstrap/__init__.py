"""The kernel environment (spec "The kernel environment"): the venv a session's kernel runs on, installed once.

For the kernel launch: `await ensure_kernel_python()` -> the interpreter (raises `KernelNotInstalledError`, whose text
is exactly the spec's, when local files are not enough). For the command: `install_kernel_python`, `check_state`.
"""

from __future__ import annotations

from eukhe.kernel.bootstrap.errors import (
    BootstrapLockTimeoutError,
    KernelEnvError,
    KernelNotInstalledError,
    KernelSetupError,
    UserPythonMissingError,
    UvNotFoundError,
    format_setup_failure,
)
from eukhe.kernel.bootstrap.setup import (
    InstallResult,
    check_state,
    ensure_kernel_python,
    install_kernel_python,
    setup_step,
)

__all__ = [
    "BootstrapLockTimeoutError",
    "InstallResult",
    "KernelEnvError",
    "KernelNotInstalledError",
    "KernelSetupError",
    "UserPythonMissingError",
    "UvNotFoundError",
    "check_state",
    "ensure_kernel_python",
    "format_setup_failure",
    "install_kernel_python",
    "setup_step",
]
