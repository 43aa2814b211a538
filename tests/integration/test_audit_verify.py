"""`agentd audit verify` on a real session: the hash chain and the cross-check with the session log find a
deleted, an edited and a reordered record; a crash's torn line is not tampering (issue 9 H5, H6)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentd.audit import INPUT_BLOB_MIN_BYTES
from agentd.audit_verify import EXIT_AUDIT_BROKEN, verify_session
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from tests.conftest import TAMPERED_MARK, broken_audit_logs
from tests.integration.conftest import answers_of, read_file, text, todo

COMMAND = "ls" + " " * 250 + "; cat .env"


def _tool(name: str, **inp: object) -> dict[str, object]:
    return {"tool_use": {"name": name, "input": inp}}


@pytest.fixture
async def session_id(make_harness, workspace: Path) -> str:
    """A finished session with 5 audit records: todo_write, read_file, run_command (a command past
    character 200), write_file (an input big enough for a blob) and edit_file."""
    (workspace / "a.txt").write_text("a\n")
    (workspace / ".env").write_text("X=1\n")
    h = make_harness(
        answers_of(
            [todo(("look", "in_progress")), read_file("a.txt")],
            [_tool("run_command", command=COMMAND)],
            [_tool("write_file", path="big.txt", content="b" * INPUT_BLOB_MIN_BYTES)],
            [_tool("edit_file", path="a.txt", old_string="a", new_string="c")],
            [text("done")],
        ),
        approver=QueueApprover.of("allow_once", "allow_once", "allow_once"),
    )
    assert await h.session.prompt([{"type": "text", "text": "go"}]) == "end_turn"
    h.session.close()
    return h.session.id


def _copy(data_dir: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(data_dir, target)
    (target / TAMPERED_MARK).write_text("this test breaks the audit log on purpose\n")
    return target


def _lines(data: Path, sid: str) -> list[bytes]:
    return (data / "sessions" / sid / "audit.jsonl").read_bytes().splitlines(keepends=True)


def _write(data: Path, sid: str, lines: list[bytes]) -> None:
    (data / "sessions" / sid / "audit.jsonl").write_bytes(b"".join(lines))


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTD_DATA_DIR": str(data)}
    return subprocess.run(
        [sys.executable, "-m", "agentd", "audit", "verify", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_h5_the_real_session_audits_full_inputs(session_id: str, data_dir: Path) -> None:
    """H5: the command past character 200 is in the record twice (input and command); the big write is a
    blob whose sha256 names it."""
    records = [json.loads(x) for x in _lines(data_dir, session_id)]
    assert [r["tool"] for r in records] == [
        "todo_write",
        "read_file",
        "run_command",
        "write_file",
        "edit_file",
    ]
    assert (records[2]["command"], records[2]["input"]["command"]) == (COMMAND, COMMAND)
    ref = records[3]["inputBlob"]["sha256"]
    blob = (data_dir / "sessions" / session_id / "blobs" / ref).read_bytes()
    assert json.loads(blob) == {"path": "big.txt", "content": "b" * INPUT_BLOB_MIN_BYTES}


def test_h6_an_intact_session_verifies_through_the_command_line(session_id: str, data_dir: Path) -> None:
    """H6: exit 0 and one line on stdout; an unknown session exits 3."""
    ok = _cli(data_dir, session_id)
    assert (ok.returncode, ok.stdout, ok.stderr) == (
        0,
        f"session {session_id}: 5 audit records; hash chain intact; consistent with the session log: OK\n",
        "",
    )
    missing = _cli(data_dir, "sess_0000000000000000000000000a")
    assert (missing.returncode, missing.stdout) == (3, "")
    assert "agentd sessions list" in missing.stderr


Tamper = Callable[[list[bytes]], list[bytes]]


def _edit(n: int, old: bytes, new: bytes) -> Tamper:
    def change(lines: list[bytes]) -> list[bytes]:
        assert old in lines[n]
        return [*lines[:n], lines[n].replace(old, new), *lines[n + 1 :]]

    return change


CASES: dict[str, tuple[Tamper, int | None, str]] = {
    "deleted": (lambda ls: ls[:1] + ls[2:], 2, "record 2 is missing (deleted): line 2 holds record 3"),
    "deleted two": (lambda ls: ls[:1] + ls[3:], 2, "records 2 to 3 are missing (deleted)"),
    "deleted first": (lambda ls: ls[1:], 1, "record 1 is missing (deleted): line 1 holds record 2"),
    "reordered": (
        lambda ls: [ls[0], ls[2], ls[1], *ls[3:]],
        2,
        "records out of order: line 2 holds record 3, and record 2 is on line 3",
    ),
    "edited": (
        _edit(2, b"; cat .env", b"; true    "),
        4,
        "the chain breaks before record 4: record 3 (line 3) was changed after it was written",
    ),
    "edited decision": (
        _edit(1, b'"decision":"allow"', b'"decision":"deny"'),
        3,
        "the chain breaks before record 3: record 2 (line 2) was changed",
    ),
    "deleted last": (lambda ls: ls[:-1], None, "no audit record for tool call "),
    "edited last": (
        _edit(4, b'"new_string":"c"', b'"new_string":"d"'),
        5,
        "record 5 (tool_use toolu_scr_4_1) does not match the tool call in the session log",
    ),
    "not json": (_edit(1, b'{"v":1,', b'{"v":1,,'), 2, "not a JSON record"),
    "copied": (lambda ls: [*ls, ls[-1]], 6, "line 6 holds record 5 again or out of place"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_h6_verify_finds_the_first_broken_or_missing_record(
    case: str, session_id: str, data_dir: Path, tmp_path: Path
) -> None:
    """H6: a deleted record, an edited record and a reordered pair (and their cousins) exit 8 and name the
    first broken or missing record."""
    tamper, line, message = CASES[case]
    data = _copy(data_dir, tmp_path, "tampered")
    _write(data, session_id, tamper(_lines(data, session_id)))
    report = verify_session(DataDir(data), session_id)
    assert (report.ok, report.exit_code, report.line) == (False, EXIT_AUDIT_BROKEN, line)
    assert message in (report.broken or "")
    if case in ("deleted", "reordered", "edited"):
        out = _cli(data, session_id)
        assert (out.returncode, out.stdout) == (EXIT_AUDIT_BROKEN, report.render())
        assert "BROKEN" in out.stdout


def test_h6_a_changed_or_missing_input_blob_is_broken(
    session_id: str, data_dir: Path, tmp_path: Path
) -> None:
    data = _copy(data_dir, tmp_path, "tampered")
    ref = json.loads(_lines(data, session_id)[3])["inputBlob"]["sha256"]
    blob = data / "sessions" / session_id / "blobs" / ref
    blob.write_bytes(blob.read_bytes().replace(b"bbbb", b"bbbc", 1))
    assert "its input blob" in (verify_session(DataDir(data), session_id).broken or "")
    blob.unlink()
    assert "is missing or unreadable" in (verify_session(DataDir(data), session_id).broken or "")


async def test_h6_a_torn_last_line_is_reported_as_a_crash_not_tampering(
    make_harness, session_id: str, data_dir: Path
) -> None:
    """H6: a crash mid-write leaves a torn last line: verify passes and says so; the next write sets it
    aside, and verify still passes and names the set-aside file."""
    audit = data_dir / "sessions" / session_id / "audit.jsonl"
    with audit.open("ab") as fh:
        fh.write(b'{"v":1,"seq":6,"prev":"sha256:12')
    torn = verify_session(DataDir(data_dir), session_id)
    assert (torn.ok, torn.records, len(torn.notes)) == (True, 5, 1)
    assert "torn: a crash during a write, not tampering" in torn.notes[0]
    h = make_harness(answers_of([read_file("a.txt")], [text("ok")]), resume=session_id)
    assert await h.session.prompt([{"type": "text", "text": "again"}]) == "end_turn"
    h.session.close()
    after = verify_session(DataDir(data_dir), session_id)
    assert (after.ok, after.records) == (True, 6)
    assert after.notes == [
        "audit.jsonl.torn-6: a line torn by a crash, set aside when the session was next written; not tampering"
    ]


def test_h6_the_sweep_finds_a_broken_session_and_skips_marked_ones(
    session_id: str, data_dir: Path, tmp_path: Path
) -> None:
    """The end-of-run check (tests/conftest.py) that every session the tests leave behind verifies."""
    broken = tmp_path / "sweep" / "broken"
    shutil.copytree(data_dir, broken)
    _write(broken, session_id, _lines(broken, session_id)[1:])
    shutil.copytree(broken, tmp_path / "sweep" / "marked")
    (tmp_path / "sweep" / "marked" / TAMPERED_MARK).write_text("on purpose\n")
    shutil.copytree(data_dir, tmp_path / "sweep" / "intact")
    checked, reports = broken_audit_logs([tmp_path / "sweep"])
    assert (checked, len(reports)) == (2, 1)
    assert reports[0].startswith(f"{broken}: session {session_id}: 4 audit records; BROKEN")
    (broken / TAMPERED_MARK).write_text("on purpose\n")  # the real sweep at the end of the run skips it
