"""What agentd stores of a model reply, beyond its blocks: unique tool_use ids and the notes owed to the model
(CONTRACTS.md §8, §11; issue 9 H1 and H3, case C16).

Owns: `unique_tool_use_ids` (a reply's tool_use ids made unique against the history and each other: the first
use of an id runs, a repeat gets a fresh id and an `is_error` result; an id outside the API's pattern
`[A-Za-z0-9_-]+`, a missing or empty one included, gets a valid one and runs), `fresh_tool_use_id`,
`object_input` (a tool_use whose input is not an object is stored with `{}`, so the reply can be sent
back: the API refuses any other input; issue 9 H1 class, break9), `IdRepair` (the same rules applied by
replay to a log written before them, with each tool_result renamed to follow its tool_use), and the
model-facing texts `repeat_text`, `NOT_AN_OBJECT` and `cut_notice`. Used by the loop and by replay, so a
live session and its replay rebuild the same bytes. Imports nothing from agentd.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

Block = dict[str, Any]

_ID = re.compile(r"[A-Za-z0-9_-]+")  # the Messages API's pattern for tool_use ids (and tool_result's)
_NOT_ID_CHAR = re.compile(r"[^A-Za-z0-9_-]")
NOT_AN_OBJECT = "invalid_arguments: input: must be an object"


def valid_id(raw: Any) -> str:
    """`raw` when it is a tool_use id the API accepts back (`[A-Za-z0-9_-]+`); else the same with every
    other character replaced by `_` (`functions.read:0` -> `functions_read_0`, as some OpenAI-compatible
    servers number calls), and `toolu` for a missing or empty id. Deterministic, for replay."""
    if isinstance(raw, str) and _ID.fullmatch(raw):
        return raw
    return _NOT_ID_CHAR.sub("_", raw) if isinstance(raw, str) and raw else "toolu"


def object_input(block: Block) -> tuple[Block, bool]:
    """A tool_use `block` as it may be stored: an input that is not an object (a list, a string, a number:
    the API refuses it in every later request) becomes `{}`. Returns the block (a new dict when changed)
    and whether it changed (the call is then answered with `NOT_AN_OBJECT`, never run)."""
    if block.get("type") != "tool_use" or isinstance(block.get("input"), dict):
        return block, False
    return {**block, "input": {}}, True


@dataclass(frozen=True)
class Renamed:
    """A tool_use whose id was already taken: `old` was replaced by `new`. `repeat` is True when `old` was
    used by an earlier block of the same reply (the call is then refused, not run; issue 9 H1), False when
    it only collided with an id of the history (the call runs under `new`)."""

    old: str
    new: str
    repeat: bool


def fresh_tool_use_id(base: str, *taken: Collection[str]) -> str:
    """`<base>_dup<k>` for the smallest k >= 1 in none of `taken`: deterministic, so replaying the same log
    always rebuilds the same bytes (CONTRACTS.md §6), and within the API's id pattern `[A-Za-z0-9_-]+`."""
    k = 1
    while any(f"{base}_dup{k}" in t for t in taken):
        k += 1
    return f"{base}_dup{k}"


def unique_tool_use_ids(blocks: list[Block], taken: set[str]) -> tuple[list[Block], list[Renamed]]:
    """`blocks` with every tool_use whose id is in `taken` or repeats an earlier block's id given a fresh
    id (case C16: the API rejects a request that repeats a tool_use id anywhere), and every id outside the
    API's pattern made valid first (`valid_id`). The first use of an id in `blocks` keeps it unless the
    history holds it. Returns the new list (renamed blocks are new dicts; the others are the same objects)
    and the renames in block order; a missing id is renamed from `""`. `taken` is not changed."""
    added: set[str] = (
        set()
    )  # ids given out in this reply (`taken` is never copied: replay calls this per reply)
    in_reply: set[str] = set()  # original ids of this reply's tool_uses so far
    out: list[Block] = []
    renames: list[Renamed] = []
    for block in blocks:
        if block.get("type") == "tool_use":
            raw = block.get("id")
            old = raw if isinstance(raw, str) else ""
            base = valid_id(raw)
            new = fresh_tool_use_id(base, taken, added) if base in taken or base in added else base
            if new != raw:
                renames.append(Renamed(old=old, new=new, repeat=bool(old) and old in in_reply))
                block = {**block, "id": new}
            added.add(new)
            in_reply.add(old)
        out.append(block)
    return out, renames


def repeat_text(old_id: str) -> str:
    """The `is_error` result of a call that repeated a tool_use id (CONTRACTS.md §11; case C16)."""
    return (
        f"This call repeated the tool_use id {old_id} of an earlier call in the same reply; it was not run. "
        "Call it again if it is still needed."
    )


def cut_note(names: Collection[str]) -> Block:
    """The user text block that tells the model which calls of its reply were cut off (issue 9 H3)."""
    return {"type": "text", "text": cut_notice([n or "tool" for n in names])}


def cut_notice(names: list[str]) -> str:
    """The note that tells the model its reply was cut off at max_tokens (CONTRACTS.md §11; issue 9 H3)."""
    if len(names) == 1:
        return (
            f"Your previous reply hit max_tokens: the {names[0]} call was cut off before its input was "
            "complete and was not run. Send it again with a shorter input, or split the work into smaller calls."
        )
    return (
        f"Your previous reply hit max_tokens: the calls to {', '.join(names)} were cut off before their input "
        "was complete and were not run. Send them again with shorter inputs, or split the work into smaller "
        "calls."
    )


class IdRepair:
    """Replay's repair of a log whose replies repeat tool_use ids (written before case C16 was fixed).

    `assistant(blocks, taken)` renames as `unique_tool_use_ids` does; `user(blocks)` then gives each
    tool_result the id of the tool_use it answers (the k-th result for an id answers its k-th use) and drops
    a second result for one use. Deterministic: every replay of one log rebuilds the same history.
    """

    def __init__(self) -> None:
        self._ids: dict[str, deque[str]] = {}  # original id -> final ids of its uses, in order
        self._answered: set[str] = set()

    def assistant(self, blocks: list[Block], taken: set[str]) -> list[Block]:
        out, renames = unique_tool_use_ids([object_input(b)[0] for b in blocks], taken)
        self._ids, self._answered = {}, set()
        if renames:
            for old, new in zip(blocks, out, strict=True):
                if new.get("type") == "tool_use":
                    self._ids.setdefault(str(old.get("id")), deque()).append(str(new.get("id")))
        return out

    def user(self, blocks: list[Block]) -> list[Block]:
        out: list[Block] = []
        for block in blocks:
            if block.get("type") == "tool_result":
                tid = str(block.get("tool_use_id"))
                uses = self._ids.get(tid)
                if uses:
                    tid = uses.popleft()
                    block = block if tid == block.get("tool_use_id") else {**block, "tool_use_id": tid}
                if tid in self._answered:
                    continue  # a second result for one tool_use: the API accepts one
                self._answered.add(tid)
            out.append(block)
        return out
