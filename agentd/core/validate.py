"""agentd's request validator: the messages the API rejects are never sent (CONTRACTS.md §8).

Owns: `validate_request(body, prefix, marked) -> str | None`, `validate_messages(messages) -> str | None` and
`Checked`, a history prefix checked as it grows (issue 16: the Context extends it by the messages added since
the last request, and a request is then checked from the end of the prefix on, with the same rules: the
cost of a check does not grow with the history). Runs before every send and after every resume or replay.
Implemented independently of the emulator (`agentd/testing/emulator`), which is the outside judge; neither
imports the other. Imports nothing from agentd.

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

import re
from collections.abc import Callable, Collection, Container, Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_BREAKPOINTS = 4
_ID = re.compile(r"[A-Za-z0-9_-]+")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _pairing_at(messages: list[dict[str, Any]], i: int) -> str | None:
    """Rules 1 and 2 at message i (an assistant's tool_uses answered by message i+1; a user's tool_results
    answer message i-1)."""
    msg = messages[i]
    blocks = _blocks(msg.get("content"))
    if msg.get("role") == "assistant":
        ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if not ids:
            return None
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        answered = set()
        if nxt is not None and nxt.get("role") == "user":
            answered = {
                b.get("tool_use_id") for b in _blocks(nxt.get("content")) if b.get("type") == "tool_result"
            }
        missing = [t for t in ids if t not in answered]
        if missing:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}"
            )
        return None
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


def _ids_at(msg: dict[str, Any], i: int, seen: set[str], known: Container[str] = frozenset()) -> str | None:
    """Rules 3 and 4 at message i: the service rejects a repeated `tool_use` id anywhere in the request, an
    id outside its pattern, an input that is not an object, and a second `tool_result` for one id (its
    texts, anthropics/claude-code#21317 and #28515). `seen`: the ids (repr) of the messages checked before
    in this pass, updated; `known`: those of a checked prefix before them (read only)."""
    answered: set[str] = set()
    for j, b in enumerate(_blocks(msg.get("content"))):
        if b.get("type") == "tool_use":
            if not isinstance(b.get("id"), str) or not _ID.fullmatch(b["id"]):
                return f"messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
            if not isinstance(b.get("input"), dict):
                return f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
            key = repr(b.get("id"))
            if key in seen or key in known:
                return f"messages.{i}.content.{j}: `tool_use` ids must be unique"
            seen.add(key)
        elif b.get("type") == "tool_result":
            tid = b.get("tool_use_id")
            if repr(tid) in answered:
                return (
                    f"messages.{i}.content.{j}: each tool_use must have a single result. Found multiple "
                    f"`tool_result` blocks with id: {tid}"
                )
            answered.add(repr(tid))
    return None


def _results_first_at(msg: dict[str, Any], i: int) -> str | None:
    blocks = _blocks(msg.get("content"))
    n = sum(1 for b in blocks if b.get("type") == "tool_result")
    if n and any(b.get("type") != "tool_result" for b in blocks[:n]):
        return f"messages.{i}: Did not find {n} `tool_result` block(s) at the beginning of this message"
    return None


def _empty_at(messages: list[dict[str, Any]], i: int) -> str | None:
    msg = messages[i]
    content = msg.get("content")
    empty = (isinstance(content, str) and content == "") or (isinstance(content, list) and not content)
    if empty and not (i == len(messages) - 1 and msg.get("role") == "assistant"):
        return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
    return None


def _each(
    messages: list[dict[str, Any]], check: Callable[[list[dict[str, Any]], int], str | None]
) -> str | None:
    for i in range(len(messages)):
        err = check(messages, i)
        if err:
            return err
    return None


def _unique_ids(messages: list[dict[str, Any]]) -> str | None:
    seen: set[str] = set()
    for i, msg in enumerate(messages):
        err = _ids_at(msg, i, seen)
        if err:
            return err
    return None


def _is_empty_text(b: dict[str, Any]) -> bool:
    return b.get("type") == "text" and b.get("text", "") == "" and "cache_control" not in b


def _is_blank_text(b: dict[str, Any]) -> bool:
    """anthropics/claude-code#23440: whitespace-only text is a 400 too."""
    text = b.get("text", "")
    return b.get("type") == "text" and isinstance(text, str) and bool(text) and not text.strip()


def _empty_text(points: list[tuple[str, dict[str, Any]]]) -> str | None:
    # Text blocks inside a tool_result's content and system blocks count too (the API rejects them alike).
    for path, b in points:
        if _is_empty_text(b):
            return f"{path.split('.')[0]}: text content blocks must be non-empty"
    for path, b in points:
        if _is_blank_text(b):
            return f"{path.split('.')[0]}: text content blocks must contain non-whitespace text"
    return None


def _head_points(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for k, t in enumerate(body.get("tools") or []):
        if isinstance(t, dict):
            yield f"tools.{k}", t
    system = body.get("system")
    if isinstance(system, list):
        for k, b in enumerate(system):
            if isinstance(b, dict):
                yield f"system.{k}", b


def _message_points(i: int, msg: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, list):
        for j, b in enumerate(content):
            if isinstance(b, dict):
                yield f"messages.{i}.content.{j}", b
                if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                    for k, inner in enumerate(b["content"]):
                        if isinstance(inner, dict):
                            yield f"messages.{i}.content.{j}.content.{k}", inner


def _cache_points(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every block that may carry `cache_control`, in the order tools -> system -> messages (blocks inside
    a tool_result's content list included)."""
    points = list(_head_points(body))
    for i, msg in enumerate(body.get("messages") or []):
        points.extend(_message_points(i, msg))
    return points


def _cache_control(points: list[tuple[str, dict[str, Any]]]) -> str | None:
    marked = [(p, b) for p, b in points if b.get("cache_control")]
    if len(marked) > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marked)}."
        )
    for path, b in marked:
        if b.get("type") == "text" and b.get("text", "") == "":
            return f"{path}.text: cache_control cannot be set for empty text blocks"
    seen_5m = False
    for path, b in marked:
        ttl = b["cache_control"].get("ttl", "5m")
        if ttl == "1h" and seen_5m:
            return (
                f"{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block"
            )
        seen_5m = seen_5m or ttl != "1h"
    return None


def _role_at(messages: list[dict[str, Any]], i: int) -> str | None:
    if i == 0:
        return (
            'messages: first message must use the "user" role' if messages[0].get("role") != "user" else None
        )
    role = messages[i - 1].get("role")
    if role == messages[i].get("role"):
        return f'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row'
    return None


def validate_messages(messages: list[dict[str, Any]]) -> str | None:
    """Check a history (list of `{"role", "content"}`) against the message rules; None when valid."""
    if not messages:
        return "messages: at least one message is required"
    err = _message_rules(messages)
    if err:
        return err
    return _empty_text(_cache_points({"messages": messages})) or _each(messages, _role_at)


def _message_rules(messages: list[dict[str, Any]]) -> str | None:
    """Rules 1-6, each over the whole history in turn (the first violation of the first rule broken)."""
    err = _each(messages, _pairing_at) or _unique_ids(messages)
    return err or _each(messages, lambda m, i: _results_first_at(m[i], i)) or _each(messages, _empty_at)


def validate_request(
    body: dict[str, Any], prefix: Checked | None = None, marked: Collection[int] = ()
) -> str | None:
    """Check a Messages API request body (`tools`, `system`, `messages`); None when it would be accepted.

    Returns the first violation as text (CONTRACTS.md §8). Never raises on malformed input.
    `prefix`: the builder vouches that the body's messages start with that checked prefix, the
    `cache_control` marks on the messages at `marked` aside (`Context.to_request`); only the rest is
    checked then (the same rules), and a violation is reported as the whole check reports it.
    """
    if prefix is not None and prefix.count and _rest_ok(body, prefix, marked):
        return None
    messages = body.get("messages") or []
    err = _message_rules(messages)
    if err:
        return err
    points = _cache_points(body)
    err = _empty_text(points) or _cache_control(points)
    if err:
        return err
    if not messages:
        return "messages: at least one message is required"
    return _each(messages, _role_at)


# ---- incremental checking (issue 16) ----------------------------------------------------------------
@dataclass
class Checked:
    """A checked prefix of a history that only grows: `messages[:count]` break no rule among themselves and
    carry no `cache_control`, and the last of them is checked again with what follows (its tool_uses are
    answered by the next message). `ids`: the tool_use ids (repr) of `messages[:start]`. The owner resets
    it (`Checked()`) when any of those messages changes."""

    count: int = 0
    ids: set[str] = field(default_factory=set)

    @property
    def start(self) -> int:
        """Where a check of what follows the prefix begins (its last message, with the next)."""
        return max(self.count - 1, 0)

    def extend(self, messages: list[dict[str, Any]], upto: int) -> None:
        """Check `messages[start:upto]` and move the prefix to `upto` (< len(messages)) when they break no
        rule; else it stays (the whole check then reports the violation)."""
        start = self.start
        if upto <= self.count or upto >= len(messages):
            return
        seen: set[str] = set()
        if not all(_message_ok(messages, i, seen, self.ids) for i in range(start, upto)):
            return
        for i in range(start, upto - 1):
            self.ids.update(
                repr(b.get("id")) for b in _blocks(messages[i].get("content")) if b.get("type") == "tool_use"
            )
        self.count = upto


def _message_ok(
    messages: list[dict[str, Any]], i: int, seen: set[str], known: Container[str], *, marks: bool = False
) -> bool:
    """Every message rule at message i holds; with `marks=False` it carries no `cache_control` either (nor
    do the blocks inside its tool_results)."""
    msg = messages[i]
    if not isinstance(msg, dict):
        return False
    if _pairing_at(messages, i) or _ids_at(msg, i, seen, known) or _results_first_at(msg, i):
        return False
    if _empty_at(messages, i) or _role_at(messages, i):
        return False
    return not any(
        _is_empty_text(b) or _is_blank_text(b) or (not marks and "cache_control" in b)
        for _, b in _message_points(i, msg)
    )


def _rest_ok(body: dict[str, Any], prefix: Checked, marked: Collection[int]) -> bool:
    """The messages from `prefix.start` on, the tools and the system break no rule, nor do the marks of
    the whole request (those on `marked` messages of the prefix included)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) <= prefix.count:
        return False
    start, seen = prefix.start, set[str]()
    rest = range(start, len(messages))
    if not all(_message_ok(messages, i, seen, prefix.ids, marks=True) for i in rest):
        return False
    head = list(_head_points(body))
    if any(_is_empty_text(b) or _is_blank_text(b) for _, b in head):
        return False
    points = head + [p for i in sorted(marked) if i < start for p in _message_points(i, messages[i])]
    points += [p for i in rest for p in _message_points(i, messages[i])]
    return _cache_control(points) is None
