"""The OpenAI-compatible chat-completions provider: OpenAI, DeepSeek, Moonshot, Ollama, llama.cpp, vLLM.

Owns: `OpenAICompatProvider`, the translation between agentd's history (Anthropic Messages form) and chat
completions (`chat_body`, `to_chat_messages`, `to_chat_tools`), the stream accumulator `ChatAccumulator`,
`usage_from_openai` and `tool_calls_from_text` (the runnable calls of a text reply; TESTING.md §3.8).

Only this module imports `openai`, and only inside functions. Must not import pygls, lsprotocol, acp or an
adapter. HTTP errors map through `agentd.providers.anthropic.provider_error_for_status` (shared helpers).

Choices:
- Usage (PROTOCOL.md §10.2): `input_tokens` = `prompt_tokens` minus the cached tokens; cached tokens come from
  `prompt_tokens_details.cached_tokens` (OpenAI), `prompt_cache_hit_tokens` (DeepSeek) or a top-level
  `cached_tokens` (Moonshot, legacy). A count the server does not report is None (unknown), never 0; chat
  completions never report a cache write, so `cache_creation_input_tokens` is None.
- DeepSeek thinking mode: the reply's `reasoning_content` is returned in `ModelResponse.extra` and the loop keeps it
  as a top-level `"reasoning_content"` key of the stored assistant message; `to_chat_messages` sends it back on
  that assistant message (cases C15). Other top-level message keys are ignored (the Anthropic provider drops all
  keys but `role` and `content`).
- Tool call arguments that are not valid JSON: when the reply was cut off (`finish_reason: length`) the call is
  truncated (kept out of `content`, id in `truncated_tool_use_ids`, never run); otherwise it becomes a tool_use
  whose input is `{"_invalid_json": "<raw arguments>"}`, so the tool's input validation answers the model with an
  `is_error` result, and the raw text goes back unchanged as `arguments` in later requests.
- A tool call without an `id` (some local servers omit it) gets `call_gen_<instance>_<n>`, counted per provider
  instance like the `call_text_` ids below, so generated ids never repeat across the replies of a session.
  So does a call whose id the server repeated, within the reply or from a tool_use of the request's history
  (servers that number calls per reply): on chat completions calls are told apart by `index`, the id is only
  a correlation key, and every request agentd sends keeps ids unique (issue 9 H1, case C16).
- Tool calls written as text (small local models; `agentd.providers.text_calls` owns the shapes): a reply without
  `tool_calls` that holds attempted calls of offered tools becomes tool_use blocks with ids
  `call_text_<instance>_<n>`, the prose around them its text; a call that cannot be run carries its error in
  `ModelResponse.invalid_tool_inputs`, which the loop answers as an `is_error` result (after
  `MAX_MALFORMED_ROUNDS` such rounds in a row the reply stays text). A text call whose JSON does not parse in a
  reply cut at max_tokens is a truncated call (never run; the loop tells the model it hit max_tokens). Text that may hold a call is held back
  until the reply ends, then shown if it was not one.
- Request-only reminders go as a `system` message at the tail (`reminder_role`); a server that refuses that with
  a 400 gets the request again with them in the user message, and so does every later request of the provider.
- An assistant message with tool calls always carries the `content` key (`""` when it has no text): some local
  servers answer 500 without it (llama-cpp-python).
- `max_completion_tokens` is sent to api.openai.com (its newer models reject `max_tokens`), `max_tokens` to every
  other server. `temperature` and `seed` are sent only when configured.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import secrets
from collections.abc import Collection, Iterator, Mapping
from typing import Any, cast
from urllib.parse import urlparse

from agentd.clock import Clock, SystemClock
from agentd.errors import ContextExceeded, ProviderError
from agentd.images import request_safe
from agentd.providers.anthropic import (
    READ_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    attempt_timeout,
    connection_error,
    is_transport_error,
    malformed_stream,
    provider_error_for_status,
    scrub,
)
from agentd.providers.base import (
    ModelRequest,
    ModelResponse,
    OnEvent,
    StreamEvent,
    Usage,
    import_off_loop,
    pace,
)
from agentd.providers.http import ClientKey, ClientPool, Lease, shared_pool
from agentd.providers.text_calls import (
    MAX_MALFORMED_ROUNDS,
    TextCall,
    hold_point,
    malformed_rounds,
    recover_calls,
)

log = logging.getLogger("agentd.providers.openai")

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's default
FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
INVALID_JSON_KEY = "_invalid_json"


# ---------------------------------------------------------------- usage


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_from_openai(usage: Mapping[str, Any] | None) -> Usage:
    """Map a chat-completions `usage` object (dict) to `Usage` (tokens; None = not reported).

    Cached tokens, first found: `prompt_tokens_details.cached_tokens` (OpenAI), `prompt_cache_hit_tokens`
    (DeepSeek), `cached_tokens` (Moonshot legacy). `input_tokens` = `prompt_tokens` - cached when both are
    known, else `prompt_tokens`. No usage at all gives four None counts.
    """
    u = usage or {}
    details = u.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is None:
        cached = _count(u.get("prompt_cache_hit_tokens"))
    if cached is None:
        cached = _count(u.get("cached_tokens"))
    prompt = _count(u.get("prompt_tokens"))
    return Usage(
        input_tokens=prompt - cached if prompt is not None and cached is not None else prompt,
        output_tokens=_count(u.get("completion_tokens")),
        cache_creation_input_tokens=None,
        cache_read_input_tokens=cached,
    )


# ---------------------------------------------------------------- request translation


def _text_of(content: Any) -> str:
    """The text of a tool_result's content (a string or blocks); images become `[image omitted]`."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if isinstance(block, Mapping):
            if block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
            elif block.get("type") == "image":
                parts.append("[image omitted]")
    return "\n".join(parts)


def _image_part(block: Mapping[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url") or "")
    return {"type": "image_url", "image_url": {"url": url}}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content or [] if isinstance(b, dict)]


def _user_messages(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "tool_result":
            text = _text_of(block.get("content"))
            if block.get("is_error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text})
    rest = [
        b
        for b in blocks
        if b.get("type") in ("text", "image") and (b.get("type") == "image" or b.get("text"))
    ]
    if any(b.get("type") == "image" for b in rest):
        parts = [
            _image_part(b) if b.get("type") == "image" else {"type": "text", "text": b["text"]} for b in rest
        ]
        out.append({"role": "user", "content": parts})
    elif rest:
        out.append({"role": "user", "content": "\n\n".join(str(b["text"]) for b in rest)})
    return out


def _arguments(tool_input: Any) -> str:
    if isinstance(tool_input, Mapping) and set(tool_input) == {INVALID_JSON_KEY}:
        return str(tool_input[INVALID_JSON_KEY])
    return json.dumps(tool_input, ensure_ascii=False)


def _assistant_message(message: Mapping[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    text = "\n\n".join(str(b.get("text")) for b in blocks if b.get("type") == "text" and b.get("text"))
    out: dict[str, Any] = {"role": "assistant", "content": text}
    calls = [
        {
            "id": b.get("id"),
            "type": "function",
            "function": {"name": b.get("name"), "arguments": _arguments(b.get("input"))},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    if calls:
        out["tool_calls"] = calls
    if isinstance(message.get("reasoning_content"), str):
        out["reasoning_content"] = message["reasoning_content"]
    return out


def to_chat_messages(
    system: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    reminder_blocks: int = 0,
    reminder_role: str = "system",
) -> list[dict[str, Any]]:
    """Anthropic-form system blocks and history -> chat messages.

    System text blocks -> one `system` message. A user message -> one `tool` message per tool_result (first, in
    order; `is_error` results start with "Error: "), then one `user` message with its text (and images). An
    assistant message -> `content` (text, "" when none) + `tool_calls` + `reasoning_content` when stored.
    `cache_control` is dropped with the block structure. The last `reminder_blocks` text blocks of the final
    user message (request-only reminders, CONTRACTS.md §3) become one `system` message at the very end when
    `reminder_role` is "system" (chat models read a late system message as guidance, not as the user's words;
    issue 17), else they stay in the user message.
    """
    out: list[dict[str, Any]] = []
    system_text = "\n\n".join(str(b.get("text")) for b in system if b.get("type") == "text" and b.get("text"))
    if system_text:
        out.append({"role": "system", "content": system_text})
    tail: list[dict[str, Any]] = []
    for k, message in enumerate(messages):
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant":
            out.append(_assistant_message(message, blocks))
            continue
        if k == len(messages) - 1 and reminder_blocks and reminder_role == "system":
            blocks, tail = blocks[:-reminder_blocks], blocks[-reminder_blocks:]
        out.extend(_user_messages(blocks))
    reminder = "\n\n".join(str(b.get("text")) for b in tail if b.get("type") == "text" and b.get("text"))
    if reminder:
        out.append({"role": "system", "content": reminder})
    return out


def to_chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tool definitions -> chat-completions `tools` (`cache_control` dropped)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def chat_body(
    request: ModelRequest,
    *,
    model: str,
    temperature: float | None = None,
    seed: int | None = None,
    max_tokens_key: str = "max_tokens",
    reminder_role: str = "system",
) -> dict[str, Any]:
    """The streamed chat-completions body of `request` (without `stream`; `stream_options.include_usage` set).
    `reminder_role`: where request-only reminders go ("system": a system message at the tail; "user": in the
    final user message, as the Messages API gets them)."""
    messages = to_chat_messages(
        request.system, request_safe(request.messages, request.images), request.reminder_blocks, reminder_role
    )
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = to_chat_tools(request.tools)
    body[max_tokens_key] = request.max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    if seed is not None:
        body["seed"] = seed
    body["stream_options"] = {"include_usage": True}
    return body


# ---------------------------------------------------------------- reply translation


def tool_calls_from_text(text: str, tool_names: Collection[str]) -> list[tuple[str, dict[str, Any]]] | None:
    """The runnable tool calls written in `text` (see `agentd.providers.text_calls`), or None when there are none
    or any is malformed. Kept for callers that only need the happy path."""
    found = recover_calls(text, {n: None for n in tool_names})
    if found is None or any(c.error for c in found.calls):
        return None
    return [(c.name, c.input) for c in found.calls]


class ChatAccumulator:
    """Folds chat-completions stream chunks (dicts) into one Anthropic-form `ModelResponse`.

    `feed(chunk)` returns the `text_delta` events to show; `finish()` builds the response and its `block_done`
    events. `tool_names` are the offered tools (for the lenient fallback); `next_text_call_id` numbers
    `call_text_<instance>_<n>` ids and `next_gen_call_id` the `call_gen_<instance>_<n>` ids given to tool calls
    the server sent without an id, or with an id already in `used_ids` (the request's tool_use ids) or earlier in
    the reply (both counters live on the provider, so ids are unique per provider instance and never restart per
    reply).
    """

    def __init__(
        self,
        tool_names: Collection[str] | Mapping[str, Any] = (),
        next_text_call_id: Iterator[int] | None = None,
        text_call_prefix: str | None = None,
        next_gen_call_id: Iterator[int] | None = None,
        used_ids: Collection[str] = (),
        *,
        answer_malformed: bool = True,
    ) -> None:
        self.id = ""
        self.model = ""
        self.started = False
        self.finish_reason: str | None = None
        self.usage: Usage = usage_from_openai(None)
        self.reasoning: list[str] | None = None
        self._text: list[str] = []
        self._shown = 0  # characters of text already emitted
        self._holding = bool(tool_names)  # streamed text that may hold a call waits for the reply's end
        self._calls: dict[int, dict[str, Any]] = {}
        self._tools: Mapping[str, Any] = (
            tool_names if isinstance(tool_names, Mapping) else {n: None for n in tool_names}
        )
        self._answer_malformed = answer_malformed
        self.invalid_inputs: dict[str, str] = {}  # tool_use id -> the error the model gets instead of a run
        self._next_text_call_id = next_text_call_id or itertools.count(1)
        self._next_gen_call_id = next_gen_call_id or itertools.count(1)
        self._used_ids = set(used_ids)  # tool_use ids of the request's history: never given out again
        # Unique per provider instance, so ids stay unique across restarts and resumes of one session.
        self.text_call_prefix = text_call_prefix or secrets.token_hex(4)

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        self.started = True
        self.id = self.id or str(chunk.get("id") or "")
        self.model = self.model or str(chunk.get("model") or "")
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = usage_from_openai(chunk["usage"])
        out: list[StreamEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("reasoning_content"), str):
                self.reasoning = [*(self.reasoning or []), delta["reasoning_content"]]
            if delta.get("content"):
                self._text.append(str(delta["content"]))
                out += self._show()
            for call in delta.get("tool_calls") or []:
                self._tool_call_delta(call)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def _show(self, final: bool = False) -> list[StreamEvent]:
        text = "".join(self._text)
        upto = len(text) if final or not self._holding else max(self._shown, hold_point(text))
        new, self._shown = text[self._shown : upto], upto
        return [StreamEvent("text_delta", text=new)] if new else []

    def _tool_call_delta(self, call: Mapping[str, Any]) -> None:
        index = call.get("index")
        if not isinstance(index, int):
            known = [i for i, c in self._calls.items() if c["id"] == call.get("id")]
            index = (
                known[0]
                if known
                else (len(self._calls) if call.get("id") or not self._calls else max(self._calls))
            )
        state = self._calls.setdefault(index, {"id": "", "name": "", "args": []})
        function = call.get("function") or {}
        if call.get("id"):
            state["id"] = str(call["id"])
        if function.get("name"):
            state["name"] = str(function["name"])
        if function.get("arguments"):
            state["args"].append(str(function["arguments"]))

    def _text_call(self, call: TextCall) -> dict[str, Any]:
        call_id = f"call_text_{self.text_call_prefix}_{next(self._next_text_call_id)}"
        if call.error:
            self.invalid_inputs[call_id] = call.error
        return {"type": "tool_use", "id": call_id, "name": call.name, "input": call.input}

    def finish(self) -> tuple[ModelResponse, list[StreamEvent]]:
        """The response and the events still to show: held-back text, then one `block_done` per block."""
        text = "".join(self._text)
        stop_reason = FINISH_REASONS.get(self.finish_reason or "", self.finish_reason or "end_turn")
        blocks: list[dict[str, Any]] = []
        truncated: dict[str, str] = {}
        used = set(self._used_ids)
        for _, state in sorted(self._calls.items()):
            call_id = state["id"]
            while not call_id or call_id in used:
                call_id = f"call_gen_{self.text_call_prefix}_{next(self._next_gen_call_id)}"
            used.add(call_id)
            source = "".join(state["args"])
            try:
                tool_input = json.loads(source) if source.strip() else {}
            except ValueError:
                if stop_reason == "max_tokens":
                    truncated[call_id] = state["name"]
                    continue
                tool_input = {INVALID_JSON_KEY: source}
            blocks.append({"type": "tool_use", "id": call_id, "name": state["name"], "input": tool_input})
        events: list[StreamEvent] = []
        found = None if self._calls or not self._tools else recover_calls(text, self._tools)
        if found is not None and not self._answer_malformed and any(c.error for c in found.calls):
            found = None  # retries used up (MAX_MALFORMED_ROUNDS): the reply stays text and the turn ends
        if found is not None:
            blocks = []
            for call in found.calls:
                if call.unparsed and stop_reason == "max_tokens":  # cut off, like a tool call's arguments
                    truncated[f"call_text_{self.text_call_prefix}_{next(self._next_text_call_id)}"] = (
                        call.name
                    )
                else:
                    blocks.append(self._text_call(call))
            text, rest = _prose_after(found.text, text[: self._shown])
            events += [StreamEvent("text_delta", text=rest)] if rest else []
        else:
            events += self._show(final=True)
        if text.strip():
            blocks.insert(0, {"type": "text", "text": text})
        if any(b["type"] == "tool_use" for b in blocks) and stop_reason == "end_turn":
            stop_reason = "tool_use"
        events += [StreamEvent("block_done", block=b) for b in blocks]
        extra = {"reasoning_content": "".join(self.reasoning)} if self.reasoning is not None else {}
        response = ModelResponse(
            id=self.id,
            content=blocks,
            stop_reason=stop_reason,
            usage=self.usage,
            model=self.model,
            truncated_tool_use_ids=list(truncated),
            truncated_tool_names=truncated,
            extra=extra,
            invalid_tool_inputs=dict(self.invalid_inputs),
        )
        return response, events


def _prose_after(prose: str, shown: str) -> tuple[str, str]:
    """The reply's text once its calls are taken out, and the part of it still to show (the streamed prefix
    `shown` always comes before the first call, so the prose starts with it, up to whitespace)."""
    head = shown.strip()
    if prose.startswith(head):
        return prose, prose[len(head) :].rstrip()
    return (shown + "\n\n" + prose).strip(), "\n\n" + prose


# ---------------------------------------------------------------- the provider


def history_tool_use_ids(messages: list[dict[str, Any]]) -> set[str]:
    """The ids of every tool_use block in `messages` (Anthropic form)."""
    return {
        str(b.get("id"))
        for m in messages
        if m.get("role") == "assistant"
        for b in _blocks(m.get("content"))
        if b.get("type") == "tool_use"
    }


def is_official_openai(base_url: str | None) -> bool:
    """True when `base_url` is None (the SDK default) or on api.openai.com."""
    return base_url is None or (urlparse(base_url).hostname or "").endswith("api.openai.com")


class OpenAICompatProvider:
    """Streams chat-completions replies with the official `openai` SDK (its retries off).

    `model`: model id; `api_key`: the key ("not-needed" for local servers); `base_url`: the server's `/v1` URL or
    None for api.openai.com; `temperature` / `seed`: sent only when not None.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        api_key: str,
        base_url: str | None = None,
        clock: Clock | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = REQUEST_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
        pool: ClientPool | None = None,
        reminder_role: str = "system",
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.clock = clock or SystemClock()
        self.temperature = temperature
        self.seed = seed
        self.api_key_env = api_key_env
        self.reminder_role = reminder_role
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._key = ClientKey(base_url or DEFAULT_BASE_URL, min(read_timeout_s, timeout_s), timeout_s)
        self._pool = pool or shared_pool()
        self._lease: Lease | None = None
        self._client: Any = None
        self._served: tuple[int | None] | None = None  # the served window, once asked
        self._text_call_ids = itertools.count(1)
        self._gen_call_ids = itertools.count(1)  # for tool calls that came without an id
        self.text_call_prefix = secrets.token_hex(4)  # call_text / call_gen ids stay unique across resumes
        self._service = (
            "OpenAI" if is_official_openai(base_url) else f"The OpenAI-compatible server at {base_url}"
        )

    def __repr__(self) -> str:
        return f"OpenAICompatProvider(model={self.model!r}, base_url={self.base_url!r})"

    async def served_window(self) -> int | None:
        """The context window the server serves this model with, in tokens (asked once; None when it does not
        say or for api.openai.com, whose windows are in the model table). See `agentd.providers.served_window`."""
        if self._served is None:
            from agentd.providers.served_window import served_window

            found = (
                None
                if is_official_openai(self.base_url)
                else await served_window(str(self.base_url), self.model, self._api_key)
            )
            self._served = (found.tokens if found else None,)
        return self._served[0]

    def _get_client(self) -> Any:
        """The SDK client over the pool's shared HTTP client of this configuration (built on first use)."""
        if self._client is None:
            import openai

            self._lease = self._pool.lease(self._key)
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self._key.base_url, max_retries=0,
                timeout=self._lease.client.timeout, http_client=self._lease.client,
            )  # fmt: skip
        return self._client

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The chat-completions body this provider sends for `request` (without `stream`)."""
        key = "max_completion_tokens" if is_official_openai(self.base_url) else "max_tokens"
        return chat_body(
            request,
            model=self.model,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens_key=key,
            reminder_role=self.reminder_role,
        )

    async def stream(self, request: ModelRequest, on_event: OnEvent) -> ModelResponse:
        """One attempt: stream the reply, calling `on_event` per text delta and finished block.

        Raises `ProviderError` (retryable for 429, 5xx, a mid-stream error, a dropped connection or a stream that
        ends without a `finish_reason`). A request whose reminder went as a late system message and was refused
        with a 400 (chat templates that allow a system message only first) is sent again at once with the
        reminder in the user message; when that is accepted this provider keeps doing so (`reminder_role` becomes
        "user"), when it is refused too the role was not the cause and stays "system".
        """
        try:
            return await self._stream(request, on_event)
        except ContextExceeded:
            raise
        except ProviderError as err:
            if err.http_status != 400 or not request.reminder_blocks or self.reminder_role != "system":
                raise
            log.warning(
                "the server refused a system message at the end (%s): reminders go in the user message",
                err.message,
            )
            self.reminder_role = "user"
            try:
                return await self._stream(request, on_event)
            except ProviderError:  # refused for another reason: the role was not the cause
                self.reminder_role = "system"
                raise

    async def _stream(self, request: ModelRequest, on_event: OnEvent) -> ModelResponse:
        openai = await import_off_loop("openai")

        client = self._get_client()
        acc = ChatAccumulator(
            {t["name"]: t.get("input_schema") for t in request.tools},
            self._text_call_ids,
            self.text_call_prefix,
            self._gen_call_ids,
            used_ids=history_tool_use_ids(request.messages),
            answer_malformed=malformed_rounds(request.messages) < MAX_MALFORMED_ROUNDS,
        )
        try:
            async with asyncio.timeout(self._timeout_s):
                chunks = await cast(Any, client.chat.completions).create(**self.body(request), stream=True)
                async with chunks:
                    n = 0
                    async for chunk in chunks:
                        n += 1
                        await pace(n)
                        for out in acc.feed(chunk.to_dict()):
                            on_event(out)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            raise attempt_timeout(
                provider=self.name, service=self._service, seconds=self._timeout_s
            ) from None
        except ValueError as exc:  # an SSE frame whose data is not JSON (a broken proxy, a cut frame)
            raise malformed_stream(provider=self.name, service=self._service, exc=exc) from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except openai.APIConnectionError as exc:
            raise self._connection_error(exc, acc.started) from None
        except openai.APIError as exc:
            raise self._stream_error(exc) from None
        except Exception as exc:
            if not is_transport_error(exc):
                raise
            raise self._connection_error(exc, acc.started) from None
        if acc.finish_reason is None:
            raise self._dropped()
        response, events = acc.finish()
        for out in events:
            on_event(out)
        return response

    def _status_error(self, exc: Any) -> ProviderError:
        body = exc.body
        message = (
            body.get("message") if isinstance(body, Mapping) else body if isinstance(body, str) else None
        )
        err = provider_error_for_status(
            provider=self.name,
            service=self._service,
            status=int(exc.status_code),
            message=scrub(str(message or ""), self._api_key),
            error_type=body.get("type") if isinstance(body, Mapping) else None,
            headers=dict(exc.response.headers),
            api_key_env=self.api_key_env,
        )
        if isinstance(err, ContextExceeded) and err.window_tokens is None and isinstance(body, Mapping):
            n_ctx = body.get("n_ctx")  # llama.cpp states its window beside the message
            err.window_tokens = n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
        log.debug("openai: HTTP %s %s", exc.status_code, err.reason)
        return err

    def _stream_error(self, exc: Any) -> ProviderError:
        return provider_error_for_status(
            provider=self.name,
            service=self._service,
            status=200,
            message=scrub(str(exc.message), self._api_key),
            error_type=exc.type if isinstance(exc.type, str) else None,
        )

    def _dropped(self) -> ProviderError:
        return ProviderError(
            f"{self._service}: the stream ended before a finish_reason (connection dropped)",
            provider=self.name,
            reason="unavailable",
            retryable=True,
        )

    def _connection_error(self, exc: BaseException, streaming: bool) -> ProviderError:
        if streaming:
            log.debug("openai: stream cut by %s", type(exc).__name__)
            return self._dropped()
        # the service label already names a non-default base URL
        return connection_error(
            provider=self.name,
            service=self._service,
            base_url=None,
            exc=exc,
            secret=self._api_key,
            url=self.base_url,
        )

    async def aclose(self) -> None:
        """Release the shared HTTP client (closed by the pool when no provider uses it any more)."""
        self._client = None
        if self._lease is not None:
            lease, self._lease = self._lease, None
            await lease.release()
