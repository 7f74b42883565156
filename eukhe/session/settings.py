"""Settings with scopes: the user's `<agent dir>/settings.json`, then the project's
`<cwd>/.eukhe/settings.json`, over the defaults. Both are strict: an unknown key or a wrong value is a `bad_setting`
error that names the file and the key. `kernel_transport` is the user's alone: in a project file it is refused with a
diagnostic naming the file, and the session starts Local.

Both files are read without blocking and within `SETTINGS_CAP`, and only as regular files (a FIFO, a device or a
directory there is a `bad_setting`). The project's, in a directory a confined job can write, is also read following
no symlink from the working directory; the user's may be a symlink (dotfile managers make one).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from eukhe import paths
from eukhe.beneath import NotRegularError, TooLargeError, read_regular
from eukhe.core import sandbox as policy_rules
from eukhe.core.artifact import MIN_CAP
from eukhe.errors import InputError
from eukhe.records.base import decode_json
from eukhe.records.sandbox import SandboxPolicy
from eukhe.records.settings import (
    DEFAULT_ARTIFACT_MAX_BYTES,
    KernelTransport,
    ModelProvider,
    ProjectSettings,
    ResourceLimits,
    SessionSettings,
    Upkeep,
    UserSettings,
)

USER_FILE = "settings.json"
PROJECT_FILE = Path(".eukhe") / "settings.json"
SETTINGS_CAP = 1 << 20
"""A settings file is read only up to 1 MiB (a few hundred bytes in practice): a larger one is a `bad_setting`."""
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class LoadedSettings:
    """A session's settings from the files, its kernel transport (None: Local), and what was said about them."""

    settings: SessionSettings
    kernel_transport: KernelTransport | None
    diagnostics: tuple[str, ...] = field(default_factory=tuple)
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    artifact_max_bytes: int = DEFAULT_ARTIFACT_MAX_BYTES


def user_settings_path() -> Path:
    return paths.agent_dir() / USER_FILE


def _read(path: Path, kind: type[UserSettings] | type[ProjectSettings]) -> UserSettings | ProjectSettings | None:
    """The user's settings file decoded strictly (None: there is none), read through a symlink if it is one."""
    try:
        data = read_regular(os.path.realpath(path), SETTINGS_CAP)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _unreadable(path, error, project=False) from None
    settings = decode_json(data, kind, code="bad_setting", what=str(path))
    cap = settings.artifact_max_bytes if isinstance(settings, UserSettings) else None
    if cap is not None and 0 < cap < MIN_CAP:
        raise InputError(
            "bad_setting",
            f"{path}: artifact_max_bytes must be 0 (no cap) or at least {MIN_CAP}, got {cap}",
            field="artifact_max_bytes",
            expected=f"0 or an int >= {MIN_CAP}",
        )
    return settings


def _read_project(cwd: str | os.PathLike[str]) -> ProjectSettings | None:
    """The project's settings file decoded strictly (None: there is none), reached from `cwd` following no symlink
    (neither `.eukhe` nor the file may be one). None too when `<cwd>/.eukhe` is the agent dir (the cwd is the home
    directory): that file is the user's, read as the user's."""
    path = Path(cwd) / PROJECT_FILE
    if os.path.realpath(path.parent) == os.path.realpath(paths.agent_dir()):
        return None
    try:
        base = os.open(cwd, _DIRECTORY)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _unreadable(path, error, project=True) from None
    try:
        data = read_regular(str(PROJECT_FILE), SETTINGS_CAP, dir_fd=base)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _unreadable(path, error, project=True) from None
    finally:
        os.close(base)
    return decode_json(data, ProjectSettings, code="bad_setting", what=str(path))


def _unreadable(path: Path, error: OSError, *, project: bool) -> InputError:
    """The `bad_setting` of a settings file that cannot be read, saying why."""
    if isinstance(error, TooLargeError):
        why = f"larger than {SETTINGS_CAP >> 20} MiB, the cap of a settings file: not read"
    elif isinstance(error, NotRegularError):
        why = "not a regular file (a FIFO, a device, a socket or a directory): not read"
    elif error.errno == errno.ELOOP and project:
        why = "a symlink (the file or its .eukhe directory): a project's settings are read from a regular file only"
    else:
        why = f"cannot be read: {error.strerror or error}"
    return InputError("bad_setting", f"{path}: {why}", field=str(path))


def load_settings(cwd: str | os.PathLike[str]) -> LoadedSettings:
    """The settings a new session in `cwd` gets: defaults, then the user's file, then the project's."""
    user = _read(user_settings_path(), UserSettings)
    project_path = Path(cwd) / PROJECT_FILE
    project = _read_project(cwd)
    settings = SessionSettings()
    diagnostics: list[str] = []
    for scope in (user, project):
        if scope is None:
            continue
        # Each key the scope sets replaces that key alone: the others keep what the scope before gave them.
        if scope.truncation is not None:
            settings = msgspec.structs.replace(settings, truncation=scope.truncation)
        if scope.tool_blocking_budget_ms is not None:
            settings = msgspec.structs.replace(settings, tool_blocking_budget_ms=scope.tool_blocking_budget_ms)
        if scope.workspace_venv is not None:
            settings = msgspec.structs.replace(settings, workspace_venv=scope.workspace_venv)
    if isinstance(project, ProjectSettings) and project.kernel_transport is not None:
        diagnostics.append(
            f"{project_path}: kernel_transport is a user setting (it would run code on other machines): it is "
            f"ignored here and the session's kernel runs Local; set it in {user_settings_path()}"
        )
    transport = user.kernel_transport if isinstance(user, UserSettings) else None
    user_policy = user.sandbox if isinstance(user, UserSettings) and user.sandbox is not None else SandboxPolicy()
    project_policy = project.sandbox if isinstance(project, ProjectSettings) else None
    tightened = policy_rules.tighten(
        user_policy.to_core(), None if project_policy is None else project_policy.to_core()
    )
    for looser in tightened.refused:
        diagnostics.append(
            f"{project_path}: {looser.key} would loosen the sandbox ({looser.detail}): a project may only tighten "
            f"the user's policy, so the session starts with the user's ({user_settings_path()})"
        )
    cap = user.artifact_max_bytes if isinstance(user, UserSettings) else None
    return LoadedSettings(
        settings,
        transport,
        tuple(diagnostics),
        SandboxPolicy.of(tightened.policy),
        DEFAULT_ARTIFACT_MAX_BYTES if cap is None else cap,
    )


def load_upkeep() -> Upkeep:
    """The daemon's upkeep settings: idle timeouts and artifact retention, from the user's settings file (a file that
    does not decode is refused: `bad_setting`, naming the file and the key)."""
    user = _read(user_settings_path(), UserSettings)
    return Upkeep.of(user if isinstance(user, UserSettings) else None)


def load_artifact_max_bytes() -> int:
    """One artifact's cap (`artifact_max_bytes`, 0: none) from the user's settings file, else the default; a file
    that does not decode is refused (`bad_setting`, naming the file and the key)."""
    user = _read(user_settings_path(), UserSettings)
    cap = user.artifact_max_bytes if isinstance(user, UserSettings) else None
    return DEFAULT_ARTIFACT_MAX_BYTES if cap is None else cap


def load_mcp_result_max_bytes() -> int | None:
    """The user's `mcp_result_max_bytes` (None: unset); a file that does not decode is refused (`bad_setting`,
    naming the file and the key)."""
    user = _read(user_settings_path(), UserSettings)
    return user.mcp_result_max_bytes if isinstance(user, UserSettings) else None


def model_key_here() -> str | None:
    """The API key for a prompt child as this process's environment holds it, in the variable the user's `model`
    setting names (None: no such setting, or the variable is unset). A client passes it along with its spawn (a
    settings file that does not decode: None too, and the daemon refuses the spawn, naming the setting)."""
    variable = model_key_variable()
    return None if variable is None else os.environ.get(variable) or None


def model_key_variable() -> str | None:
    """The variable the user's `model` setting names for a prompt child's API key, which no confined launch gets
    (None: no such setting, or a settings file that does not decode: then the rule of `eukhe.core.secret_env`
    alone decides, and it takes every `*_API_KEY`)."""
    try:
        model = load_model()
    except InputError:
        return None
    return None if model is None else model.api_key_env


def load_model() -> ModelProvider | None:
    """The user's `model` setting (None: unset); a file that does not decode is refused (`bad_setting`)."""
    user = _read(user_settings_path(), UserSettings)
    return user.model if isinstance(user, UserSettings) else None


def load_limits() -> ResourceLimits:
    """The user's `limits` (the defaults where unset); a file that does not decode is refused (`bad_setting`, naming
    the file and the key)."""
    user = _read(user_settings_path(), UserSettings)
    found = user.limits if isinstance(user, UserSettings) else None
    return ResourceLimits() if found is None else found
