"""eukhe's error tree and its one catalogue of error codes (docs/errors.md is this table; a test keeps them equal).

Every error eukhe raises on purpose is an `EukheError` whose `code` is a key of `CATALOGUE`: the stable word a daemon
reply, a CLI `--json` error and a kernel host reply carry. Subclasses carry data (the path, the field, the limit),
not only a message. `InputError` is every refusal of strict input: it names the field and what was expected.
"""

from __future__ import annotations

import errno

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the CLI imports this module at start-up)
if TYPE_CHECKING:
    from typing import ClassVar

CATALOGUE: dict[str, str] = {
    # input and usage
    "usage_error": "the command line is not one eukhe understands (exit 2)",
    "malformed": "a request line is not a JSON object with `v`, `id`, `op` and `args` (and nothing else)",
    "oversized": "a request line the daemon read is over its 32 MiB limit; it was dropped unread",
    "too_large": "a request would be over a bound (the 32 MiB a daemon request carries, or a field's own: a bash "
    "command's 128 KiB): refused before it was sent, naming the field (`field`) and the limit (`details`: `limit`, "
    "`size`)",
    "unsupported_version": "the request's protocol version `v` is not the daemon's",
    "unknown_op": "no request has this `op`",
    "bad_args": "a request's `args` have an unknown field, miss a required one or have a wrong type (`field` names it)",
    "bad_setting": "a setting (a session's settings, a settings file) has an unknown key or a wrong value",
    "bad_tool_arguments": "a tool call's arguments do not match the tool's schema (`field` names it)",
    "bad_path": "a path a caller gave cannot be used (too long, a NUL byte, a symlink loop, no permission)",
    "working_dir_error": "a session's working directory was refused: none given, gone, not a directory, or relative",
    "fs_error": "a file tool (read, write, edit, grep, glob) refused: `reason` says why (outside, not_found, ...)",
    # the sandbox
    "sandbox_unavailable": "confinement does not work on this machine (no bwrap, no user namespaces, AppArmor, a "
    "nested container): the message names the cause; run with `--sandbox off` or fix the machine",
    "sandbox_conflict": "a sandbox policy cannot hold with the other settings (the message names both)",
    # sessions and their journal
    "unknown_session": "no saved session has this id",
    "session_exists": "a create named an id that is already a session",
    "session_open_failed": "a session's directory could not be made private (0700) at open",
    "session_busy": "another worker still holds the session open; try again",
    "session_closed": "the session was closed",
    "journal_error": "a commit could not be made durable; nothing of it counts",
    "journal_format": "a session journal was written in another format than this build's; it is not read",
    "unknown_entry": "a rewind names an entry the session does not have",
    # tool calls and jobs
    "unknown_tool": "a call names a tool the session does not have",
    "call_not_running": "an abort names a call that is not running",
    "unknown_call": "the session has no tool call with this id",
    "unknown_job": "the session has no job with this id",
    "job_table_closed": "the session is closing: no new job starts",
    "bash_start_failed": "bash could not be started",
    "command_not_started": "`eukhe run` could not start the command (exit 127)",
    "cancelled": "the call was cancelled (Ctrl-C): its job was killed through its owner",
    "bound_refused": "the output bounder refused a request of the shell (a bug, reported with the core's reason)",
    "job_has_no_terminal": "a write names a job that runs without a terminal (start it with bash's `tty`)",
    "job_ended": "a write or a signal names a job that has ended: the error says how (`details`)",
    "job_has_no_process_group": "a signal names a job that is no process group of its own (a cell)",
    "unknown_signal": "a signal a job may not be sent (INT, TERM, HUP, QUIT, KILL, USR1, USR2, WINCH are)",
    # children's workspaces
    "workspace_error": "something went wrong with a child's isolated workspace",
    "workspace_name_error": "a child's name cannot name a workspace directory (letters, digits, `_.-`)",
    "workspace_too_large": 'the workspace holds more files than an isolated copy takes: spawn with workspace="shared"',
    "workspace_exists": "the child already has a workspace",
    "workspace_listing_failed": "the files of the parent's directory could not be listed (git or the .gitignore files)",
    "workspace_copy_failed": "the parent's files could not be copied into the child's workspace",
    "handback_failed": "a child's changes could not be handed back; its copy stays, the report names the path",
    # children
    "unknown_child": "the parent has no child of this name",
    "child_exists": "the parent already has a child of this name (a delete frees it)",
    "session_has_jobs": "a session close or delete was refused because jobs run: force kills them",
    "model_not_configured": "a prompt child cannot start: the user settings have no `model`, or the environment "
    "variable its `api_key_env` names is unset (the message names which)",
    # Agent Skills
    "unknown_skill": "no skill of this name is offered for the working directory (`eukhe skills list` shows them)",
    # the Python kernel
    "kernel_error": "something went wrong with the Python kernel",
    "kernel_start_failed": "the Python kernel did not start or did not send its ready frame",
    "kernel_died": "the Python kernel ended while a request was in flight; the next cell starts a fresh one",
    "kernel_killed": "the Python kernel was killed on purpose (a cancel past its grace, or a close)",
    "kernel_protocol_fault": "the Python kernel wrote a frame the host cannot answer; it was replaced",
    "kernel_closed": "the kernel manager was closed",
    "kernel_env_error": "something about the kernel's Python environment",
    "kernel_not_installed": "the kernel cannot be set up from local files: run `eukhe kernel install` once",
    "kernel_setup_failed": "a command that builds the kernel venv failed",
    "uv_not_found": "no uv was found, and this caller may not install one",
    "kernel_user_python_missing": "EUKHE_KERNEL_PYTHON names a file that is not an executable",
    "kernel_added_packages": "packages cannot be added to the kernel venv this way: EUKHE_KERNEL_PYTHON is set",
    "kernel_bootstrap_lock_timeout": "another process held the kernel's bootstrap lock longer than this caller waits",
    # @remote: kernel functions the host offers as tools
    "remote_call_error": "a call of a kernel's `@rlm.remote` function failed: `kind` says how (not_running, "
    "unreachable, unknown, timeout, failed)",
    "bad_remote": "a kernel's `remote.register` does not fit its record (name, module, qualname, doc, schema)",
    # the kernel's host requests (the `code` of an error host_reply)
    "over_limit": "a host request frame is over the frame size limit",
    "missing_type": "a host request has no string `type`",
    "unserved": "the host serves no host request of this type",
    "duplicate": "a host request reused an id already accepted (status `duplicate`)",
    "handler_error": "a host request's handler failed",
    "unencodable": "a host request's result is not strict JSON",
    # the daemon
    "unsafe_socket_dir": "the daemon's socket directory is not private (symlink, not a directory, owner or mode)",
    "socket_bind_failed": "a socket could not be bound or made 0600",
    "state_dir_not_private": "the agent dir or sessions root could not be made private (0700)",
    "daemon_start_failed": "the daemon could not start",
    "daemon_running": "another daemon holds this socket's lock",
    "daemon_stopping": "the daemon is stopping",
    "daemon_unavailable": "no daemon answers at the socket and none could be started",
    "daemon_protocol": "the daemon's reply broke the protocol",
    "worker_start_failed": "a session's worker did not come up",
    "worker_died": "the session's worker ended mid-request; it is reopened",
    "worker_unavailable": "the session's worker cannot be reached; it is reopened",
    "wrong_session": "a session's worker was asked about another session",
    "worker_retiring": "a session's worker, found idle, is stopping: ask the daemon, which reopens the session",
    "resource_exhausted": "the daemon ran out of a system resource (file descriptors, disk space, memory); try again",
    "internal": "a bug: the message names the exception; the daemon keeps serving",
    # the MCP server over HTTP
    "mcp_token_error": "the MCP server's bearer token could not be had: EUKHE_MCP_TOKEN is empty, or the token file "
    "is not a private file of this user, is empty, or cannot be read or made",
}
"""Every error code eukhe gives out, with its meaning."""


class EukheError(Exception):
    """Any error eukhe raises on purpose; `code` is its catalogue code."""

    code: ClassVar[str] = "internal"


class UsageError(EukheError, ValueError):
    """A caller passed a value eukhe cannot accept (bad argument, malformed request); exit code 2 at the CLI."""

    code = "usage_error"


class InputError(UsageError):
    """Strict input refused: an unknown field, a missing required one, or a wrong type. `field` is its dotted path
    (None for the whole input), `expected` what would have been accepted, `hint` a known spelling's correction."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        expected: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        if code not in CATALOGUE:
            raise ValueError(f"not a catalogued error code: {code!r}")
        self.code = code  # type: ignore[misc]  # an instance's code: the kind of input refused
        self.field = field
        self.expected = expected
        self.hint = hint


class CodedError(EukheError):
    """An error whose code is chosen where it is raised (a daemon's refusal, a reply relayed from a worker)."""

    def __init__(
        self, code: str, message: str, *, field: str | None = None, details: dict[str, object] | None = None
    ) -> None:
        super().__init__(message)
        if code not in CATALOGUE:
            raise ValueError(f"not a catalogued error code: {code!r}")
        self.code = code  # type: ignore[misc]  # this error's catalogue code
        self.field = field
        self._details = details

    def details(self) -> dict[str, object] | None:
        """What the error adds beyond its code and message (relayed as it came)."""
        return self._details


class RequestTooLargeError(UsageError):
    """A request over a bound, refused before it is sent: the daemon's bound on a request line (`field` then names
    the field that takes the most of it, a dotted path in the caller's arguments, and `size` is the line's bytes),
    or a field's own bound (`size` is the field's bytes). `bound` says what the limit is."""

    code = "too_large"

    def __init__(
        self, what: str, field: str, size: int, limit: int, bound: str, *, measured: str | None = None
    ) -> None:
        said = measured or f"{size} bytes"
        super().__init__(f"{what}: {field} is too large: {said}, over the {limit} bytes ({binary_size(limit)}) {bound}")
        self.field = field
        self.size = size
        self.limit = limit

    def details(self) -> dict[str, object]:
        """The limit and the request's size, for a caller to act on."""
        return {"limit": self.limit, "size": self.size}


def binary_size(size: int) -> str:
    """A size in MiB from 1 MiB up, else in KiB, to one decimal (`32 MiB`, `128 KiB`, `1.5 KiB`)."""
    unit, name = (1 << 20, "MiB") if size >= 1 << 20 else (1 << 10, "KiB")
    return f"{size / unit:.1f}".removesuffix(".0") + f" {name}"


class PathError(EukheError):
    """A path a caller gave cannot be used: the OS refused it (ENAMETOOLONG, ELOOP, EACCES) or it holds a NUL byte."""

    code = "bad_path"

    def __init__(self, path: str, reason: str, *, field: str | None = None) -> None:
        super().__init__(f"cannot use path {path!r}: {reason}")
        self.path = path
        self.reason = reason
        self.field = field


SHORTAGES = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.ENOBUFS, errno.EAGAIN}
)
"""The errnos of a system resource running out: the request could not be served now, nothing is wrong with it."""


class ResourceExhaustedError(EukheError):
    """A request failed because the system ran out of something (fds, disk, memory, processes); not a bug."""

    code = "resource_exhausted"


def resource_shortage(error: BaseException) -> ResourceExhaustedError | None:
    """The typed error for an OSError of a resource running out (the `SHORTAGES`), else None."""
    if isinstance(error, OSError) and error.errno in SHORTAGES:
        return ResourceExhaustedError(
            f"out of resources: {error.strerror or error}" + (f": {error.filename!r}" if error.filename else "")
        )
    return None


def error_code(error: BaseException) -> str:
    """The code an error goes out with: its catalogue code, `internal` for anything that is not an EukheError."""
    return error.code if isinstance(error, EukheError) else "internal"


def error_details(error: BaseException) -> dict[str, object] | None:
    """What an error adds beyond its code and message, for a caller to act on (its `details()`, if it has one)."""
    details = getattr(error, "details", None)
    return details() if callable(details) else None


def error_field(error: BaseException) -> str | None:
    """The input field an error names, if any."""
    field = getattr(error, "field", None)
    return field if isinstance(field, str) else None
