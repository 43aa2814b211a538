"""The Provider protocol, usage accounting types and agentd's retry loop (CONTRACTS.md §6).

Owns: `Usage`, `ModelRequest`, `ModelResponse`, `StreamEvent`, `Provider`, `run_with_retries`,
`import_off_loop` (how a provider module loads its SDK on first use).
Must not import an SDK (anthropic/openai are imported lazily by their own modules only).

History format everywhere in agentd is the Anthropic Messages form: a message is
`{"role": "user"|"assistant", "content": [block, ...]}` with blocks `text`, `tool_use`, `tool_result`
(and `image`). Providers for other APIs translate at their edge.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, Protocol
from urllib.parse import urlparse

from agentd.clock import Clock
from agentd.errors import ProviderError

log = logging.getLogger("agentd.providers")


STREAM_YIELD_EVERY = 16  # stream events


async def pace(n: int) -> None:
    """Called after the `n`-th event of a stream: every `STREAM_YIELD_EVERY` events, let the event loop run
    other work. A burst of buffered events (a fast server, a long reply arriving at once) is otherwise
    handled in one step of the loop: 16-34 ms of CPU measured (issue 16 §1, break16 F6)."""
    if n % STREAM_YIELD_EVERY == 0:
        await asyncio.sleep(0)


async def import_off_loop(name: str) -> ModuleType:
    """The module `name` (an SDK), imported in a worker thread the first time: importing `anthropic` takes
    0.3-2 s of CPU, which on the event loop stalled every session of a shared daemon (issue 16). Also waits
    off the loop while another thread is still importing it. Raises ImportError."""
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        return module
    return await asyncio.to_thread(importlib.import_module, name)


@dataclass
class Usage:
    """Token counts of one response, in tokens. `None` means the provider did not report it (unknown, never 0).

    `input_tokens` is the uncached tail only; the prompt size is the sum of the three input fields
    (CONTRACTS.md §6; the seed counted only input + output, which collapses once caching works).
    `cache_creation_1h` / `cache_creation_5m` split the write by TTL when the provider reports it.
    """

    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_creation_input_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0
    cache_creation_1h: int | None = None
    cache_creation_5m: int | None = None

    @property
    def prompt_tokens(self) -> int:
        """Prompt size = input + cache creation + cache read (unknown counts as 0 here)."""
        return (
            (self.input_tokens or 0)
            + (self.cache_creation_input_tokens or 0)
            + (self.cache_read_input_tokens or 0)
        )

    @property
    def context_tokens(self) -> int:
        """Exact context size after this response: prompt size + output tokens."""
        return self.prompt_tokens + (self.output_tokens or 0)

    def to_json(self) -> dict[str, int | None]:
        """Wire/log shape with camelCase keys; unknown counts are `null`."""
        out = {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheCreationInputTokens": self.cache_creation_input_tokens,
            "cacheReadInputTokens": self.cache_read_input_tokens,
        }
        if self.cache_creation_1h is not None or self.cache_creation_5m is not None:  # priced differently
            out["cacheCreation1hInputTokens"] = self.cache_creation_1h
            out["cacheCreation5mInputTokens"] = self.cache_creation_5m
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        """The inverse of `to_json` (a stored `usage` record); missing counts are unknown."""
        return cls(
            input_tokens=data.get("inputTokens"),
            output_tokens=data.get("outputTokens"),
            cache_creation_input_tokens=data.get("cacheCreationInputTokens"),
            cache_read_input_tokens=data.get("cacheReadInputTokens"),
            cache_creation_1h=data.get("cacheCreation1hInputTokens"),
            cache_creation_5m=data.get("cacheCreation5mInputTokens"),
        )

    def accounting_line(self) -> str:
        """The stderr line of CONTRACTS.md §6: `[turn · in=… out=… cache_read=… cache_write=…]`; an unknown
        count is `?`, except a cache write, which is left out when the provider does not report one (chat
        completions never do: `cache_write=?` on every line told nothing; new-user R7)."""

        def f(v: int | None) -> str:
            return "?" if v is None else str(v)

        write = self.cache_creation_input_tokens
        return (
            f"[turn · in={f(self.input_tokens)} out={f(self.output_tokens)} "
            f"cache_read={f(self.cache_read_input_tokens)}{'' if write is None else f' cache_write={write}'}]"
        )


@dataclass
class ModelRequest:
    """One model call, in Messages API shape.

    `system`: list of text blocks (may carry `cache_control`); `tools`: tool definitions
    (`{"name", "description", "input_schema"}`, maybe `cache_control`); `messages`: the history plus
    request-only blocks; `max_tokens`: output cap in tokens. `purpose` is "turn" or "summary" (logging only).
    `reminder_blocks`: how many trailing text blocks of the final user message are request-only reminders
    (CONTRACTS.md §3); the Messages API gets them there, the OpenAI-compatible provider as a system message at
    the tail of the request (issue 17). `checked` and `marked`: what the builder vouches for (the Context's
    checked history prefix, `agentd.core.validate.Checked`, and the messages it put breakpoints on), so the
    validator checks only the rest (issue 16); None: everything is checked. `images`: the indexes of the only
    messages that may hold an image (`agentd.images.request_safe`); None: any may.

    The messages are shared with the session's history (issue 16: no copy per request): whoever gets a
    request reads it and never changes it in place; a changed request is a new list with new messages
    (`agentd.core.todos.apply_reminder`).
    """

    model: str
    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    max_tokens: int
    purpose: Literal["turn", "summary"] = "turn"
    reminder_blocks: int = 0
    checked: Any = field(default=None, repr=False, compare=False)
    marked: tuple[int, ...] = field(default=(), repr=False, compare=False)
    images: tuple[int, ...] | None = field(default=None, repr=False, compare=False)

    def body(self) -> dict[str, Any]:
        """The Messages API body (without `stream`), keys in a fixed order."""
        b: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.system:
            b["system"] = self.system
        if self.tools:
            b["tools"] = self.tools
        b["messages"] = self.messages
        return b


@dataclass
class ModelResponse:
    """The complete assistant reply.

    `content`: blocks in history form (`text`, `tool_use` with parsed `input`); `stop_reason`: `end_turn`,
    `tool_use`, `max_tokens`, `refusal`, `stop_sequence` or `pause_turn`; `truncated_tool_use_ids`: ids of
    tool_use blocks whose JSON was cut off (stop_reason `max_tokens`), which must never run, and
    `truncated_tool_names` their tool names by id (the model is told which call did not run; issue 9 H3).
    `extra`: provider-specific fields to keep on the stored message (e.g. `reasoning_content`).
    `invalid_tool_inputs`: tool_use id -> the error text the model gets instead of a run (a malformed call the
    provider recovered from text, `agentd.providers.text_calls`); the loop answers those without running them.
    """

    id: str
    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str = ""
    truncated_tool_use_ids: list[str] = field(default_factory=list)
    truncated_tool_names: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    invalid_tool_inputs: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamEvent:
    """Something the caller may show while a reply streams.

    kind `text_delta`: `text` holds new text. `block_done`: `block` is a finished content block (history form).
    `retry`: the partial reply so far is void; `attempt` (1-based), `delay_s` and `reason` say why.
    """

    kind: Literal["text_delta", "block_done", "retry"]
    text: str = ""
    block: dict[str, Any] | None = None
    attempt: int = 0
    delay_s: float = 0.0
    reason: str = ""


OnEvent = Callable[[StreamEvent], None]


class Provider(Protocol):
    """A model endpoint. Implementations: anthropic.py, openai_compat.py, scripted.py.

    `stream()` makes exactly one attempt (no retries: `run_with_retries` does those) and raises
    `ProviderError` with `retryable` and `retry_after_s` set on failure. Cancellation is asyncio
    cancellation: the caller cancels the task.
    """

    name: str
    model: str

    async def stream(self, request: ModelRequest, on_event: OnEvent) -> ModelResponse: ...

    async def aclose(self) -> None: ...


def is_local(base_url: str | None) -> bool:
    """True when `base_url` points at this machine (Ollama, llama.cpp and vLLM need no key there; a refused
    connection fails fast, issue 9 H11): `localhost` and `*.localhost` (RFC 6761), any loopback address
    (all of 127.0.0.0/8, ::1, ::ffff:127.x) and the unspecified address (0.0.0.0, ::), which connects here."""
    host = (urlparse(base_url).hostname or "").rstrip(".").lower() if base_url else ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return any(a.is_loopback or a.is_unspecified for a in (ip, mapped) if a is not None)


DEFAULT_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0)


async def run_with_retries(
    attempt: Callable[[int], Awaitable[ModelResponse]],
    *,
    clock: Clock,
    max_total_s: float,
    on_retry: Callable[[int, float, ProviderError], None] | None = None,
) -> ModelResponse:
    """Call `attempt(n)` (n = 1, 2, ...) until it succeeds or retries are exhausted (CONTRACTS.md §6).

    Retries a `ProviderError` with `retryable=True` (429, 529, 5xx, a mid-stream overload, a cut or timed-out
    attempt), waiting the server's `retry_after_s` when given, else an exponential backoff. The retry time
    is measured on `clock` from the end of the first failed attempt (time the machine slept during that
    attempt, a laptop closed mid-request, is not retry time); it stops when the next wait would take it past
    `max_total_s` seconds, or when the error's own `max_attempts` is reached (a refused connection to this
    machine: 2, H11), and raises the last error (not retryable) saying how many attempts and seconds were
    spent. Non-retryable errors propagate at once.
    """
    first_failure: float | None = None
    n = 0
    while True:
        n += 1
        try:
            return await attempt(n)
        except ProviderError as err:
            if not err.retryable:
                raise
            now = clock.now()
            first_failure = now if first_failure is None else first_failure
            spent = now - first_failure
            delay = (
                err.retry_after_s
                if err.retry_after_s is not None
                else DEFAULT_BACKOFF_S[min(n - 1, len(DEFAULT_BACKOFF_S) - 1)]
            )
            if err.max_attempts is not None and n >= err.max_attempts:
                raise _gave_up(err, f"gave up after {n} attempts") from err
            if spent + delay > max_total_s:
                raise _gave_up(
                    err,
                    f"gave up after {n} attempts, {spent:.0f} s of retries within "
                    f"retries.max_total_s={max_total_s:g} s",
                ) from err
            # `shown_as_update`: a client that shows the `retry` update itself drops this record (agentd run)
            log.warning("provider %s: %s; retry %d in %.3f s", err.provider, err.message, n, delay,
                        extra={"shown_as_update": on_retry is not None})  # fmt: skip
            if on_retry is not None:
                on_retry(n, delay, err)
            await clock.sleep(delay)


def _gave_up(err: ProviderError, why: str) -> ProviderError:
    """The final, not retryable error of a request whose retries ran out: the last error and `why`."""
    return ProviderError(
        f"{err.message} ({why})",
        provider=err.provider,
        reason="unavailable",
        http_status=err.http_status,
        retryable=False,
    )
