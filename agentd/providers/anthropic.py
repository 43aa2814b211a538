"""The Anthropic Messages API provider (CONTRACTS.md §6, §8, §10).

Owns: `AnthropicProvider`, the stream accumulator `MessageAccumulator` (raw SSE events -> history blocks, usage,
truncated tool_use ids), `usage_from_anthropic`, and the HTTP error mapping shared by every provider
(`provider_error_for_status`, `retry_after_s`, `scrub`).

Only this module imports `anthropic`, and only inside functions (start-up must not pay for the SDK).
Must not import pygls, lsprotocol, acp or an adapter.

Choices:
- The stream is read as raw events (`messages.create(stream=True)`), not through the SDK's `MessageStream`,
  whose partial-JSON parser hides a tool_use cut off by `max_tokens`.
- `message_delta.usage` counts are cumulative: each count present overwrites, none is added.
- A tool_use whose input JSON does not parse at `content_block_stop` gets no `block_done`. When the reply hit
  `max_tokens` (or never finished) it is kept out of `ModelResponse.content` and its id goes into
  `truncated_tool_use_ids`: it must never run, and leaving it out keeps the history valid (no tool_use without
  a tool_result). When the reply ended otherwise (a server that is not the Messages API, such as a local
  model behind an Anthropic-compatible endpoint, wrote bad JSON) it is stored with `{}` and answered
  `invalid_arguments` (`invalid_tool_inputs`), as the OpenAI-compatible provider does, instead of telling
  the model it hit max_tokens (issue 9 H3 class, break9).
- Empty text blocks, `thinking` blocks and unknown block types are dropped (agentd never asks for thinking; an
  empty text block would make the next request a 400).
- Messages are sent with only `role` and `content`: other top-level keys a provider left on a stored message
  (`reasoning_content` from openai_compat) are dropped here.
- The API key is passed to the SDK explicitly and never appears in a log line or error text (§10).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from typing import Any, cast

from agentd.clock import Clock, SystemClock
from agentd.errors import ContextExceeded, ProviderError
from agentd.images import request_safe
from agentd.providers.base import (
    ModelRequest,
    ModelResponse,
    OnEvent,
    StreamEvent,
    Usage,
    import_off_loop,
    is_local,
    pace,
)
from agentd.providers.http import ClientKey, ClientPool, Lease, shared_pool

log = logging.getLogger("agentd.providers.anthropic")

RETRYABLE_STATUSES = frozenset({408, 409, 500, 502, 503, 504, 529})
# Error types of a mid-stream `event: error` (HTTP status 200) that another attempt cannot fix.
FATAL_STREAM_ERROR_TYPES = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error"}
)
MESSAGE_KEYS = ("role", "content")
DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's default


# ---------------------------------------------------------------- shared error helpers


def scrub(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` (the API key) replaced by `***` (CONTRACTS.md §10)."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "***")
    return text


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """The server's retry hint in seconds: `retry-after-ms` (milliseconds) wins over `retry-after` (seconds).

    An HTTP-date `retry-after`, a negative or unparsable value gives None (the retry loop then backs off).
    """
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = lower.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / scale
        except ValueError:
            continue
        if value >= 0:
            return value
    return None


def provider_error_for_status(
    *,
    provider: str,
    service: str,
    status: int,
    message: str,
    error_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    api_key_env: str = "",
) -> ProviderError:
    """Map an HTTP error of a model service to a `ProviderError` (PROTOCOL.md §11, CONTRACTS.md §6).

    `service` names the service in the text ("Anthropic"); `message` is the service's own error text, quoted
    as is. 401/403 -> `authentication`; 429 -> retryable `unavailable` with `retry_after_s` from the headers;
    408/409/5xx/529 -> retryable `unavailable`; status 200 is a mid-stream `event: error` (retryable unless its
    `error_type` is a request error; `ContextExceeded` when it says the prompt does not fit); 400/413 saying so
    -> `ContextExceeded`; other 4xx -> `bad_request`.
    """
    env = api_key_env or "the API key variable"
    detail = f": {message}" if message else ""
    if status in (401, 403):
        text = (
            f"{service} rejected the API key (HTTP {status}). Set {env} in the environment that launches "
            "your editor, then restart agentd."
        )
        if status == 403 and message:
            text = f"{service} refused the request (HTTP 403){detail}. Check the key in {env} and its access."
        return ProviderError(text, provider=provider, reason="authentication", http_status=status)
    if status == 429:
        return ProviderError(
            f"{service} rate limit (HTTP 429){detail}",
            provider=provider,
            reason="unavailable",
            http_status=status,
            retryable=True,
            retry_after_s=retry_after_s(headers),
        )
    if status == 200:
        kind = error_type or "error"
        if is_context_exceeded(message, error_type):  # sent in the stream (the headers were already out)
            text = f"{service} stream failed ({kind}){detail}"
            return ContextExceeded(
                text, provider=provider, http_status=None, window_tokens=stated_window(message)
            )
        return ProviderError(
            f"{service} stream failed ({kind}){detail}",
            provider=provider,
            reason="bad_request" if kind in FATAL_STREAM_ERROR_TYPES else "unavailable",
            http_status=None,
            retryable=kind not in FATAL_STREAM_ERROR_TYPES,
        )
    if status in RETRYABLE_STATUSES or status >= 500:
        return ProviderError(
            f"{service} is unavailable (HTTP {status}){detail}",
            provider=provider,
            reason="unavailable",
            http_status=status,
            retryable=True,
            retry_after_s=retry_after_s(headers),
        )
    text = f"{service} rejected the request (HTTP {status}){detail}"
    if status in (400, 413) and is_context_exceeded(message, error_type):
        return ContextExceeded(
            text, provider=provider, http_status=status, window_tokens=stated_window(message)
        )
    return ProviderError(text, provider=provider, reason="bad_request", http_status=status)


_EXCEEDED = re.compile(
    r"exceeds? the (?:available )?context|context[_ ]length[_ ]exceeded|maximum context length|prompt is too long|"
    r"context window|too many tokens|input is too long",
    re.I,
)
_STATED = re.compile(r"(?:maximum context length is|context size of|n_ctx\W+|> )\s*(\d{3,})", re.I)


def is_context_exceeded(message: str, error_type: str | None = None) -> bool:
    """Whether a 400/413 error text (or its type) says the prompt does not fit the model's window (issue 17)."""
    return error_type in ("exceed_context_size_error", "context_length_exceeded") or bool(
        _EXCEEDED.search(message)
    )


def stated_window(message: str) -> int | None:
    """The window in tokens an error text states ("maximum context length is 4096 tokens", "> 200000 maximum")."""
    m = _STATED.search(message)
    return int(m.group(1)) if m else None


LOCAL_REFUSED_ATTEMPTS = 2  # a refused connection on this machine is retried once, not for a minute (H11)
REQUEST_TIMEOUT_S = 600.0  # `retries.request_timeout_s`: one attempt, in all
READ_TIMEOUT_S = 300.0  # `retries.read_timeout_s`: the longest silence of the server


def malformed_stream(*, provider: str, service: str, exc: ValueError) -> ProviderError:
    """The retryable error of a stream carrying an event that is not valid JSON (the reply so far is void)."""
    return ProviderError(
        f"{service} sent a malformed stream event ({type(exc).__name__}: {str(exc)[:120]}); the reply was "
        "dropped",
        provider=provider,
        reason="unavailable",
        retryable=True,
    )


def attempt_timeout(*, provider: str, service: str, seconds: float) -> ProviderError:
    """The retryable error of an attempt cut by `retries.request_timeout_s` (an endless or stalled stream)."""
    return ProviderError(
        f"{service} sent no complete reply within {seconds:g} s (retries.request_timeout_s); the attempt "
        "was cut",
        provider=provider,
        reason="unavailable",
        retryable=True,
    )


def connection_error(
    *,
    provider: str,
    service: str,
    base_url: str | None,
    exc: BaseException,
    secret: str | None = None,
    url: str | None = None,
) -> ProviderError:
    """A retryable `unavailable` error for a refused connection, a timeout or a stream cut mid-way.

    `base_url` is named in the text (or None when `service` names it); `url` (default `base_url`) is the
    endpoint, for the rule that a refused connection to this machine (nothing listens there) gets
    `LOCAL_REFUSED_ATTEMPTS` attempts at most."""
    where = f" at {base_url}" if base_url else ""
    target = url or base_url
    if _refused(exc) and is_local(target):
        return ProviderError(
            f"{service} refused the connection{where}: nothing is listening there. Start the server, or "
            "fix --base-url (base_url in the config)",
            provider=provider,
            reason="unavailable",
            retryable=True,
            max_attempts=LOCAL_REFUSED_ATTEMPTS,
        )
    cause = root_cause(exc)
    return ProviderError(
        scrub(f"{service} is unreachable{where} ({type(cause).__name__}: {cause or 'no detail'})", secret),
        provider=provider,
        reason="unavailable",
        retryable=True,
    )


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of `exc`'s chain (the SDKs wrap a reset or timeout as "Connection error.")."""
    seen: set[int] = set()
    cur = exc
    while id(cur) not in seen:
        seen.add(id(cur))
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            break
        cur = nxt
    return cur


def _refused(exc: BaseException) -> bool:
    """True when a ConnectionRefusedError is anywhere in the exception's chain (the SDK wraps it twice)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ConnectionRefusedError):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


# ---------------------------------------------------------------- usage and the stream accumulator


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_from_anthropic(usage: Mapping[str, Any] | None) -> Usage:
    """Map a Messages API `usage` object (dict) to `Usage`; a field absent or null stays None (unknown).

    `cache_creation.ephemeral_1h_input_tokens` / `ephemeral_5m_input_tokens` fill the TTL split when present.
    """
    u = usage or {}
    raw_split = u.get("cache_creation")
    split: Mapping[str, Any] = raw_split if isinstance(raw_split, Mapping) else {}
    return Usage(
        input_tokens=_count(u.get("input_tokens")),
        output_tokens=_count(u.get("output_tokens")),
        cache_creation_input_tokens=_count(u.get("cache_creation_input_tokens")),
        cache_read_input_tokens=_count(u.get("cache_read_input_tokens")),
        cache_creation_1h=_count(split.get("ephemeral_1h_input_tokens")),
        cache_creation_5m=_count(split.get("ephemeral_5m_input_tokens")),
    )


def apply_delta_usage(usage: Usage, delta: Mapping[str, Any] | None) -> Usage:
    """`usage` after a `message_delta.usage`: each count present overwrites (they are cumulative), never adds."""
    d = delta or {}
    for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = _count(d.get(key))
        if value is not None:
            setattr(usage, key, value)
    split = d.get("cache_creation")
    if isinstance(split, Mapping):
        for key, attr in (
            ("ephemeral_1h_input_tokens", "cache_creation_1h"),
            ("ephemeral_5m_input_tokens", "cache_creation_5m"),
        ):
            value = _count(split.get(key))
            if value is not None:
                setattr(usage, attr, value)
    return usage


class MessageAccumulator:
    """Folds raw Messages API stream events (dicts, TESTING.md §3.4) into one `ModelResponse`.

    `feed(event)` returns the `StreamEvent`s to show: a `text_delta` per text delta and a `block_done` per
    finished block (history form). `finished` turns true at `message_stop`. Unknown events and `ping` are ignored.
    """

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.stop_reason = ""
        self.usage = Usage(None, None, None, None)
        self.finished = False
        self.started = False
        self._open: dict[int, dict[str, Any]] = {}
        self._done: list[tuple[int, dict[str, Any]]] = []
        self._bad_json: list[tuple[int, dict[str, Any], str]] = []  # (index, tool_use start, parse error)

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.started = True
            self.id = str(message.get("id") or "")
            self.model = str(message.get("model") or "")
            self.usage = usage_from_anthropic(message.get("usage"))
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            self._open[int(event.get("index", 0))] = {"block": block, "text": [], "json": []}
        elif kind == "content_block_delta":
            return self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop(int(event.get("index", 0)))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            apply_delta_usage(self.usage, event.get("usage"))
        elif kind == "message_stop":
            self.finished = True
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[StreamEvent]:
        state = self._open.get(index)
        if state is None:
            return []
        if delta.get("type") == "text_delta" and state["block"].get("type") == "text":
            text = str(delta.get("text") or "")
            state["text"].append(text)
            return [StreamEvent("text_delta", text=text)] if text else []
        if delta.get("type") == "input_json_delta":
            state["json"].append(str(delta.get("partial_json") or ""))
        return []

    def _stop(self, index: int) -> list[StreamEvent]:
        state = self._open.pop(index, None)
        if state is None:
            return []
        raw = state["block"]
        if raw.get("type") == "text":
            text = str(raw.get("text") or "") + "".join(state["text"])
            if not text:
                return []
            block: dict[str, Any] = {"type": "text", "text": text}
        elif raw.get("type") == "tool_use":
            source = "".join(state["json"])
            try:
                tool_input = json.loads(source) if source.strip() else dict(raw.get("input") or {})
            except ValueError as exc:
                self._bad_json.append((index, raw, str(exc)))  # cut off, or bad JSON: known at the end
                return []
            block = {"type": "tool_use", "id": raw.get("id"), "name": raw.get("name"), "input": tool_input}
        else:
            return []
        self._done.append((index, block))
        return [StreamEvent("block_done", block=block)]

    def response(self) -> ModelResponse:
        """The reply so far: finished blocks in index order; open tool_use blocks count as truncated, and so
        do those whose JSON did not parse when the reply hit max_tokens or never finished (else they are
        stored with `{}` and answered `invalid_arguments`)."""
        cut = self.stop_reason == "max_tokens" or not self.finished
        truncated: list[str] = []
        names: dict[str, str] = {}
        done = list(self._done)
        invalid: dict[str, str] = {}
        for index, raw, error in self._bad_json:
            if cut:
                truncated.append(str(raw.get("id")))
                names[truncated[-1]] = str(raw.get("name") or "")
            else:
                done.append(
                    (index, {"type": "tool_use", "id": raw.get("id"), "name": raw.get("name"), "input": {}})
                )
                invalid[str(raw.get("id"))] = (
                    f"invalid_arguments: input: not valid JSON ({error}); send the call again with a JSON object"
                )
        for s in self._open.values():
            if s["block"].get("type") == "tool_use":
                truncated.append(str(s["block"].get("id")))
                names[truncated[-1]] = str(s["block"].get("name") or "")
        return ModelResponse(
            id=self.id,
            content=[block for _, block in sorted(done, key=lambda item: item[0])],
            invalid_tool_inputs=invalid,
            stop_reason=self.stop_reason,
            usage=self.usage,
            model=self.model,
            truncated_tool_use_ids=truncated,
            truncated_tool_names={t: names[t] for t in truncated},
        )


def wire_body(request: ModelRequest) -> dict[str, Any]:
    """The Messages API body of `request`, messages reduced to `role` and `content`, and every image the API
    would refuse replaced by a note (`agentd.images.request_safe`: a log written before that rule may
    hold one, break11)."""
    body = request.body()
    if set().union(*request.messages) - set(MESSAGE_KEYS):  # the keys of every message, gathered in C
        body["messages"] = [{k: m[k] for k in MESSAGE_KEYS if k in m} for m in request.messages]
    body["messages"] = request_safe(body["messages"], request.images)
    return body


# ---------------------------------------------------------------- the provider

STREAM_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)


class AnthropicProvider:
    """Streams Messages API replies with the official SDK (its retries off; `run_with_retries` retries).

    `model`: model id; `api_key`: the key (from the environment variable `api_key_env` names); `base_url`: None
    for the SDK default; `clock` is kept for symmetry with the other providers (retries use the caller's).
    """

    name = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: str,
        base_url: str | None = None,
        clock: Clock | None = None,
        *,
        api_key_env: str = "ANTHROPIC_API_KEY",
        timeout_s: float = REQUEST_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
        pool: ClientPool | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.clock = clock or SystemClock()
        self.api_key_env = api_key_env
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._key = ClientKey(base_url or DEFAULT_BASE_URL, min(read_timeout_s, timeout_s), timeout_s)
        self._pool = pool or shared_pool()
        self._lease: Lease | None = None
        self._client: Any = None

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _get_client(self) -> Any:
        """The SDK client over the pool's shared HTTP client of this configuration (built on first use)."""
        if self._client is None:
            import anthropic

            self._lease = self._pool.lease(self._key)
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self._key.base_url, max_retries=0,
                timeout=self._lease.client.timeout, http_client=self._lease.client,
            )  # fmt: skip
        return self._client

    async def stream(self, request: ModelRequest, on_event: OnEvent) -> ModelResponse:
        """One attempt: stream the reply, calling `on_event` per text delta and finished block.

        Raises `ProviderError` (retryable for 429, 5xx, 529, a mid-stream error event, a dropped connection or a
        stream that ends without `message_stop`).
        """
        anthropic = await import_off_loop("anthropic")
        client = self._get_client()
        acc = MessageAccumulator()
        body = wire_body(request)
        try:
            async with asyncio.timeout(self._timeout_s):
                events = await cast(Any, client.messages).create(**body, stream=True)
                async with events:
                    n = 0
                    async for event in events:
                        n += 1
                        await pace(n)  # every event counts, skipped ones too (a burst of unknown types)
                        if getattr(event, "type", None) not in STREAM_EVENTS:
                            continue
                        for out in acc.feed(event.to_dict()):
                            on_event(out)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            raise attempt_timeout(provider=self.name, service="Anthropic", seconds=self._timeout_s) from None
        except ValueError as exc:  # an SSE frame whose data is not JSON (a broken proxy, a cut frame)
            raise malformed_stream(provider=self.name, service="Anthropic", exc=exc) from None
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from None
        except anthropic.APIError as exc:
            raise self._connection_error(exc, acc.started) from None
        except Exception as exc:
            if not is_transport_error(exc):
                raise
            raise self._connection_error(exc, acc.started) from None
        if not acc.finished:
            raise self._dropped()
        return acc.response()

    def _dropped(self) -> ProviderError:
        return ProviderError(
            "Anthropic stream ended before message_stop (connection dropped)",
            provider=self.name,
            reason="unavailable",
            retryable=True,
        )

    def _status_error(self, exc: Any) -> ProviderError:
        message = exc.api_message if isinstance(exc.api_message, str) else ""
        headers = dict(exc.response.headers) if exc.response is not None else {}
        err = provider_error_for_status(
            provider=self.name,
            service="Anthropic",
            status=int(exc.status_code),
            message=scrub(message, self._api_key),
            error_type=exc.type if isinstance(exc.type, str) else None,
            headers=headers,
            api_key_env=self.api_key_env,
        )
        log.debug("anthropic: HTTP %s %s", exc.status_code, err.reason)
        return err

    def _connection_error(self, exc: BaseException, streaming: bool) -> ProviderError:
        if streaming:
            log.debug("anthropic: stream cut by %s", type(exc).__name__)
            return self._dropped()
        return connection_error(
            provider=self.name, service="Anthropic", base_url=self.base_url, exc=exc, secret=self._api_key
        )

    async def aclose(self) -> None:
        """Release the shared HTTP client (closed by the pool when no provider uses it any more)."""
        self._client = None
        if self._lease is not None:
            lease, self._lease = self._lease, None
            await lease.release()


def is_transport_error(exc: BaseException) -> bool:
    """True for the HTTP library's own errors (a cut stream raises those, not the SDK's)."""
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2", "h11")
