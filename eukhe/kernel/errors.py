"""The kernel's errors: each carries what a caller needs to act (the fault, the exit status)."""

from __future__ import annotations

from eukhe.core.gate import ProtocolFault
from eukhe.errors import EukheError


class KernelError(EukheError):
    """Something went wrong with the Python kernel."""

    code = "kernel_error"


class KernelStartError(KernelError):
    """The kernel did not start or did not send its `ready` handshake."""

    code = "kernel_start_failed"


class KernelDiedError(KernelError):
    """The kernel process ended while a request was in flight; the next cell gets a fresh kernel."""

    code = "kernel_died"

    def __init__(self, returncode: int | None) -> None:
        how = "was killed" if returncode is None else _exit_text(returncode)
        super().__init__(f"the Python kernel {how} while the cell ran; the next cell starts a fresh kernel")
        self.returncode = returncode


class KernelProtocolError(KernelError):
    """The kernel wrote a frame the host cannot answer; protocol repair replaced the kernel."""

    code = "kernel_protocol_fault"

    def __init__(self, fault: ProtocolFault) -> None:
        super().__init__(
            f"the Python kernel broke the protocol ({fault.reason.value}: {fault.detail}); it was replaced"
        )
        self.fault = fault


class KernelClosedError(KernelError):
    """The kernel manager was closed."""

    code = "kernel_closed"


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"
