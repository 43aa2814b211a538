"""Scenario scripts of the emulators (TESTING.md §3.3): loading, Python builders, replies, `expect` checks.

Owns the scenario format shared by both emulators (and by agentd's `--provider scripted`, which reads the
same JSON but never imports this module): an ordered list of answers, each consumed by one request.
Building a reply applies the reply-shaping faults (`empty_end_turn`, `truncate_tool_json`, `refusal`) and
the `max_tokens` cap. Imports only the standard library and sibling emulator modules.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tokens import as_blocks, canon

__all__ = [
    "ANSWER_KEYS",
    "SCENARIO_KEYS",
    "SUMMARY_TEXT",
    "Answer",
    "Reply",
    "build_reply",
    "cap_blocks",
    "check_expect",
    "history_tokens",
    "is_compaction",
    "load_scenario",
    "text",
    "tool_use",
]

SCENARIO_KEYS = frozenset(
    {
        "models",
        "answers",
        "compaction_marker",
        "flavour",
        "thinking",
        "min_cacheable_tokens",
        "write_visibility_delay_s",
        "cache_unit",
        "require_content_key",
        "system_first_only",
        "tool_calls_as_text",
        "served_window",
        "server",
        "conversations",
        "compaction_gate",
    }
)
ANSWER_KEYS = frozenset(
    {
        "reply",
        "stop_reason",
        "http",
        "headers",
        "type",
        "message",
        "drop_after_events",
        "stream_error_after_events",
        "hold_after_events",
        "gate",
        "truncate_tool_json",
        "empty_end_turn",
        "repeat_input_usage_in_delta",
        "unknown_event",
        "refusal",
        "expect",
        "reasoning",
        "tool_calls_as_text",
        "reset_before_first_byte",
        "malformed_after_events",
        "endless_after_events",
    }
)

# §3.3: a compaction request gets a fixed 500-token summary. canon({"text": s, "type": "text"}) is 25 bytes
# plus len(s), so 1975 ASCII characters make exactly ceil(2000 / 4) = 500 EMU-TOK-1 tokens.
_SUMMARY_SEED = (
    "Summary (emulator): the user asked for a change; the assistant read the relevant files, edited them, "
    "ran the tests and reported the result. Files, tool calls and open items are listed here. "
)
SUMMARY_TEXT = (_SUMMARY_SEED * (1975 // len(_SUMMARY_SEED) + 1))[:1974] + "."


def text(s: str) -> dict[str, Any]:
    """A text reply block of the scenario format."""
    return {"text": s}


def tool_use(name: str, input: dict[str, Any] | None = None, /, **fields: Any) -> dict[str, Any]:
    """A tool_use reply block: `tool_use("read_file", path="a.txt")` or `tool_use("x", {"path": "a"})`."""
    return {"tool_use": {"name": name, "input": {**(input or {}), **fields}}}


class Answer:
    """Python builders for answers: `Answer.reply(text("…"), tool_use("read_file", path="a.txt"))`."""

    @staticmethod
    def reply(
        *blocks: dict[str, Any] | str, stop_reason: str | None = None, **options: Any
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"reply": [text(b) if isinstance(b, str) else b for b in blocks], **options}
        if stop_reason is not None:
            out["stop_reason"] = stop_reason
        return out

    @staticmethod
    def fault(
        http: int | None = None, headers: dict[str, str] | None = None, **options: Any
    ) -> dict[str, Any]:
        fault: dict[str, Any] = dict(options)
        if http is not None:
            fault["http"] = http
        if headers is not None:
            fault["headers"] = headers
        return {"fault": fault}


def _normalize_block(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if isinstance(block, dict) and "text" in block and block.get("type", "text") == "text":
        return {"type": "text", "text": str(block["text"])}
    if isinstance(block, dict) and "tool_use" in block:
        tu = block["tool_use"]
        if not isinstance(tu, dict) or not isinstance(tu.get("name"), str):
            raise ValueError(f"scenario: tool_use {tu!r} must be an object with a string 'name'")
        return {"type": "tool_use", "name": tu["name"], "input": tu.get("input", {}), "id": tu.get("id")}
    if isinstance(block, dict) and block.get("type") == "tool_use":
        if not isinstance(block.get("name"), str):
            raise ValueError(f"scenario: tool_use block {block!r} needs a string 'name'")
        return {
            "type": "tool_use",
            "name": block["name"],
            "input": block.get("input", {}),
            "id": block.get("id"),
        }
    raise ValueError(f"scenario: unknown reply block {block!r} (use {{'text': …}} or {{'tool_use': …}})")


def normalize_answer(answer: Any, index: int) -> dict[str, Any]:
    """One answer with its `fault` object merged in and its reply blocks normalized; raises ValueError."""
    if not isinstance(answer, dict):
        raise ValueError(f"scenario: answer {index} must be an object, got {answer!r}")
    fault = answer.get("fault") or {}
    if not isinstance(fault, dict):
        raise ValueError(f"scenario: answer {index} has a fault that is not an object: {fault!r}")
    out = {k: v for k, v in answer.items() if k != "fault"}
    out.update(fault)
    unknown = sorted(set(out) - ANSWER_KEYS)
    if unknown:
        raise ValueError(f"scenario: answer {index} has unknown keys {unknown}")
    reply = out.get("reply", [])
    if not isinstance(reply, (str, list)):
        raise ValueError(
            f"scenario: answer {index} has a reply that is neither a list nor a string: {reply!r}"
        )
    out["reply"] = [_normalize_block(b) for b in ([reply] if isinstance(reply, str) else reply)]
    if "hold_after_events" in out and "gate" not in out:
        raise ValueError(f"scenario: answer {index} has hold_after_events without gate")
    return out


def _read_scenario_file(path: Path) -> Any:
    """The JSON of a scenario file; raises ValueError with one line naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"scenario {path}: not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"scenario {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"scenario {path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ValueError(f"scenario {path}: JSON nested too deeply") from None


def load_scenario(source: Any) -> dict[str, Any]:
    """A scenario from a dict, an answers list, a JSON file path or None (no answers); raises ValueError."""
    if source is None:
        data: Any = {"answers": []}
    elif isinstance(source, (str, Path)):
        data = _read_scenario_file(Path(source))
    else:
        data = json.loads(json.dumps(source))  # a private copy, and proof it is JSON
    if isinstance(data, list):
        data = {"answers": data}
    if not isinstance(data, dict):
        raise ValueError("scenario: expected an object or a list of answers")
    unknown = sorted(set(data) - SCENARIO_KEYS)
    if unknown:
        raise ValueError(f"scenario: unknown keys {unknown}")
    if data.get("flavour", "openai") not in ("openai", "deepseek", "moonshot-legacy", "none"):
        raise ValueError(f"scenario: unknown flavour {data['flavour']!r}")
    answers = data.get("answers") or []
    if not isinstance(answers, list):
        raise ValueError(f"scenario: 'answers' must be a list of answers, got {answers!r}")
    data["answers"] = [normalize_answer(a, i + 1) for i, a in enumerate(answers)]
    conversations = data.get("conversations") or {}
    if not isinstance(conversations, dict) or not all(
        isinstance(k, str) and k and isinstance(v, list) for k, v in conversations.items()
    ):
        raise ValueError("scenario: 'conversations' must map non-empty marker strings to lists of answers")
    data["conversations"] = {
        marker: [normalize_answer(a, i + 1) for i, a in enumerate(script)]
        for marker, script in conversations.items()
    }
    return data


def first_user_text(messages: Any) -> str:
    """The text of the first user message of a request (its string content or its text blocks), or ""."""
    for m in messages if isinstance(messages, list) else []:
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            return "".join(
                b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
            )
    return ""


@dataclass
class Reply:
    """A built reply. Blocks: `{"type": "text", "text"}` or `{"type": "tool_use", "id", "name", "input",
    "json", "complete"}` where `json` is the canonical input text, cut short when `complete` is False."""

    blocks: list[dict[str, Any]]
    stop_reason: str
    stop_details: dict[str, Any] | None = None
    capped: bool = False


def history_tokens(block: dict[str, Any]) -> int:
    """EMU-TOK-1 output tokens of a reply block in its history form (§3.6).

    A tool_use whose JSON was cut short counts its partial text in place of the canonical input
    (approximation of the emulator: the service bills what it generated).
    """
    if block["type"] == "text":
        form: dict[str, Any] = {"type": "text", "text": block["text"]}
        return max(1, math.ceil(len(canon(form).encode("utf-8", "surrogatepass")) / 4))
    shell = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    size = len(canon(shell).encode("utf-8")) - 2 + len(block["json"].encode("utf-8", "surrogatepass"))
    return max(1, math.ceil(size / 4))


Cost = Callable[[list[dict[str, Any]]], int]


def cap_blocks(
    blocks: list[dict[str, Any]], max_tokens: int, cost: Cost
) -> tuple[list[dict[str, Any]], bool]:
    """Cut `blocks` so that `cost(blocks) <= max_tokens`; return (blocks, whether anything was cut).

    The first block that does not fit is shortened (text, or the tool input JSON) to the longest prefix
    that fits; a text cut to nothing is dropped.
    """
    out: list[dict[str, Any]] = []
    for block in blocks:
        if cost([*out, block]) <= max_tokens:
            out.append(block)
            continue
        key = "text" if block["type"] == "text" else "json"
        full = block[key]

        def cut(n: int, block: dict[str, Any] = block, key: str = key, full: str = full) -> dict[str, Any]:
            extra = {} if key == "text" else {"complete": False}
            return {**block, key: full[:n], **extra}

        lo, hi = -1, len(full) - 1  # the longest n in [0, len-1] that fits; -1 if none
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if cost([*out, cut(mid)]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        if lo > 0 or (lo == 0 and key == "json"):
            out.append(cut(lo))
        return out, True
    return out, False


def build_reply(
    answer: dict[str, Any], index: int, *, id_prefix: str, max_tokens: int | None, cost: Cost
) -> Reply:
    """The reply of answer number `index` (1-based): ids `<id_prefix>_<index>_<k>`, faults applied, capped."""
    blocks: list[dict[str, Any]] = []
    k = 0
    for b in answer.get("reply", []):
        if b["type"] == "tool_use":
            k += 1
            ident = b.get("id") or f"{id_prefix}_{index}_{k}"
            blocks.append({**b, "id": ident, "json": canon(b["input"]), "complete": True})
        else:
            blocks.append(dict(b))
    has_tool = any(b["type"] == "tool_use" for b in blocks)
    stop = answer.get("stop_reason") or ("tool_use" if has_tool else "end_turn")
    details = None
    if answer.get("refusal") is not None:  # §3.3: stop_reason "refusal" with stop_details
        stop = "refusal"
        details = {"type": "refusal", "category": answer["refusal"], "explanation": None}
    if answer.get("empty_end_turn"):  # ellmer #709: content [] with end_turn
        blocks, stop = [], "end_turn"
    if answer.get("truncate_tool_json") and has_tool:  # §3.3: the last tool_use has incomplete JSON
        last = max(i for i, b in enumerate(blocks) if b["type"] == "tool_use")
        tu = blocks[last]
        blocks = [
            *blocks[:last],
            {**tu, "json": tu["json"][: max(1, len(tu["json"]) // 2)], "complete": False},
        ]
        stop = "max_tokens"
    capped = False
    if max_tokens is not None:  # §3.3: every reply is capped at the request's max_tokens
        blocks, capped = cap_blocks(blocks, max_tokens, cost)
        if capped:
            stop, details = "max_tokens", None
    return Reply(blocks, stop, details, capped)


def _last(msgs: list[Any], role: str) -> dict[str, Any] | None:
    return next((m for m in reversed(msgs) if isinstance(m, dict) and m.get("role") == role), None)


def _first_text(content: Any) -> str | None:
    for b in as_blocks(content):
        if isinstance(b, dict) and b.get("type") == "text":
            return str(b.get("text", ""))
    return None


def _all_text(content: Any) -> str:
    return "".join(
        str(b.get("text", "")) for b in as_blocks(content) if isinstance(b, dict) and b.get("type") == "text"
    )


def is_compaction(body: dict[str, Any], marker: str | None) -> bool:
    """Does the last user message's first text block start with the scenario's `compaction_marker`?"""
    last = _last(body.get("messages") or [], "user")
    first = _first_text(last.get("content")) if last else None
    return bool(marker) and first is not None and first.startswith(str(marker))


def _tool_results(body: dict[str, Any], api: str) -> dict[str, dict[str, Any]]:
    msgs = body.get("messages") or []
    if api == "openai":
        tail: list[Any] = []
        for m in reversed(msgs):
            if m.get("role") != "tool":
                break
            tail.append(m)
        return {str(m.get("tool_call_id")): {"content": m.get("content"), "is_error": False} for m in tail}
    last = _last(msgs, "user")
    blocks = as_blocks(last.get("content")) if last else []
    return {
        str(b.get("tool_use_id")): {"content": b.get("content"), "is_error": bool(b.get("is_error", False))}
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }


def check_expect(expect: dict[str, Any] | None, body: dict[str, Any], *, api: str = "anthropic") -> list[str]:
    """Failed `expect` predicates of an answer, as texts (empty when all hold).

    Keys: `tool_result_for` (an id answered in the last user message, or by the trailing tool messages)
    with optional `is_error` and `content`; `last_user_text`; `model`; `tools` (names, in order);
    `system_text`; `max_tokens`; `message_count`.
    """
    problems: list[str] = []
    expect = dict(expect or {})
    msgs = body.get("messages") or []
    if "tool_result_for" in expect:
        ident = str(expect.pop("tool_result_for"))
        found = _tool_results(body, api).get(ident)
        if found is None:
            problems.append(f"expect: no tool_result for {ident}")
        else:
            for key in ("is_error", "content"):
                if key in expect and found[key] != expect[key]:
                    problems.append(
                        f"expect: tool_result {ident} {key} is {found[key]!r}, expected {expect[key]!r}"
                    )
        expect.pop("is_error", None)
        expect.pop("content", None)
    last_user = _last(msgs, "user")
    system = (
        [m.get("content") for m in msgs if m.get("role") == "system"]
        if api == "openai"
        else [body.get("system")]
    )
    actual = {
        "last_user_text": _all_text(last_user.get("content")) if last_user else None,
        "model": body.get("model"),
        "tools": [t.get("name") or (t.get("function") or {}).get("name") for t in body.get("tools") or []],
        "system_text": "".join(_all_text(s) for s in system),
        "max_tokens": body.get("max_tokens", body.get("max_completion_tokens")),
        "message_count": len(msgs),
    }
    for key, want in expect.items():
        if key not in actual:
            problems.append(f"expect: unknown predicate {key!r}")
        elif actual[key] != want:
            problems.append(f"expect: {key} is {actual[key]!r}, expected {want!r}")
    return problems
