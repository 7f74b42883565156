"""Settings records (S2 "Limits" 1: `Truncation`; jobs 4: the blocking budget): what a session header records.

`truncation` is `{"max_bytes", "max_lines", "keep"}` or the word `"off"` (the explicit opt-out that keeps every
byte). The defaults are the core's (`eukhe.core.bound`), defined there and nowhere else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from eukhe.core.bound import DEFAULT_LIMITS, Keep, Off, On, OutputLimits, Truncation
from eukhe.core.clients import MIN_ROOM_BYTES
from eukhe.core.limits import MIN_MEMORY_MB, MIN_PROCESSES
from eukhe.core.limits import Settings as CoreLimits
from eukhe.errors import InputError
from eukhe.records.base import Record, refusal
from eukhe.records.sandbox import ProjectSandbox, SandboxPolicy

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Seconds = Annotated[float, msgspec.Meta(ge=0)]
Days = Annotated[float, msgspec.Meta(ge=0)]
DEFAULT_BLOCKING_BUDGET_MS = 30_000
TRUNCATION_OFF: Literal["off"] = "off"


class Limits(Record):
    """Truncation on: keep at most `max_bytes` bytes and `max_lines` lines, from the `keep` end."""

    max_bytes: NonNegative = DEFAULT_LIMITS.max_bytes
    max_lines: NonNegative = DEFAULT_LIMITS.max_lines
    keep: Literal["head", "tail"] = "tail"

    def __post_init__(self) -> None:
        checked(self)


TruncationSetting = Limits | Literal["off"]


def checked(setting: Record) -> None:
    """Settings made in Python are as strict as settings read from JSON: InputError (`bad_setting`) naming the field.
    (msgspec checks types when it decodes, not when a record is built; settings are rare, so they check both.)"""
    if _CHECKING:
        return  # the conversion below builds the record again: it was just decoded strictly
    truncation = getattr(setting, "truncation", None)
    if truncation is not None and not isinstance(truncation, Limits | str):
        raise InputError(
            "bad_setting",
            f'{type(setting).__name__}: truncation must be Limits(...) or "off", got {truncation!r} '
            "(for the core's On(...) or Off(), use SessionSettings.bounded_by)",
            field="truncation",
            expected='Limits | "off"',
        )
    try:
        builtins = msgspec.to_builtins(setting)
    except (TypeError, msgspec.EncodeError) as error:
        raise InputError("bad_setting", f"{type(setting).__name__}: {error}") from None
    _CHECKING.append(True)
    try:
        msgspec.convert(builtins, type(setting))
    except msgspec.ValidationError as error:
        raise refusal(error, type(setting), code="bad_setting", what=type(setting).__name__) from None
    finally:
        _CHECKING.pop()


_CHECKING: list[bool] = []
"""Non-empty while `checked` converts (one thread decodes settings at a time in practice; a nested check is moot)."""


def truncation_of(setting: TruncationSetting) -> Truncation:
    """The core's Truncation for a setting."""
    if isinstance(setting, Limits):
        return On(OutputLimits(setting.max_bytes, setting.max_lines, Keep(setting.keep)))
    return Off()


def setting_of(truncation: Truncation) -> TruncationSetting:
    """The setting for the core's Truncation."""
    if isinstance(truncation, On):
        limits = truncation.limits
        keep: Literal["head", "tail"] = "head" if limits.keep is Keep.HEAD else "tail"
        return Limits(max_bytes=limits.max_bytes, max_lines=limits.max_lines, keep=keep)
    if isinstance(truncation, Off):
        return TRUNCATION_OFF
    raise TypeError(f"not a Truncation: {truncation!r}")


WorkspaceVenv = Literal["auto", "off"]
"""Whether cells import from `<cwd>/.venv` too (`eukhe.core.cell_packages.VenvSetting`): `auto` when it holds a
site-packages for the kernel's Python, `off` never."""


class SessionSettings(Record):
    """A session's settings, recorded in its header: the output bound, the blocking budget, and whether its cells
    import from the working directory's `.venv` (`workspace_venv`, docs/kernel-install.md)."""

    truncation: TruncationSetting = msgspec.field(default_factory=Limits)
    tool_blocking_budget_ms: NonNegative = DEFAULT_BLOCKING_BUDGET_MS
    workspace_venv: WorkspaceVenv = "auto"

    def __post_init__(self) -> None:
        checked(self)

    @classmethod
    def bounded_by(
        cls, truncation: Truncation, tool_blocking_budget_ms: int = DEFAULT_BLOCKING_BUDGET_MS
    ) -> SessionSettings:
        """Settings from the core's Truncation (`On(OutputLimits(...))` or `Off()`)."""
        return cls(truncation=setting_of(truncation), tool_blocking_budget_ms=tool_blocking_budget_ms)

    @property
    def bound(self) -> Truncation:
        """The output bound as the core's Truncation."""
        return truncation_of(self.truncation)


class Mount(Record):
    """One shared mount of a wrapped kernel: the same directory at `sandbox` (the kernel's path) and `host`."""

    sandbox: str
    host: str


class KernelTransport(Record):
    """The Wrapped transport (S3 "Where the sandbox runs"): the kernel command runs under `argv_prefix` (docker exec,
    bwrap, ssh...), on the sandbox's `python`; `path_map` lists the shared mounts (the deepest holding a path maps
    it); `env` names the host variables the kernel gets. `command: "shell"` passes the kernel command as one shell
    string (ssh runs it through the remote shell)."""

    argv_prefix: Annotated[list[str], msgspec.Meta(min_length=1)]
    python: str = "python3"
    path_map: list[Mount] = msgspec.field(default_factory=list)
    env: list[str] = msgspec.field(default_factory=list)
    command: Literal["argv", "shell"] = "argv"


Positive = Annotated[int, msgspec.Meta(ge=1)]
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0)]


class ModelProvider(Record):
    """`model`: the OpenAI-compatible server a prompt child's loop asks (POST `{base_url}/chat/completions`), the
    model's `name`, and the environment variable holding the API key (its name only: the key is never stored). A
    child asks the model at most `max_turns` times; a request gives up after `request_timeout_s`; a 429, a 5xx or a
    connection error is tried again at most `max_retries` times, after `backoff_ms` doubling (or Retry-After)."""

    base_url: str
    name: str
    api_key_env: str = "OPENAI_API_KEY"
    max_turns: Positive = 40
    request_timeout_s: PositiveSeconds = 120.0
    max_retries: NonNegative = 4
    backoff_ms: NonNegative = 500
    max_backoff_ms: NonNegative = 8_000


class ResourceLimits(Record):
    """`limits` in the user settings: what a session's confined processes may take together (docs/sandbox.md
    "Limits"). `max_processes`: processes and threads at once; `max_memory_mb`: memory in MiB (unset: half of the
    machine's); `max_tmp_mb`: the private /tmp's size and any one file a confined process writes, in MiB. A missing
    key keeps its default; 0 is no limit."""

    max_processes: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_memory_mb: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_tmp_mb: Annotated[int, msgspec.Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        checked(self)
        for name, least in (("max_processes", MIN_PROCESSES), ("max_memory_mb", MIN_MEMORY_MB), ("max_tmp_mb", 1)):
            value = getattr(self, name)
            if value is not None and 0 < value < least:
                raise InputError(
                    "bad_setting",
                    f"limits.{name} must be 0 (no limit) or at least {least}, got {value}",
                    field=f"limits.{name}",
                    expected=f"0 or an int >= {least}",
                )

    def to_core(self) -> CoreLimits:
        return CoreLimits(self.max_processes, self.max_memory_mb, self.max_tmp_mb)


class UserSettings(Record):
    """`<agent dir>/settings.json`: the user's own settings. Only here may `kernel_transport` and `model` be set,
    the daemon's upkeep (idle culling, artifact retention: `Upkeep`, whose defaults a missing key keeps), the
    cap of one artifact (`artifact_max_bytes`: 0 for none, else at least `eukhe.core.artifact.MIN_CAP`), and the
    size of an MCP tool result (`mcp_result_max_bytes`)."""

    kernel_transport: KernelTransport | None = None
    sandbox: SandboxPolicy | None = None
    truncation: TruncationSetting | None = None
    tool_blocking_budget_ms: NonNegative | None = None
    session_idle_timeout_s: Seconds | None = None
    kernel_idle_timeout_s: Seconds | None = None
    artifact_max_total_bytes: NonNegative | None = None
    artifact_max_age_days: Days | None = None
    artifact_max_bytes: NonNegative | None = None
    model: ModelProvider | None = None
    """The model a prompt child thinks with (the user's alone: it names where the API key is sent)."""
    mcp_result_max_bytes: Annotated[int, msgspec.Meta(ge=MIN_ROOM_BYTES)] | None = None
    """How many bytes of one tool result `eukhe mcp` sends a client, whatever client it is (None: as
    `eukhe.core.clients` knows the client; docs/mcp.md, "Results")."""
    workspace_venv: WorkspaceVenv | None = None
    limits: ResourceLimits | None = None
    """What a session's confined processes may take together (processes, memory, /tmp); the user's alone."""


DEFAULT_SESSION_IDLE_TIMEOUT_S = 600.0
DEFAULT_KERNEL_IDLE_TIMEOUT_S = 0.0
DEFAULT_ARTIFACT_MAX_TOTAL_BYTES = 2 << 30
DEFAULT_ARTIFACT_MAX_AGE_DAYS = 7.0
DEFAULT_ARTIFACT_MAX_BYTES = 256 << 20
"""One artifact's cap: a longer output keeps its first and its last 64 MiB (about a million lines each; half the cap
is room to write the tail in), so some sixteen such floods fit the default `artifact_max_total_bytes`."""


class Upkeep(Record):
    """How the daemon keeps many sessions cheap, from the user settings over these defaults.

    A session's worker with no running job, no live kernel and no client closes after `session_idle_timeout_s` idle
    (0: never); a kernel with nothing running is stopped after `kernel_idle_timeout_s` idle (0: never, the default,
    as in Jupyter). Artifacts older than `artifact_max_age_days` go, then the oldest while all of them take more than
    `artifact_max_total_bytes` (0 for either: no such limit)."""

    session_idle_timeout_s: Seconds = DEFAULT_SESSION_IDLE_TIMEOUT_S
    kernel_idle_timeout_s: Seconds = DEFAULT_KERNEL_IDLE_TIMEOUT_S
    artifact_max_total_bytes: NonNegative = DEFAULT_ARTIFACT_MAX_TOTAL_BYTES
    artifact_max_age_days: Days = DEFAULT_ARTIFACT_MAX_AGE_DAYS

    @classmethod
    def of(cls, user: UserSettings | None) -> Upkeep:
        """The upkeep the user's settings give (their keys over the defaults)."""
        if user is None:
            return cls()
        values = {name: getattr(user, name) for name in cls.__struct_fields__ if getattr(user, name) is not None}
        return cls(**values)


class ProjectSettings(Record):
    """`<cwd>/.eukhe/settings.json`: a project's settings, over the user's. A project (an untrusted scope) cannot set
    `kernel_transport`: the key is read only to refuse it by name. Its `sandbox` may only tighten the user's."""

    truncation: TruncationSetting | None = None
    tool_blocking_budget_ms: NonNegative | None = None
    kernel_transport: Any = None
    sandbox: ProjectSandbox | None = None
    workspace_venv: WorkspaceVenv | None = None
    """A project may set it: it only puts a directory of its own working directory, which the kernel may read
    anyway, on the kernel's `sys.path`; it loosens no rule of the sandbox."""
