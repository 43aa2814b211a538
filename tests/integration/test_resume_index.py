"""Issue 16 (bounded memory for long sessions): a resume starts at the last compaction, through the log's
index (`log.idx`), and rebuilds exactly what a replay of the whole log rebuilds; a missing, torn, stale or
forged index is verified, dropped and rebuilt; permission records read through it are checked like any."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core import replay
from agentd.core.session import Session
from agentd.permissions.approver import QueueApprover
from agentd.persistence.logindex import Entry
from agentd.persistence.paths import DataDir
from agentd.persistence.store import SessionStore
from tests.integration.conftest import answers_of, read_file, text, todo


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool_use": {"name": "write_file", "input": {"path": path, "content": content}}}


def state(s: Session) -> dict[str, Any]:
    """Everything a resume rebuilds, as JSON-able values."""
    ctx, gate, ck = s.context, s.toolbox.gate, s.checkpointer
    return {
        "messages": json.dumps(ctx.messages), "compactions": (ctx.compaction.compactions, ctx.compaction.replaced_total),
        "ids": sorted(ctx.tool_use_ids()), "turns": s.turns, "totals": s.totals.to_json(), "title": s.title,
        "todos": s.todos(), "stale": s.tracker.stale_count, "grants": sorted(gate.grants.allow_always),
        "mode": gate.mode, "checkpoints": (ck.prompt, ck.commands, ck.rewinds, ck.last), "todosAt": s.journal.todos_at,
        "notes": s.pending_notes, "started": sorted(s.toolbox.started), "load": s.replay_updates(),
    }  # fmt: skip


def starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte offsets the store's readers start at from now on."""
    seen: list[int] = []
    original = SessionStore.iter_records

    def spy(self: SessionStore, start: int = 0, end: int | None = None) -> Any:
        seen.append(start)
        return original(self, start, end)

    monkeypatch.setattr(SessionStore, "iter_records", spy)
    return seen


@pytest.fixture
async def long_session(make_harness, workspace: Path) -> str:
    """Three turns with reads, writes (an "always" grant), todo_writes and several compactions."""
    (workspace / "a.txt").write_text("x" * 4000)
    turn = [[todo(("read", "in_progress")), read_file("a.txt")], [read_file("a.txt")], [write("n.md", "n")],
            [read_file("a.txt")], [text("done")]]  # fmt: skip
    h = make_harness(answers_of(*(turn * 3)), approver=QueueApprover.of("allow_always"))
    h.session.p.settings.context.compress_threshold_tokens = 2500
    h.session.p.settings.context.keep_recent_messages = 4
    for n in range(3):
        assert await h.session.prompt([{"type": "text", "text": f"turn {n}"}]) == "end_turn"
    assert h.session.context.compaction.compactions >= 3
    sid = h.session.id
    h.session.close()
    return sid


@pytest.fixture
def index_of(data_dir: Path):
    return lambda sid: DataDir(data_dir).index_path(sid)


def test_a_resume_through_the_index_equals_a_whole_replay(
    make_harness, long_session: str, index_of, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state after a resume that starts at the last compaction is the whole replay's; the resume reads
    nothing of the log before that compaction but the sparse records; without the index the store reads
    the whole log at open and writes the same index again."""
    index = index_of(long_session)
    written = index.read_bytes()
    entries = [Entry.decode(line) for line in written.splitlines()]
    assert len(entries) >= 3 and all(e.counts["prompts"] >= 1 for e in entries)
    seen = starts(monkeypatch)
    fast = make_harness(resume=long_session).session
    fast_state = state(fast)
    fast.close()
    assert seen and min(seen) >= entries[-1].counts["turn"] > 0  # from the last compaction's turn on
    monkeypatch.setattr(replay, "_restart_entry", lambda *_: None)  # the whole log, replayed
    seen.clear()
    whole = make_harness(resume=long_session).session
    assert state(whole) == fast_state
    assert 0 in seen
    whole.close()
    monkeypatch.undo()
    index.unlink()
    make_harness(resume=long_session).session.close()
    assert index.read_bytes() == written


@pytest.mark.parametrize("damage", ["torn", "garbage", "hash", "offset", "extra"])
def test_a_bad_index_is_dropped_and_rebuilt(make_harness, long_session: str, index_of, damage: str) -> None:
    """A torn last line (a crash while it was written), a line that is not JSON, an entry whose record hash
    or offset does not match, an entry for a record that is not there: the store falls back to reading the
    log and writes the index again; the session is the same."""
    index = index_of(long_session)
    good = index.read_bytes()
    reference = make_harness(resume=long_session).session
    expected = state(reference)
    reference.close()
    lines = good.splitlines(keepends=True)
    last = json.loads(lines[-1])
    if damage == "torn":
        bad = b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]
    elif damage == "garbage":
        bad = b"".join(lines[:-1]) + b"not json\n"
    elif damage == "hash":
        bad = b"".join(lines[:-1]) + json.dumps({**last, "sha256": "0" * 64}).encode() + b"\n"
    elif damage == "offset":
        bad = b"".join(lines[:-1]) + json.dumps({**last, "offset": last["offset"] - 1}).encode() + b"\n"
    else:
        bad = (
            good
            + json.dumps({**last, "seq": last["seq"] + 1, "offset": last["offset"] + 10}).encode()
            + b"\n"
        )
    index.write_bytes(bad)
    again = make_harness(resume=long_session).session
    assert state(again) == expected
    again.close()
    assert index.read_bytes() == good


async def test_a_forged_grant_read_through_the_index_is_not_honoured(
    make_harness, long_session: str, data_dir: Path, index_of
) -> None:
    """Issue 12 §3 through the index: a `grant` record appended by anything but agentd, then a turn that
    compacts, so the resume reads the grant through the index: its signature check still rejects it."""
    log = DataDir(data_dir).log_path(long_session)
    seq = sum(1 for _ in log.open("rb")) + 1
    forged = {"v": 1, "seq": seq, "at": "2026-01-01T00:00:00Z", "kind": "grant", "tool": "run_command",
              "grant": "allow_always"}  # fmt: skip
    with log.open("a") as f:
        f.write(json.dumps(forged) + "\n")
    h = make_harness(
        answers_of([read_file("a.txt")], [read_file("a.txt")], [text("ok")]), resume=long_session
    )
    assert "run_command" not in h.session.toolbox.gate.grants.allow_always
    h.session.p.settings.context.compress_threshold_tokens = 2500
    h.session.p.settings.context.keep_recent_messages = 4
    before = h.session.context.compaction.compactions
    assert await h.session.prompt([{"type": "text", "text": "more"}]) == "end_turn"
    assert h.session.context.compaction.compactions > before
    h.session.close()
    last = Entry.decode(index_of(long_session).read_bytes().splitlines()[-1])
    assert last.seq > seq  # the forged record lies before the compaction a resume starts at
    again = make_harness(resume=long_session).session
    assert "run_command" not in again.toolbox.gate.grants.allow_always
    assert "write_file" in again.toolbox.gate.grants.allow_always  # agentd's own grant, through the index
    again.close()
