"""What a session's network allowlist saw: each connection a confined process asked eukhe's proxy for (docs/sandbox.md
"The network allowlist"; `eukhe session network`, `Session.network()`)."""

from __future__ import annotations

from typing import Literal

import msgspec

from eukhe.records.base import Record

Verdict = Literal["allowed", "refused", "failed"]


class NetworkAttempt(Record):
    """One connection through the proxy: when it began (`started_ms`, wall clock, ms since the epoch), what it asked
    (`kind`: `connect` for a CONNECT tunnel, `http` for a plain request, `bad` for what the proxy would not read;
    `method` of a plain request), the `name` and `port` it named (`name` null when none could be read), the
    `verdict` (`allowed`; `refused` by the policy or as a bad request, with the `setting` that decided and the
    `detail`; `failed`: allowed, but the host could not be reached), the bytes each way (`sent`: from the sandbox,
    `received`: to it) and how long it lasted (`duration_ms`)."""

    started_ms: int
    kind: Literal["connect", "http", "bad"]
    name: str | None
    port: int | None
    verdict: Verdict
    method: str | None = None
    setting: str | None = None
    detail: str | None = None
    sent: int = 0
    received: int = 0
    duration_ms: int = 0


class NetworkLog(Record):
    """A session's connection attempts, oldest first (`network` is its policy's network: `on`, `allowlist` or `off`;
    only `allowlist` has a proxy, so only it records attempts)."""

    network: str
    attempts: list[NetworkAttempt] = msgspec.field(default_factory=list)
