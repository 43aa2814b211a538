"""H6 (break9): a crash while a tool ran leaves its `tool_started` record but no result; deleting that call's
audit record (the last one), or replacing it with a torn line, must not pass `agentd audit verify`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentd.audit_verify import verify_session
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from tests.conftest import TAMPERED_MARK
from tests.integration.conftest import answers_of, read_file, text


@pytest.fixture
async def crashed(make_harness, workspace: Path, data_dir: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of a data dir whose session log ends at the last call's `tool_started` record, as a kill -9
    while that tool ran leaves it (its audit record was written before)."""
    (workspace / "a.txt").write_text("a\n")
    write = {"tool_use": {"name": "write_file", "input": {"path": "t.txt", "content": "x"}}}
    h = make_harness(
        answers_of([read_file("a.txt")], [write], [text("done")]), approver=QueueApprover.of("allow_once")
    )
    assert await h.session.prompt([{"type": "text", "text": "go"}]) == "end_turn"
    h.session.close()
    sid = h.session.id
    data = tmp_path / "crashed"
    shutil.copytree(data_dir, data)
    log = data / "sessions" / sid / "log.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    last_start = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "tool_started")
    log.write_bytes(b"".join(lines[: last_start + 1]))
    assert verify_session(DataDir(data), sid).ok  # the crash alone is no tampering
    (data / TAMPERED_MARK).write_text("this test breaks the audit log on purpose\n")
    return data, sid


@pytest.mark.parametrize("disguise", [b"", b'{"v":1,"seq":2,"prev":"sha256:ab'])
def test_h6_a_deleted_record_of_a_call_that_started_is_broken(
    crashed: tuple[Path, str], disguise: bytes
) -> None:
    """H6 (break9): the audit record of a call the log shows started is deleted (plainly, or replaced by a
    torn line that would pass as a crash): verify reports it missing (it used to pass: only calls with a
    result were required)."""
    data, sid = crashed
    audit = data / "sessions" / sid / "audit.jsonl"
    lines = audit.read_bytes().splitlines(keepends=True)
    audit.write_bytes(b"".join(lines[:-1]) + disguise)
    report = verify_session(DataDir(data), sid)
    assert not report.ok
    assert "no audit record for tool call" in (report.broken or "") and "started" in (report.broken or "")
