"""A prompt child's model: the OpenAI Chat Completions protocol over HTTP (`POST {base_url}/chat/completions`).

The client is `httpx2`, the httpx the MCP SDK already brings: a well-kept async client with timeouts, connection
reuse and cancellation that closes the connection in flight (a cancelled child aborts its request). The retries are
the core's (`eukhe.core.agent.after_failure`): a 429, a 5xx or a connection error is tried again after a backoff (or
Retry-After), a bounded number of times; a request past `request_timeout_s` ends that attempt. The API key goes in
the `Authorization` header only: no message, error or log here carries it.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx2
import msgspec

from eukhe.clock import Clock, sleep_ms
from eukhe.core.agent import GiveUp, RetryPolicy, after_failure
from eukhe.records.settings import ModelProvider

MESSAGE_SHOWN = 300
"""How much of a failed response's body an error message quotes."""


class ModelFailedError(Exception):
    """The model failed after its retries: the last HTTP status (None: no HTTP answer) and what went wrong."""

    def __init__(self, status: int | None, message: str, attempts: int) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.attempts = attempts


class NotJson:
    """A 2xx response whose body is not JSON: the loop tells the model and goes on."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


def policy_of(provider: ModelProvider) -> RetryPolicy:
    """The retry policy a `model` setting gives."""
    return RetryPolicy(
        max_retries=provider.max_retries, backoff_ms=provider.backoff_ms, max_backoff_ms=provider.max_backoff_ms
    )


def _said(response: httpx2.Response) -> str:
    """What a failed response says: its `error.message` when it is an OpenAI error body, else its text (cut)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
        if isinstance(message, str):
            return message[:MESSAGE_SHOWN]
    return response.text[:MESSAGE_SHOWN]


@functools.cache
def tls() -> ssl.SSLContext:
    """The TLS context every child's client shares (loading the CA bundle takes a fifth of a second: once per
    process, not once per child)."""
    return httpx2.create_ssl_context()


class ChatModel:
    """One child's connection to its model: `complete(messages, tools)` answers a response body, after retries."""

    def __init__(self, provider: ModelProvider, api_key: str, clock: Clock) -> None:
        self.provider = provider
        self.url = provider.base_url.rstrip("/") + "/chat/completions"
        self.policy = policy_of(provider)
        self.clock = clock
        self._client = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
            timeout=httpx2.Timeout(provider.request_timeout_s),
            verify=tls(),
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        """The response body of one completion (or `NotJson`); ModelFailedError once the retries are spent."""
        payload = msgspec.json.encode({"model": self.provider.name, "messages": messages, "tools": tools})
        failures = 0
        while True:
            status: int | None
            retry_after: str | None = None
            try:
                response = await self._client.post(self.url, content=payload)
            except httpx2.TimeoutException:
                status, message = None, f"no answer within {self.provider.request_timeout_s:g} s"
            except httpx2.HTTPError as error:  # refused, reset, cut: no HTTP answer
                status, message = None, f"{type(error).__name__}: {error}"
            else:
                if 200 <= response.status_code < 300:
                    try:
                        return msgspec.json.decode(response.content)
                    except msgspec.DecodeError as error:
                        return NotJson(f"the response body is not JSON: {error}")
                status, message = response.status_code, _said(response)
                retry_after = response.headers.get("retry-after")
            failures += 1
            decision = after_failure(failures, status, retry_after, self.policy)
            if isinstance(decision, GiveUp):
                raise ModelFailedError(status, message, failures)
            await sleep_ms(self.clock, decision.delay_ms)
