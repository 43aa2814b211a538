"""Two processes on one session, and the `agentd sessions` commands on live and crashed sessions
(TESTING.md §4.1 "20 resumes", §4.3; CONTRACTS.md §9; PROTOCOL.md §3.1 exit codes; cases C05, C06)."""

from __future__ import annotations

import hashlib
import json
import socket
from datetime import datetime
from pathlib import Path

from agentd.config import Settings
from agentd.core.factory import open_session
from agentd.core.session import INTERRUPTED_AFTER
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.providers.models import DEFAULT_MODELS
from agentd.providers.scripted import ScriptedProvider
from tests.reliability.conftest import Agentd, accepted, assistant, log_records, messages_of, user

MODEL = DEFAULT_MODELS["anthropic"]


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file in a session folder, by name."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()
    }


def locked_text(sid: str, info: dict) -> str:
    since = datetime.fromisoformat(info["since"]).astimezone().strftime("%H:%M")
    pid = info["pid"]
    return (
        f"agentd: Session {sid} is open in agentd pid {pid} on {socket.gethostname()} since {since}. "
        f"Close that editor window or stop pid {pid}, then retry; "
        f"or read it with agentd sessions show {sid}, or start a new session.\n"
    )


def test_a_second_resume_of_a_held_session_exits_4_naming_the_holder(agentd: Agentd) -> None:
    """C06 / §4.3: while A holds S (its reply held at a gate), `agentd run --resume S` exits 4 naming A's
    pid and writes nothing; `sessions show|list` still work, `rm` is refused; the log never interleaves."""
    agentd.emu.script(
        [
            {"reply": [{"text": "Hello."}]},
            {"reply": [{"text": "Held, then finished."}], "hold_after_events": 3, "gate": "a"},
        ]
    )
    first = agentd.run("one")
    assert first.popen.returncode == 0, first.stderr
    sid = first.session_id()
    sdir = agentd.session_dir(sid)

    holder = agentd.start("two", resume=sid)
    assert agentd.emu.wait_reached("a", 15), "A's request never reached the gate"
    info = json.loads((sdir / "lock").read_text())
    assert (info["pid"], info["hostname"]) == (holder.pid, socket.gethostname())
    before = snapshot(sdir)

    second = agentd.run("three", resume=sid)
    assert (second.popen.returncode, second.stdout, second.stderr) == (4, "", locked_text(sid, info))
    refused = agentd.cli("sessions", "rm", sid)
    assert (refused.popen.returncode, refused.stderr) == (4, locked_text(sid, info))
    shown = agentd.cli("sessions", "show", sid)
    assert (shown.popen.returncode, shown.stderr) == (0, "")
    assert shown.stdout == (
        f"Session {sid}\nworkspace: {agentd.ws}  model: {MODEL}\n\n"
        "[User] one\n[Assistant] Hello.\n[User] two\n\nPlan:\n(no todos)\n"
    )
    listed = agentd.cli("sessions", "list")
    meta = json.loads((sdir / "meta.json").read_text())
    tokens = sum(meta["tokens"].values())
    assert (listed.popen.returncode, listed.stdout) == (
        0,
        f"{'ID':<34} {'UPDATED':<20} {'TURNS':>5} {'TOKENS':>9}  WORKSPACE  TITLE\n"
        # meta.json is rewritten when a turn starts, so the held second turn already counts
        f"{sid:<34} {meta['updatedAt'][:19]:<20} {2:>5} {tokens:>9}  {agentd.ws}  one  [open in pid {holder.pid}]\n",
    )
    assert snapshot(sdir) == before  # the loser, show, list and the refused rm wrote zero bytes
    assert len(agentd.emu.journal) == 2  # and the loser never reached the model

    agentd.emu.gate("a").open()
    assert (holder.wait(), holder.stdout) == (0, "Held, then finished.\n"), holder.stderr
    assert [accepted(e) for e in agentd.emu.journal] == [(200, None), (200, None)]
    records = log_records(sdir / "log.jsonl")  # each line parses
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert messages_of(records) == [
        user("one"),
        assistant("Hello."),
        user("two"),
        assistant("Held, then finished."),
    ]

    exported = agentd.cli("sessions", "export", sid, "--format", "jsonl")
    assert (exported.popen.returncode, exported.stdout) == (0, (sdir / "log.jsonl").read_text())
    removed = agentd.cli("sessions", "rm", sid)
    assert (removed.popen.returncode, removed.stderr, sdir.exists()) == (0, f"deleted session {sid}\n", False)
    gone = agentd.cli("sessions", "show", sid)
    assert (gone.popen.returncode, gone.stderr) == (
        3,
        f"agentd: Session {sid} is not in the data dir ({agentd.data}); "
        "run agentd sessions list to see sessions, or start a new session.\n",
    )


def test_resuming_20_times_without_a_prompt_leaves_the_session_byte_identical(agentd: Agentd) -> None:
    """B5 / §4.1: a session killed with a tool_use open is opened and closed 20 times (replay, repair
    check, validator): log.jsonl, meta.json and audit.jsonl keep their bytes, since synthetic results wait
    for the next prompt; `agentd sessions show` renders the same transcript before and after."""
    todo = {"todos": [{"content": "write x", "status": "in_progress"}]}
    write = {"content": "hello\n", "path": "x.txt"}  # the emulator streams inputs with sorted keys
    agentd.emu.script(
        [
            {
                "reply": [
                    {"text": "Plan first."},
                    {"tool_use": {"name": "todo_write", "input": todo}},
                    {"tool_use": {"name": "write_file", "input": write}},
                ]
            }
        ]
    )
    killed = agentd.run("make x", args=("--allow", "write_file"), failpoints="loop.after_tool_started=kill@2")
    assert killed.popen.returncode == -9, killed.stderr
    sid = killed.session_id()
    sdir = agentd.session_dir(sid)
    shown = agentd.cli("sessions", "show", sid)
    snapshot_text = '{"todos":[{"content":"write x","status":"in_progress"}]}'
    assert (shown.popen.returncode, shown.stdout) == (
        0,
        f"Session {sid}\nworkspace: {agentd.ws}  model: {MODEL}\n\n[User] make x\n[Assistant] Plan first.\n"
        f"-> todo_write {json.dumps(todo)}\n-> write_file {json.dumps(write)}\n"
        f"[Tool] <- result: {snapshot_text}\n\nPlan:\n- [~] write x\n",
    )
    before = snapshot(sdir)
    assert sorted(before) == ["audit.jsonl", "lock", "log.jsonl", "meta.json"]

    expected_open = [{"type": "tool_result", "tool_use_id": "toolu_emu_1_2", "content": INTERRUPTED_AFTER,
                      "is_error": True}]  # fmt: skip
    for _ in range(20):
        session = open_session(
            session_id=sid, settings=Settings(), provider=ScriptedProvider({"answers": []}),
            data_dir=DataDir(agentd.data), approver=QueueApprover(), lines=lambda _line: None,
        )  # fmt: skip
        try:
            state = (session.synthetic_results(), session.p.todos.snapshot_json(), session.turns)
        finally:
            session.close()
        assert state == (expected_open, snapshot_text, 1)
    after = snapshot(sdir)
    assert {k: v for k, v in after.items() if k != "lock"} == {k: v for k, v in before.items() if k != "lock"}
    again = agentd.cli("sessions", "show", sid)
    assert (again.popen.returncode, again.stdout, again.stderr) == (0, shown.stdout, shown.stderr)
