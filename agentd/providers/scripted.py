"""The scripted provider: deterministic replies from a scenario (`--provider scripted`, demos, fast tests).

Owns: `ScriptedProvider`, `load_scenario`, `check_scenario`. The scenario format is the emulator's
(TESTING.md §3.3); this module reads it independently and imports no emulator code. Must not import an SDK,
pygls, lsprotocol, acp or an adapter.

Behaviour:
- Answers are consumed in order, one per request. `reply` items (`{"text": ...}`, `{"tool_use": {"name", "input"}}`,
  a bare string, or the `{"type": ...}` forms the emulator also reads) stream as text deltas of 16 characters and
  `block_done` events; tool ids are `toolu_scr_<answer>_<k>` (answer 1-based in the scenario, k 1-based in the
  reply) unless the item gives an `id`; message ids `msg_scr_<request>`. Unlike the emulator, replies are not
  capped at `max_tokens`.
- `fault: {"http": S, "headers": {...}, "message": M}` (or those keys on the answer itself) raises the
  `ProviderError` the real providers raise for S (429 and 5xx/529 retryable, `retry-after-ms` / `retry-after`
  honoured). `drop_after_events: n` and
  `stream_error_after_events: n` raise a retryable error after n virtual SSE events (message_start, per block a
  start, its deltas and a stop, message_delta, message_stop), after emitting what those events carried.
- `truncate_tool_json: true` leaves the last tool_use out of `content`, lists its id in `truncated_tool_use_ids`
  and ends with `stop_reason: "max_tokens"`; `empty_end_turn: true` answers `content: []`; `refusal` gives
  `stop_reason: "refusal"`. `hold_after_events`/`gate`, `expect`, `repeat_input_usage_in_delta` and
  `unknown_event` concern the wire and are ignored here.
- A compaction request (the last user message's first text starts with the scenario's `compaction_marker`, else
  with "Summarize the conversation below") gets `summary` (or a fixed text) and consumes no answer.
- Every request is first checked by `agentd.core.validate.validate_request`; a violation is a `bad_request`
  error, as a 400 from the service would be. A request after the last answer is a `bad_request` error too.
- Usage is estimated: `input_tokens` = ceil(len(canonical JSON of the request body) / 4), `output_tokens` the
  same over the reply's content blocks (at least 1); the cache counts are 0 (known: nothing is cached). The
  length is counted without recursion, so a reply whose tool input is nested any number of levels deep is played
  as written (the loop answers it with `invalid_arguments`, H19) instead of failing with a RecursionError.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentd.clock import Clock, SystemClock
from agentd.errors import ConfigError, ProviderError
from agentd.providers.anthropic import provider_error_for_status, wire_body
from agentd.providers.base import ModelRequest, ModelResponse, OnEvent, StreamEvent, Usage

DEFAULT_COMPACTION_MARKER = "Summarize the conversation below"
DEFAULT_SUMMARY = "Scripted summary: the earlier conversation is summarised here."
CHUNK_CHARS = 16
_DEFAULT_FAULT_TEXT = {
    429: "Rate limited",
    529: "Overloaded",
    400: "Invalid request",
    401: "invalid x-api-key",
}
_ITEM = '{"text": "..."} or {"tool_use": {"name": "...", "input": {...}}}'
_ITEM_SHAPE = f"a list of {_ITEM} items"


# ---------------------------------------------------------------- scenario loading


def load_scenario(path: str | Path) -> dict[str, Any]:
    """Read and check a scenario file (TESTING.md §3.3). Raises `ConfigError` with one line naming the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"scenario {p}: not valid UTF-8 (byte {exc.start}); save the file as UTF-8 JSON"
        ) from None
    except FileNotFoundError:
        raise ConfigError(f"scenario {p}: file not found; pass the path of a scenario JSON file") from None
    except OSError as exc:
        raise ConfigError(f"scenario {p}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        where = (
            f" (line {exc.lineno} column {exc.colno}: {exc.msg})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise ConfigError(f"scenario {p}: not valid JSON{where}") from None
    except RecursionError:
        raise ConfigError(f"scenario {p}: JSON nested too deeply to read; flatten it") from None
    return check_scenario(data, str(p))


def check_scenario(data: Any, source: str = "<inline>") -> dict[str, Any]:
    """Return `data` if it has the scenario shape, else raise `ConfigError("scenario SOURCE: <what is wrong>")`."""
    problem = _shape_problem(data)
    if problem:
        raise ConfigError(f"scenario {source}: {problem}")
    return data


def _shape_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return 'the top level must be an object with "answers"'
    answers = data.get("answers")
    if not isinstance(answers, list):
        return '"answers" must be a list of answers'
    for key in ("compaction_marker", "summary"):
        if key in data and not isinstance(data[key], str):
            return f'"{key}" must be a string'
    for i, answer in enumerate(answers):
        problem = _answer_problem(answer)
        if problem:
            return f"answers[{i}]{problem}"
    return None


def _fault_of(answer: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fault of an answer: its `fault` object, or `http`/`headers`/`message` given at the answer's level."""
    if "fault" in answer:
        return answer["fault"] if isinstance(answer["fault"], dict) else {}
    if "http" in answer:
        return {k: answer[k] for k in ("http", "headers", "message", "type") if k in answer}
    return None


def _reply_block(item: Any) -> dict[str, Any] | None:
    """One reply item in history form without an id (a tool_use may carry its own `id`); None if malformed.

    Items: a string, `{"text": s}` (optionally `"type": "text"`), `{"tool_use": {"name", "input"?, "id"?}}` or
    `{"type": "tool_use", "name", "input"?, "id"?}` (the emulator's forms, TESTING.md §3.3).
    """
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if not isinstance(item, dict):
        return None
    if "text" in item and item.get("type", "text") == "text":
        return {"type": "text", "text": item["text"]} if isinstance(item["text"], str) else None
    tool = item.get("tool_use") if "tool_use" in item else item if item.get("type") == "tool_use" else None
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return None
    tool_input = tool.get("input", {})
    if not isinstance(tool_input, dict) or not isinstance(tool.get("id", ""), str):
        return None
    block = {"type": "tool_use", "name": tool["name"], "input": tool_input}
    return {**block, "id": tool["id"]} if tool.get("id") else block


def _answer_problem(answer: Any) -> str | None:
    if not isinstance(answer, dict):
        return " must be an object"
    fault = _fault_of(answer)
    if fault is not None:
        if not isinstance(fault.get("http"), int):
            return '.fault must be an object with an integer "http" status'
        if not isinstance(fault.get("headers", {}), dict):
            return ".fault.headers must be an object"
        return None
    if "reply" not in answer:
        if answer.get("empty_end_turn") or "refusal" in answer:
            return None
        return ' must have "reply" or "fault"'
    reply = answer["reply"]
    if isinstance(reply, str):
        return None
    if not isinstance(reply, list):
        return f".reply must be {_ITEM_SHAPE}"
    for k, item in enumerate(reply):
        if _reply_block(item) is None:
            return f".reply[{k}] must be {_ITEM}"
    if "stop_reason" in answer and not isinstance(answer["stop_reason"], str):
        return ".stop_reason must be a string"
    return None


# ---------------------------------------------------------------- the provider


def _json_length(value: Any) -> int:
    """Characters of `value` as compact JSON (`separators=(",", ":")`, `ensure_ascii=False`), counted without
    recursion, so a tool input nested thousands of levels deep is measured like any other (H19 follow-up)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += (
                2 + max(0, len(item) - 1) + sum(len(json.dumps(str(k), ensure_ascii=False)) + 1 for k in item)
            )
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            total += 2 + max(0, len(item) - 1)
            stack.extend(item)
        else:
            total += len(json.dumps(item, ensure_ascii=False))
    return total


def _tokens(value: Any) -> int:
    return math.ceil(_json_length(value) / 4)


def _first_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    for block in content or []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            return str(block.get("text") or "")
    return ""


class _Cut(Exception):
    """The scripted stream stops here (drop or error event)."""


class ScriptedProvider:
    """Replays a scenario (a dict, or the path of a JSON file) as model replies. See the module docstring."""

    name = "scripted"

    def __init__(
        self, scenario: dict[str, Any] | str | Path, clock: Clock | None = None, model: str = "scripted"
    ) -> None:
        self.scenario = check_scenario(scenario) if isinstance(scenario, dict) else load_scenario(scenario)
        self.model = model
        self.clock = clock or SystemClock()
        self.requests: list[dict[str, Any]] = []
        self._next_answer = 0

    @property
    def answers_left(self) -> int:
        """Answers not consumed yet."""
        return len(self.scenario["answers"]) - self._next_answer

    async def stream(self, request: ModelRequest, on_event: OnEvent) -> ModelResponse:
        """Answer `request` with the next scenario answer (or the summary, for a compaction request)."""
        from agentd.core.validate import validate_request

        body = wire_body(request)
        self.requests.append(body)
        problem = validate_request(body)
        if problem:
            raise ProviderError(
                f"scripted provider rejected the request (as the API would, HTTP 400): {problem}",
                provider=self.name,
                reason="bad_request",
                http_status=400,
            )
        msg_id = f"msg_scr_{len(self.requests)}"
        if self._is_compaction(request):
            summary = str(self.scenario.get("summary", DEFAULT_SUMMARY))
            return await self._play(
                msg_id, body, {"reply": [{"text": summary}], "stop_reason": "end_turn"}, 0, on_event
            )
        answers = self.scenario["answers"]
        if self._next_answer >= len(answers):
            raise ProviderError(
                f"scripted scenario exhausted: all {len(answers)} answers were used before request {len(self.requests)}",
                provider=self.name,
                reason="bad_request",
            )
        number = self._next_answer + 1
        answer = answers[self._next_answer]
        self._next_answer += 1
        fault = _fault_of(answer)
        if fault is not None:
            raise self._fault(fault)
        return await self._play(msg_id, body, answer, number, on_event)

    def _is_compaction(self, request: ModelRequest) -> bool:
        users = [m for m in request.messages if m.get("role") == "user"]
        marker = str(self.scenario.get("compaction_marker") or DEFAULT_COMPACTION_MARKER)
        return bool(users) and _first_text(users[-1]).startswith(marker)

    def _fault(self, fault: Mapping[str, Any]) -> ProviderError:
        status = int(fault["http"])
        return provider_error_for_status(
            provider=self.name,
            service="Scripted provider",
            status=status,
            message=str(fault.get("message") or _DEFAULT_FAULT_TEXT.get(status, "Internal server error")),
            headers=fault.get("headers") or {},
            api_key_env="the API key variable",
        )

    def _blocks(self, answer: Mapping[str, Any], number: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The reply's blocks and the truncated tool_uses (name by id)."""
        if answer.get("empty_end_turn"):
            return [], {}
        reply = answer.get("reply") or []
        items = [reply] if isinstance(reply, str) else reply
        blocks: list[dict[str, Any]] = []
        k = 0
        for item in items:
            block = _reply_block(item)
            assert block is not None  # checked by check_scenario
            if block["type"] == "tool_use":
                k += 1
                block = {
                    "type": "tool_use",
                    "id": block.get("id") or f"toolu_scr_{number}_{k}",
                    "name": block["name"],
                    "input": block["input"],
                }
            blocks.append(block)
        truncated: dict[str, str] = {}
        if answer.get("truncate_tool_json"):
            last = max((i for i, b in enumerate(blocks) if b["type"] == "tool_use"), default=None)
            if last is not None:
                cut = blocks.pop(last)
                truncated[cut["id"]] = cut["name"]
        return blocks, truncated

    async def _play(
        self, msg_id: str, body: dict[str, Any], answer: Mapping[str, Any], number: int, on_event: OnEvent
    ) -> ModelResponse:
        blocks, truncated = self._blocks(answer, number)
        stop_reason = str(answer.get("stop_reason") or "")
        if not stop_reason:
            stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        if "refusal" in answer:
            stop_reason = "refusal"
        if answer.get("empty_end_turn"):
            stop_reason = "end_turn"
        if answer.get("truncate_tool_json") and truncated:
            stop_reason = "max_tokens"
        cut = answer.get("drop_after_events", answer.get("stream_error_after_events"))
        try:
            for n, event in enumerate(_virtual_events(blocks), start=1):
                if event is not None:
                    on_event(event)
                    await asyncio.sleep(0)
                if isinstance(cut, int) and n >= cut:
                    raise _Cut
        except _Cut:
            error = "stream ended before message_stop (connection dropped)"
            if "stream_error_after_events" in answer:
                error = "stream failed (overloaded_error): Overloaded"
            raise ProviderError(
                f"Scripted provider {error}", provider=self.name, reason="unavailable", retryable=True
            ) from None
        return ModelResponse(
            id=msg_id,
            content=blocks,
            stop_reason=stop_reason,
            usage=Usage(
                input_tokens=_tokens(body),
                output_tokens=max(1, _tokens(blocks)),
                cache_creation_input_tokens=0,
                cache_read_input_tokens=0,
            ),
            model=self.model,
            truncated_tool_use_ids=list(truncated),
            truncated_tool_names=truncated,
        )

    async def aclose(self) -> None:
        return None


def _virtual_events(blocks: list[dict[str, Any]]) -> Iterator[StreamEvent | None]:
    """The SSE events a real stream of `blocks` would have, as what each shows (None: nothing to show)."""
    yield None  # message_start
    for block in blocks:
        yield None  # content_block_start
        if block["type"] == "text":
            text = block["text"]
            for i in range(0, len(text), CHUNK_CHARS):
                yield StreamEvent("text_delta", text=text[i : i + CHUNK_CHARS])
        else:
            yield None  # input_json_delta
        yield StreamEvent("block_done", block=block)  # content_block_stop
    yield None  # message_delta
    yield None  # message_stop
