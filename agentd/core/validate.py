"""agentd's request validator: the messages the API rejects are never sent (CONTRACTS.md §8).

Owns: `validate_request(body) -> str | None` and `validate_messages(messages) -> str | None`.
Runs before every send and after every resume or replay. Implemented independently of the emulator
(`agentd/testing/emulator`), which is the outside judge; neither imports the other. Imports nothing from agentd.

Rules, checked in this order; the first violation is reported as one line of text:
1. every `tool_use` in assistant message i is answered by a `tool_result` in message i+1;
2. no `tool_result` whose id is not a `tool_use` of the previous assistant message;
3. `tool_use` ids are unique across the whole request (case C16, issue 9 H1), match `[A-Za-z0-9_-]+`, and
   a `tool_use` input is an object (H1 class, break9: the API refuses anything else in every later request);
4. at most one `tool_result` per `tool_use` (H1);
5. `tool_result` blocks come first in their message;
6. no empty content, except a final assistant message;
7. no empty text block;
8. at most 4 `cache_control` blocks (tools, system and messages together);
9. no `cache_control` on an empty text block;
10. a `ttl: "1h"` breakpoint never follows a `5m` one along tools -> system -> messages;
11. the first message is `user`;
12. roles alternate (consecutive same-role messages must be merged before sending).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

MAX_BREAKPOINTS = 4
_ID = re.compile(r"[A-Za-z0-9_-]+")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _pairing(messages: list[dict[str, Any]]) -> str | None:
    for i, msg in enumerate(messages):
        blocks = _blocks(msg.get("content"))
        if msg.get("role") == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if not ids:
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = set()
            if nxt is not None and nxt.get("role") == "user":
                answered = {
                    b.get("tool_use_id")
                    for b in _blocks(nxt.get("content"))
                    if b.get("type") == "tool_result"
                }
            missing = [t for t in ids if t not in answered]
            if missing:
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}"
                )
        else:
            prev = messages[i - 1] if i > 0 else None
            prev_ids = set()
            if prev is not None and prev.get("role") == "assistant":
                prev_ids = {b.get("id") for b in _blocks(prev.get("content")) if b.get("type") == "tool_use"}
            for j, b in enumerate(blocks):
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in prev_ids:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}"
                    )
    return None


def _unique_ids(messages: list[dict[str, Any]]) -> str | None:
    """Rules 3 and 4: the service rejects a repeated `tool_use` id anywhere in the request, an id outside its
    pattern, an input that is not an object, and a second `tool_result` for one id (its texts,
    anthropics/claude-code#21317 and #28515)."""
    seen: set[str] = set()
    for i, msg in enumerate(messages):
        answered: set[str] = set()
        for j, b in enumerate(_blocks(msg.get("content"))):
            if b.get("type") == "tool_use":
                if not isinstance(b.get("id"), str) or not _ID.fullmatch(b["id"]):
                    return f"messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                if not isinstance(b.get("input"), dict):
                    return f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                if repr(b.get("id")) in seen:
                    return f"messages.{i}.content.{j}: `tool_use` ids must be unique"
                seen.add(repr(b.get("id")))
            elif b.get("type") == "tool_result":
                tid = b.get("tool_use_id")
                if repr(tid) in answered:
                    return (
                        f"messages.{i}.content.{j}: each tool_use must have a single result. Found multiple "
                        f"`tool_result` blocks with id: {tid}"
                    )
                answered.add(repr(tid))
    return None


def _results_first(messages: list[dict[str, Any]]) -> str | None:
    for i, msg in enumerate(messages):
        blocks = _blocks(msg.get("content"))
        n = sum(1 for b in blocks if b.get("type") == "tool_result")
        if n and any(b.get("type") != "tool_result" for b in blocks[:n]):
            return f"messages.{i}: Did not find {n} `tool_result` block(s) at the beginning of this message"
    return None


def _empty(messages: list[dict[str, Any]]) -> str | None:
    last = len(messages) - 1
    for i, msg in enumerate(messages):
        content = msg.get("content")
        empty = (isinstance(content, str) and content == "") or (isinstance(content, list) and not content)
        if empty and not (i == last and msg.get("role") == "assistant"):
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
    return None


def _empty_text(body: dict[str, Any]) -> str | None:
    # Text blocks inside a tool_result's content and system blocks count too (the API rejects them alike).
    for path, b in _cache_points(body):
        if b.get("type") == "text" and b.get("text", "") == "" and "cache_control" not in b:
            return f"{path.split('.')[0]}: text content blocks must be non-empty"
    for path, b in _cache_points(body):  # anthropics/claude-code#23440: whitespace-only text is a 400 too
        text = b.get("text", "")
        if b.get("type") == "text" and isinstance(text, str) and text and not text.strip():
            return f"{path.split('.')[0]}: text content blocks must contain non-whitespace text"
    return None


def _cache_points(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every block that may carry `cache_control`, in the order tools -> system -> messages (blocks inside
    a tool_result's content list included)."""
    for k, t in enumerate(body.get("tools") or []):
        if isinstance(t, dict):
            yield f"tools.{k}", t
    system = body.get("system")
    if isinstance(system, list):
        for k, b in enumerate(system):
            if isinstance(b, dict):
                yield f"system.{k}", b
    for i, msg in enumerate(body.get("messages") or []):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            for j, b in enumerate(content):
                if isinstance(b, dict):
                    yield f"messages.{i}.content.{j}", b
                    if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                        for k, inner in enumerate(b["content"]):
                            if isinstance(inner, dict):
                                yield f"messages.{i}.content.{j}.content.{k}", inner


def _cache_control(body: dict[str, Any]) -> str | None:
    points = [(p, b) for p, b in _cache_points(body) if b.get("cache_control")]
    if len(points) > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(points)}."
        )
    for path, b in points:
        if b.get("type") == "text" and b.get("text", "") == "":
            return f"{path}.text: cache_control cannot be set for empty text blocks"
    seen_5m = False
    for path, b in points:
        ttl = b["cache_control"].get("ttl", "5m")
        if ttl == "1h" and seen_5m:
            return (
                f"{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block"
            )
        seen_5m = seen_5m or ttl != "1h"
    return None


def _roles(messages: list[dict[str, Any]]) -> str | None:
    if messages and messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    for a, b in itertools.pairwise(messages):
        if a.get("role") == b.get("role"):
            return f'messages: roles must alternate between "user" and "assistant", but found multiple "{a.get("role")}" roles in a row'
    return None


def validate_messages(messages: list[dict[str, Any]]) -> str | None:
    """Check a history (list of `{"role", "content"}`) against the message rules; None when valid."""
    if not messages:
        return "messages: at least one message is required"
    for check in (_pairing, _unique_ids, _results_first, _empty):
        err = check(messages)
        if err:
            return err
    return _empty_text({"messages": messages}) or _roles(messages)


def validate_request(body: dict[str, Any]) -> str | None:
    """Check a Messages API request body (`tools`, `system`, `messages`); None when it would be accepted.

    Returns the first violation as text (CONTRACTS.md §8). Never raises on malformed input.
    """
    messages = body.get("messages") or []
    for check in (_pairing, _unique_ids, _results_first, _empty):
        err = check(messages)
        if err:
            return err
    err = _empty_text(body) or _cache_control(body)
    if err:
        return err
    if not messages:
        return "messages: at least one message is required"
    return _roles(messages)
