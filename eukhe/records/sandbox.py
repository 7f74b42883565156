"""The sandbox policy as settings and as the session header records it (docs/sandbox.md; rules in
`eukhe.core.sandbox`)."""

from __future__ import annotations

from typing import Literal

import msgspec

from eukhe.core import sandbox as core
from eukhe.core.secret_env import passthrough_problem
from eukhe.errors import InputError
from eukhe.records.base import Record

ModeName = Literal["workspace_write", "read_only", "off"]
NetworkName = Literal["on", "off"]


class SandboxPolicy(Record):
    """`sandbox` in the user settings and in a session: `mode`, `network`, extra `writable_roots`, the `deny_read`
    paths (`~` is the user's home), and the `env_passthrough` variables a confined launch gets although they look
    like secrets. A missing key keeps its default."""

    mode: ModeName = "workspace_write"
    network: NetworkName = "on"
    writable_roots: list[str] = msgspec.field(default_factory=list)
    deny_read: list[str] = msgspec.field(default_factory=lambda: list(core.CREDENTIALS))
    env_passthrough: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        for key in ("writable_roots", "deny_read"):
            for index, path in enumerate(getattr(self, key)):
                if not (isinstance(path, str) and (path.startswith("/") or path == "~" or path.startswith("~/"))):
                    raise InputError(
                        "bad_setting",
                        f"sandbox.{key}[{index}] must be an absolute path or start with ~/, got {path!r}",
                        field=f"sandbox.{key}[{index}]",
                        expected="an absolute path, or ~/...",
                    )
        check_passthrough(self.env_passthrough)

    def to_core(self) -> core.Policy:
        return core.Policy(
            core.Mode(self.mode),
            core.Network(self.network),
            tuple(self.writable_roots),
            tuple(self.deny_read),
            tuple(self.env_passthrough),
        )

    @classmethod
    def of(cls, policy: core.Policy) -> SandboxPolicy:
        return cls(
            mode=policy.mode.value,
            network=policy.network.value,
            writable_roots=list(policy.writable_roots),
            deny_read=list(policy.deny_read),
            env_passthrough=list(policy.env_passthrough),
        )

    @property
    def confined(self) -> bool:
        """Whether anything runs confined under this policy."""
        return self.mode != "off"


class ProjectSandbox(Record):
    """`sandbox` in a project's settings file: each key may only tighten the user's policy."""

    mode: ModeName | None = None
    network: NetworkName | None = None
    writable_roots: list[str] | None = None
    deny_read: list[str] | None = None
    env_passthrough: list[str] | None = None

    def __post_init__(self) -> None:
        if self.env_passthrough is not None:
            check_passthrough(self.env_passthrough)

    def to_core(self) -> core.ProjectPolicy:
        return core.ProjectPolicy(
            None if self.mode is None else core.Mode(self.mode),
            None if self.network is None else core.Network(self.network),
            None if self.writable_roots is None else tuple(self.writable_roots),
            None if self.deny_read is None else tuple(self.deny_read),
            None if self.env_passthrough is None else tuple(self.env_passthrough),
        )


def check_passthrough(names: list[str]) -> None:
    """Refuse an `env_passthrough` entry that is not a variable's name, or that names eukhe's own secret (which
    no launch ever gets), naming the entry."""
    for index, name in enumerate(names):
        problem = passthrough_problem(name)
        if problem is not None:
            raise InputError(
                "bad_setting",
                f"sandbox.env_passthrough[{index}] {problem}",
                field=f"sandbox.env_passthrough[{index}]",
                expected="an environment variable's name",
            )


class SandboxChoice(Record):
    """A policy's mode or network chosen where a session is made (`--sandbox MODE --network on|off`), over the
    settings files' policy (None: the files' value)."""

    mode: ModeName | None = None
    network: NetworkName | None = None


UNCONFINED = SandboxPolicy(mode="off")
"""The policy of a session recorded before policies existed: not confined."""
