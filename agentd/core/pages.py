"""One answer of `agentd/session/history`, read through the log's index (PROTOCOL.md §6.15; issue 16 §3;
break16 F4).

Owns: `PAGE_BYTES` (the bound of one answer), `Page`, and `read_page(session, before, max_bytes)`: the
conversation updates of the records before record `before`, read backwards from it and never past the start
of its page (where the turn of a compaction on the active branch starts: the log's index, `log.idx`, says
where; `before` itself is found by a binary search on seqs). Records are taken in parts that end where a
turn or an assistant message starts (a tool use's final record and result are in its part), newest first,
while the updates stay within `max_bytes` (one part always, however big); the answer's `before` is where
the next answer goes on: the seq of its first record, or of the page's start once the page is complete (its
compaction's summary then comes first, as in the replay), `None` at the log's start. So what an answer
shows equals what `history.earlier_updates` (the whole log) shows for the same records, and what one
answer reads and parses is about its own size, whatever the log's. Reads only; runs in a worker thread
(the adapters call it through asyncio.to_thread): it reads the store (pread on its fd) and builds updates,
never touching the connection or the loop. Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentd import failpoints
from agentd.core.history import conversation_updates, summary_update
from agentd.errors import UsageError

if TYPE_CHECKING:
    from agentd.core.session import Session
    from agentd.persistence.branches import ActiveBranch
    from agentd.persistence.store import SessionStore

PAGE_BYTES = 256 << 10  # of updates (their JSON) per answer, unless one part alone is bigger
_TURN_KINDS = ("checkpoint", "prompt")


@dataclass
class Page:
    """One answer: `updates` (log order), `before` (where to go on; None: nothing precedes), and what it
    cost: `bytes_read` of the log and `records` parsed (tests assert on them, not on time)."""

    updates: list[dict[str, Any]] = field(default_factory=list)
    before: int | None = None
    bytes_read: int = 0
    records: int = 0
    size: int = 0  # bytes of JSON of `updates`
    parts: int = 0  # turns / assistant messages with what follows them

    def result(self) -> dict[str, Any]:
        return {"updates": self.updates, "before": self.before}


def read_page(session: Session, before: int, max_bytes: int = PAGE_BYTES) -> Page:
    """The answer to `agentd/session/history {before}` (module docstring). Raises UsageError when `before`
    is not the seq of a turn's start or an assistant message on the active branch, StorageError when the
    log cannot be read."""
    failpoints.hit("history.page")
    store = session.journal.store
    branch = store.active_branch()
    end = store.offset_of(before) if isinstance(before, int) else None
    head = store.head_at(end) if end is not None else None
    if end is None or head is None or head[0] not in branch or not _cursor(head):
        raise UsageError(
            f"agentd/session/history: before={before!r} is not a page of this session; pass the "
            "_meta.agentd.earlier.before of a replayed summary, or the `before` of the previous page."
        )
    start = _page_start(store, branch, end)
    page = Page()
    part: list[dict[str, Any]] = []  # newest first
    for _at, length, rec in store.iter_records_back(start, end):
        if part and _cut_before(part[-1], rec):
            if not _take(session, branch, page, part, max_bytes):
                return page
            part = []
        part.append(rec)
        page.bytes_read, page.records = page.bytes_read + length, page.records + 1
    if part and not _take(session, branch, page, part, max_bytes):
        return page
    if start > 0:
        _summary_first(store, branch, page, start)
    else:
        page.before = None
    return page


def _cursor(head: tuple[int, str, str | None]) -> bool:
    """Whether an answer may end before this record: a turn's start or an assistant message."""
    return head[1] in _TURN_KINDS or (head[1] == "message" and head[2] == "assistant")


def _cut_before(later: dict[str, Any], rec: dict[str, Any]) -> bool:
    """Whether a part may start at `later`, `rec` being the record before it: at an assistant message, or at
    a turn's start (its checkpoints go with its prompt)."""
    kind = later.get("kind")
    if kind == "message":
        return (later.get("message") or {}).get("role") == "assistant"
    return kind in _TURN_KINDS and rec.get("kind") != "checkpoint"


def _take(session: Session, branch: ActiveBranch, page: Page, part: list[dict[str, Any]], limit: int) -> bool:
    """Put `part` (newest first) before the page's updates if they stay within `limit` bytes (or the page
    has none yet); False when it does not fit (the page then ends, `before` where its updates start)."""
    updates = conversation_updates(session, reversed(part), branch)
    size = sum(len(json.dumps(u, ensure_ascii=False)) for u in updates)
    if page.before is not None and page.size + size > limit:
        return False
    page.updates[:0] = updates
    page.size += size
    page.parts += 1
    page.before = part[-1].get("seq")
    return True


def _page_start(store: SessionStore, branch: ActiveBranch, end: int) -> int:
    """Where the page holding the records just before byte `end` starts: the last start of a compaction's
    turn (index entries on the active branch, not the first turn) before `end` that is on the branch, else
    0 (the log's start)."""
    for turn in sorted(_starts(store, branch), reverse=True):
        head = store.head_at(turn) if turn < end else None
        if head is not None and head[1] in _TURN_KINDS and head[0] in branch:
            return turn
    return 0


def _starts(store: SessionStore, branch: ActiveBranch) -> set[int]:
    return {
        int(e.counts["turn"])
        for e in list(store.entries)
        if e.seq in branch and e.counts["turn"] != e.counts["firstTurn"]
    }


def _summary_first(store: SessionStore, branch: ActiveBranch, page: Page, start: int) -> None:
    """Put the summary of the page's compaction (its last on the branch whose turn starts at `start`) first;
    `page.before`, the page's start seq, is where the next answer goes on."""
    last = [e for e in list(store.entries) if e.seq in branch and int(e.counts["turn"]) == start]
    summary = summary_update(store.read_sparse(last[-1]), page.before) if last else None
    if summary is not None:
        page.updates.insert(0, summary)
