"""Branches of a session log (issue 13): which records make up the conversation now.

Owns: `active_seqs()` and `BRANCH_KINDS`. The log is append-only; a conversation rewind is a `rewind` record
with `conversation: true` and `toSeq`, the seq of the checkpoint record it goes back to. Every record hangs
below the record that was the tip when it was written; a conversation rewind moves the tip back to its
checkpoint record, so what follows grows a new branch and the records after that checkpoint stay in the log as
an abandoned branch (shown by `agentd sessions show`, never replayed into the conversation). The active
branch is the tip's line of ancestors.

Record kinds that belong to a branch (`BRANCH_KINDS`: the conversation, its plan and what the model saw)
are replayed only when on the active branch; the others (permission grants and mode, title, token totals,
checkpoints, rewinds) hold for the whole session. Imports nothing from agentd.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

BRANCH_KINDS = frozenset(
    {
        "prompt",
        "message",
        "tool_call",
        "tool_started",
        "todos",
        "compaction",
        "instructions",
        "usage",
        "withdrawn",
    }
)


def is_conversation_rewind(record: Mapping[str, Any]) -> bool:
    return (
        record.get("kind") == "rewind"
        and bool(record.get("conversation"))
        and isinstance(record.get("toSeq"), int)
    )


def _parents(records: Iterable[Mapping[str, Any]]) -> tuple[dict[int, int], int]:
    """Each record's parent seq (0 for the first), and the tip after the last record."""
    parent: dict[int, int] = {}
    tip = 0
    for rec in records:
        seq = rec.get("seq")
        if not isinstance(seq, int):
            continue
        parent[seq] = tip
        if is_conversation_rewind(rec) and rec["toSeq"] in parent:
            tip = rec["toSeq"]  # the rewind itself stays on the branch it ended
        else:
            tip = seq
    return parent, tip


def _chain(parent: dict[int, int], tip: int) -> set[int]:
    chain: set[int] = set()
    while tip and tip not in chain:
        chain.add(tip)
        tip = parent.get(tip, 0)
    return chain


def active_seqs(records: Iterable[Mapping[str, Any]]) -> set[int]:
    """The seqs of the records on the active branch (see the module docstring), in O(records)."""
    parent, tip = _parents(records)
    return _chain(parent, tip)


def branch_seqs(records: Iterable[Mapping[str, Any]], tip: int) -> set[int]:
    """The seqs of the branch that ends at record `tip` (that record included): the conversation as it was
    when `tip` was written, whichever branch it is on."""
    parent, _ = _parents(records)
    return _chain(parent, tip) if tip in parent else set()


def on_branch(record: Mapping[str, Any], active: Container[int]) -> bool:
    """Whether a record counts for the conversation now: a branch kind on the active branch, or any other
    kind (those hold for the whole session)."""
    return record.get("kind") not in BRANCH_KINDS or record.get("seq") in active


class ActiveBranch:
    """The active branch as seq ranges, from the log's conversation rewinds alone (no other record needed:
    a resume reads them through the index, issue 16). `seq in branch` as `seq in active_seqs(records)`.
    `rewinds`: the `rewind` records in log order (others are ignored); `last_seq`: the log's last seq."""

    def __init__(self, rewinds: Iterable[Mapping[str, Any]], last_seq: int) -> None:
        jumps = [(int(r["seq"]), int(r["toSeq"])) for r in rewinds if is_conversation_rewind(r)]
        jumps = [(seq, to) for seq, to in jumps if 1 <= to < seq]  # `toSeq in parent`: an earlier record
        self.ranges: list[tuple[int, int]] = []  # (low, high) inclusive, highest first
        cur = last_seq
        if jumps and jumps[-1][0] == last_seq:  # the log ends with a rewind: the tip is its target
            cur = jumps.pop()[1]
        for seq, to in reversed(jumps):
            if seq >= cur:
                continue  # a rewind on a branch already left, or the tip itself (it moves what follows)
            self.ranges.append((seq + 1, cur))
            cur = to
        if cur >= 1:
            self.ranges.append((1, cur))

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and any(lo <= seq <= hi for lo, hi in self.ranges)
