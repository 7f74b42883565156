"""The kernel's errors: each carries what a caller needs to act (the fault, the exit status)."""

from __future__ import annotations

from eukhe.core.gate import ProtocolFault
from eukhe.errors import EukheError
from eukhe.records.remote import RemoteCallAnswer, RemoteCallErrorKind, RemoteCallFailure


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


class RemoteCallError(KernelError):
    """A call of a kernel's `@rlm.remote` function failed (spec S3 "@remote" 3): `kind` is `not_running`,
    `unreachable`, `unknown`, `timeout` or `failed`; `reason` is the kernel's for `failed` (`bad_arguments`,
    `raised`, `unencodable`, `over_limit`, `cancelled`)."""

    code = "remote_call_error"

    def __init__(self, kind: RemoteCallErrorKind, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.kind: RemoteCallErrorKind = kind
        self.message = message
        self.reason = reason

    def __str__(self) -> str:
        how = self.kind if self.reason is None else f"{self.kind} ({self.reason})"
        return f"{how}: {self.message}"

    def details(self) -> dict[str, object]:
        """The kind and the kernel's reason, as a daemon error's `details` carries them."""
        return {"kind": self.kind, "reason": self.reason}

    def failure(self) -> RemoteCallFailure:
        """The error as an answer's `error` carries it."""
        return RemoteCallFailure(kind=self.kind, message=self.message, reason=self.reason)

    def answer(self) -> RemoteCallAnswer:
        """The answer `remote.call` gives for this error: `{"error": {"kind", "message", "reason"}}`."""
        return RemoteCallAnswer(error=self.failure())
