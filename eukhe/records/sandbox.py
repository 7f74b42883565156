"""The sandbox policy as settings and as the session header records it (docs/sandbox.md; rules in
`eukhe.core.sandbox`)."""

from __future__ import annotations

from typing import Literal

import msgspec

from eukhe.core import allowlist
from eukhe.core import sandbox as core
from eukhe.core.secret_env import passthrough_problem
from eukhe.errors import InputError
from eukhe.records.base import Record

ModeName = Literal["workspace_write", "read_only", "off"]
NetworkName = Literal["on", "allowlist", "off"]


class SandboxPolicy(Record):
    """`sandbox` in the user settings and in a session: `mode`, `network`, extra `writable_roots`, the `deny_read`
    paths (`~` is the user's home), the `env_passthrough` variables a confined launch gets although they look like
    secrets, and with the network an allowlist, the `allow_domains` (a name, `*.NAME` for the names below it, or an
    IP address), the `deny_domains` (which win) and the `allow_ports`. A missing key keeps its default."""

    mode: ModeName = "workspace_write"
    network: NetworkName = "on"
    writable_roots: list[str] = msgspec.field(default_factory=list)
    deny_read: list[str] = msgspec.field(default_factory=lambda: list(core.CREDENTIALS))
    env_passthrough: list[str] = msgspec.field(default_factory=list)
    allow_domains: list[str] = msgspec.field(default_factory=lambda: list(allowlist.DEFAULT_ALLOWED_NAMES))
    deny_domains: list[str] = msgspec.field(default_factory=list)
    allow_ports: list[int] = msgspec.field(default_factory=lambda: list(allowlist.DEFAULT_PORTS))

    def __post_init__(self) -> None:
        check_domains(self.allow_domains, self.deny_domains, self.allow_ports)
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
            tuple(self.allow_domains),
            tuple(self.deny_domains),
            tuple(self.allow_ports),
        )

    @classmethod
    def of(cls, policy: core.Policy) -> SandboxPolicy:
        return cls(
            mode=policy.mode.value,
            network=policy.network.value,
            writable_roots=list(policy.writable_roots),
            deny_read=list(policy.deny_read),
            env_passthrough=list(policy.env_passthrough),
            allow_domains=list(policy.allow_domains),
            deny_domains=list(policy.deny_domains),
            allow_ports=list(policy.allow_ports),
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
    allow_domains: list[str] | None = None
    deny_domains: list[str] | None = None
    allow_ports: list[int] | None = None

    def __post_init__(self) -> None:
        if self.env_passthrough is not None:
            check_passthrough(self.env_passthrough)
        check_domains(self.allow_domains or [], self.deny_domains or [], self.allow_ports or [])

    def to_core(self) -> core.ProjectPolicy:
        return core.ProjectPolicy(
            None if self.mode is None else core.Mode(self.mode),
            None if self.network is None else core.Network(self.network),
            None if self.writable_roots is None else tuple(self.writable_roots),
            None if self.deny_read is None else tuple(self.deny_read),
            None if self.env_passthrough is None else tuple(self.env_passthrough),
            None if self.allow_domains is None else tuple(self.allow_domains),
            None if self.deny_domains is None else tuple(self.deny_domains),
            None if self.allow_ports is None else tuple(self.allow_ports),
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
    """A policy's mode or network chosen where a session is made (`--sandbox MODE --network on|allowlist|off`), over
    the settings files' policy (None: the files' value), and more `allow_domains` (`--allow-domain NAME`)."""

    mode: ModeName | None = None
    network: NetworkName | None = None
    allow_domains: list[str] | None = None

    def __post_init__(self) -> None:
        check_domains(self.allow_domains or [], [], [])


def check_domains(allow: list[str], deny: list[str], ports: list[int]) -> None:
    """InputError (`bad_setting`) naming the first entry that is no pattern (`eukhe.core.allowlist.pattern`) or no
    port."""
    for key, texts in (("allow_domains", allow), ("deny_domains", deny)):
        for index, text in enumerate(texts):
            found = allowlist.pattern(text) if isinstance(text, str) else allowlist.Bad("not a string")
            if isinstance(found, allowlist.Bad):
                raise InputError(
                    "bad_setting",
                    f"sandbox.{key}[{index}] is no domain pattern ({found.reason}): {text!r}",
                    field=f"sandbox.{key}[{index}]",
                    expected="a name (example.org), *.example.org for the names below it, or an IP address",
                )
    for index, port in enumerate(ports):
        if not 0 < port < 65536:
            raise InputError(
                "bad_setting",
                f"sandbox.allow_ports[{index}] is no port: {port}",
                field=f"sandbox.allow_ports[{index}]",
                expected="a port from 1 to 65535",
            )


UNCONFINED = SandboxPolicy(mode="off")
"""The policy of a session recorded before policies existed: not confined."""
