"""Issue 16: a kill -9 while the resume index (`log.idx`) is written, or between the durable `compaction`
record and its index line, costs nothing: the next open finds the index torn or short, reads the log from
the last good entry, and writes the index again; every record is there once."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from agentd.persistence.logindex import Entry
from agentd.persistence.paths import DataDir
from agentd.persistence.store import SessionStore, read_records
from tests.reliability.test_store_faults import DEADLINE_S, SID, spawn

COMPACT = """
import sys
from agentd.persistence.store import SessionStore
s = SessionStore.open(sys.argv[1], sys.argv[2])
summary = {"role": "user", "content": [{"type": "text", "text": "[Summary of earlier conversation]\\nS"}]}
for i in range(int(sys.argv[3])):
    s.append("prompt", {"messageId": f"m{i}", "content": [{"type": "text", "text": "x" * 200}]})
    s.append("compaction", {"replaced": 1, "summary": summary, "kept": [], "stale": 0})
s.close()
"""


@pytest.fixture
def dd(tmp_path: Path) -> DataDir:
    d = DataDir(tmp_path / "data")
    SessionStore.create(d, SID, {"cwd": str(tmp_path), "provider": "scripted", "model": "m"}).close()
    return d


@pytest.mark.parametrize("action", ["kill-mid-write", "kill"])
@pytest.mark.parametrize("nth", [1, 3])
def test_a_kill_while_the_index_is_written_is_repaired_at_open(dd: DataDir, action: str, nth: int) -> None:
    child = spawn(COMPACT, dd, "3", failpoints=f"store.index.mid={action}@{nth}")
    try:
        assert child.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=DEADLINE_S)
    records, warnings = read_records(dd, SID)
    assert warnings == [] and [r["kind"] for r in records] == ["meta"] + ["prompt", "compaction"] * nth
    index = dd.index_path(SID)
    lines = index.read_bytes().split(b"\n") if index.exists() else [b""]
    assert len([x for x in lines[:-1] if x]) == nth - 1  # the entry of the last compaction is missing
    with SessionStore.open(dd, SID) as s:
        assert (s.last_seq, s.warnings) == (1 + 2 * nth, [])
        assert [e.seq for e in s.entries] == [3 + 2 * k for k in range(nth)]
    entries = [Entry.decode(x) for x in index.read_bytes().splitlines()]
    assert [e.seq for e in entries] == [3 + 2 * k for k in range(nth)]
    assert entries[-1].counts["prompts"] == nth
