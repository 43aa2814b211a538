"""Checkpoints, rewind and fork in-process (issue 13; docs/checkpoints.md): a turn that changes files through
every tool and through commands is undone byte for byte and mode for mode; a file the user changed after
the checkpoint is kept unless confirmed; a conversation rewind keeps the log append-only and the next
request valid and cached; a fork continues on its own."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from agentd.audit_verify import verify_session
from agentd.clock import ManualClock
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.persistence.store import read_records
from agentd.providers.anthropic import AnthropicProvider
from agentd.testing.emulator import Emulator
from tests.integration.conftest import answers_of, text, todo

BINARY = bytes(range(256)) * 3 + b"\x00\xff\xfe"


def prompt(t: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t}]


def call(name: str, **inp: Any) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": inp}}


def state(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path but .git: type, permission bits, bytes or link target."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("f", stat.S_IMODE(st.st_mode), Path(p).read_bytes())
    return out


@pytest.fixture
def tree(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def total(xs):\n    return sum(xs)\n")
    (workspace / "README.md").write_text("# shop\n")
    (workspace / "notes.txt").write_text("keep me\n")
    (workspace / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(workspace / "run.sh", 0o755)
    (workspace / "logo.bin").write_bytes(BINARY)
    (workspace / "old").mkdir()
    (workspace / "old" / "a.txt").write_text("a\n")
    (workspace / "old" / "deep").mkdir()
    (workspace / "old" / "deep" / "b.txt").write_text("b\n")
    (workspace / ".gitignore").write_text("*.log\n")
    return workspace


def agent_turn() -> list[dict[str, Any]]:
    """One turn that writes, edits, creates, deletes and chmods through the tools and commands."""
    sh = "run_command"
    return [
        [todo(("change everything", "in_progress"))],
        [call("write_file", path="README.md", content="# shop\nrewritten\n")],
        [call("edit_file", path="src/app.py", old_string="sum(xs)", new_string="sum(xs) + 1")],
        [call("write_file", path="src/new_module.py", content="NEW = True\n")],
        [call(sh, command="sed -i 's/keep/changed/' notes.txt")],
        [call(sh, command="printf 'generated\\n' > gen.txt && mkdir -p build2 && echo x > build2/out.txt")],
        [call(sh, command="rm -rf old && rm README.md && chmod 600 run.sh && chmod +x src/app.py")],
        [call(sh, command="printf '\\001\\002\\003' > logo.bin && echo trace > run.log")],
        {"reply": [text("done")]},
    ]


async def test_rewind_restores_every_byte_and_mode(make_harness: Any, tree: Path) -> None:
    """Acceptance: a turn through every tool and commands (sed -i, a generated file, a deleted folder, a
    binary file) is undone; the ignored file it made stays; a file the user edited afterwards is kept."""
    before = state(tree)
    h = make_harness(answers_of(*agent_turn()), approver=QueueApprover.of(*["allow_once"] * 10))
    assert await h.session.prompt(prompt("change everything")) == "end_turn"
    assert state(tree) != before
    (tree / "src" / "app.py").write_text("user's own edit\n")  # between turns: the user's
    dry = await h.session.rewind(1, dry_run=True)
    assert (
        dry["done"] is False and {"path": "src/app.py", "reason": "changed_by_user"} in dry["files"]["kept"]
    )
    result = await h.session.rewind(1, conversation=False)
    after = state(tree)
    assert after.pop("run.log") == ("f", 0o644, b"trace\n")  # ignored: never covered, never touched
    assert after.pop("src/app.py") == ("f", 0o755, b"user's own edit\n")  # kept: the user changed it
    expected = dict(before)
    expected.pop("src/app.py")
    assert after == expected
    assert {"path": "src/app.py", "reason": "changed_by_user"} in result["files"]["kept"]
    assert "gen.txt" in result["files"]["removed"] and "old/deep/b.txt" in result["files"]["restored"]


def emu_text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def emu_call(name: str, tid: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def emu_todo(tid: str, *items: tuple[str, str]) -> dict[str, Any]:
    return emu_call("todo_write", tid, todos=[{"content": c, "status": s} for c, s in items])


async def test_conversation_rewind_then_a_prompt_is_valid_cached_and_has_that_plan(
    make_harness: Any, emulator: Emulator, workspace: Path, data_dir: Path
) -> None:
    """Acceptance: rewind the conversation to before prompt 2, then prompt: the request is valid (the emulator
    checks it), its prefix is read from the cache as far as turn 1 wrote it, the plan is turn 1's, and the
    log keeps the abandoned turn."""
    (workspace / "big.txt").write_text("lorem ipsum dolor sit amet " * 800)
    emulator.script({"answers": [
        {"reply": [emu_todo("t1", ("read big.txt", "in_progress"))]},
        {"reply": [emu_call("read_file", "r1", path="big.txt")]},
        {"reply": [emu_text("read it")]},
        {"reply": [emu_todo("t2", ("second plan", "in_progress"))]},
        {"reply": [emu_text("second turn")]},
        {"reply": [emu_text("another way")]},
    ]})  # fmt: skip
    provider = AnthropicProvider("emu-sonnet", "sk-test", emulator.url, ManualClock())
    try:
        h = make_harness(provider=provider)
        s = h.session
        assert await s.prompt(prompt("read big.txt")) == "end_turn"
        plan_then, stale_then, messages_then = s.todos()["todos"], s.tracker.stale_count, len(s.context)
        assert await s.prompt(prompt("make a second plan")) == "end_turn"
        assert s.todos()["todos"] != plan_then
        messages_before = len(s.context)
        result = await s.rewind(2, files=False)
        assert result["conversation"] == {"messagesBefore": messages_before, "messagesAfter": messages_then,
                                          "abandonedPrompts": [2]}  # fmt: skip
        assert (s.todos()["todos"], s.tracker.stale_count, len(s.context)) == (
            plan_then,
            stale_then,
            messages_then,
        )
        assert await s.prompt(prompt("do it another way")) == "end_turn"
    finally:
        await provider.aclose()
    journal = emulator.journal
    assert [e["status"] for e in journal] == [200] * 6
    last_of_turn_1, after_rewind = journal[2]["usage"], journal[5]["usage"]
    written = last_of_turn_1["cache_read_input_tokens"] + last_of_turn_1["cache_creation_input_tokens"]
    assert after_rewind["cache_read_input_tokens"] >= written > 3000
    sent = journal[5]["body"]["messages"]
    assert "make a second plan" not in str(sent) and "do it another way" in str(sent)
    records, _ = read_records(data_dir, s.id)
    prompts = [r["content"][0]["text"] for r in records if r["kind"] == "prompt"]
    assert prompts == ["read big.txt", "make a second plan", "do it another way"]  # nothing deleted
    assert [
        c["id"] for c in s.checkpoints()["checkpoints"] if c["before"] == "prompt" and not c["active"]
    ] == ["2"]


async def test_fork_then_both_go_on_alone(
    make_harness: Any, emulator: Emulator, workspace: Path, data_dir: Path
) -> None:
    """Acceptance: fork at the end, then a different prompt in each: neither request holds the other's
    prompt; the fork's first request reads the shared prefix from the cache; the fork keeps the grant and
    the plan, has its own log and audit log (which verifies); the original's end state stays reachable."""
    (workspace / "big.txt").write_text("lorem ipsum dolor sit amet " * 800)
    emulator.script({"answers": [
        {"reply": [emu_todo("t1", ("read big.txt", "in_progress")), emu_call("read_file", "r1", path="big.txt")]},
        {"reply": [emu_call("write_file", "w1", path="notes.md", content="# notes\n")]},
        {"reply": [emu_text("first turn done")]},
        {"reply": [emu_text("original goes on")]},
        {"reply": [emu_text("fork goes on")]},
    ]})  # fmt: skip
    provider = AnthropicProvider("emu-sonnet", "sk-test", emulator.url, ManualClock())
    try:
        original = make_harness(provider=provider, approver=QueueApprover.of("allow_always"))
        assert await original.session.prompt(prompt("read big.txt")) == "end_turn"
        forked = original.session.fork()
        assert forked["forkedFrom"] == original.session.id and forked["at"] is None
        assert await original.session.prompt(prompt("original: continue")) == "end_turn"
        fork = make_harness(provider=provider, resume=forked["sessionId"])
        assert fork.session.todos()["todos"] == [{"content": "read big.txt", "status": "in_progress"}]
        assert fork.session.status()["totals"]["requests"] == 0  # the source's requests are not the fork's
        assert await fork.session.prompt(prompt("fork: continue")) == "end_turn"
    finally:
        await provider.aclose()
    journal = emulator.journal
    assert [e["status"] for e in journal] == [200] * 5
    orig_req, fork_req = str(journal[3]["body"]["messages"]), str(journal[4]["body"]["messages"])
    assert "original: continue" in orig_req and "fork: continue" not in orig_req
    assert "fork: continue" in fork_req and "original: continue" not in fork_req
    turn_1 = journal[2]["usage"]
    assert journal[4]["usage"]["cache_read_input_tokens"] >= turn_1["cache_read_input_tokens"] + turn_1[
        "cache_creation_input_tokens"]  # fmt: skip
    assert "write_file" in fork.session.toolbox.gate.grants.allow_always  # signed anew, honoured
    for sid in (original.session.id, fork.session.id):
        report = verify_session(DataDir(data_dir), sid)
        assert report.ok, report.render()
    assert len(os.listdir(data_dir / "sessions" / fork.session.id / "checkpoints" / "packs")) >= 1
    orig_records, _ = read_records(data_dir, original.session.id)
    assert "original goes on" in str(orig_records) and "fork goes on" not in str(orig_records)


async def test_an_incremental_checkpoint_reads_no_snapshot_back(
    make_harness: Any, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cost class of issue 13 (found by `python -m tests.benchmarks.checkpoint`: 2.6 s instead of 0.08
    s): a checkpoint keeps the snapshot it recorded in memory, so the next one never loads the whole tree
    back from the store; its cost follows what changed."""
    h = make_harness(answers_of({"reply": [text("ok")]}))
    assert await h.session.prompt(prompt("look")) == "end_turn"

    def no_load(*_a: Any) -> None:
        raise AssertionError("a snapshot was read back from the store")

    monkeypatch.setattr("agentd.core.checkpoints.load", no_load)
    (tree / "README.md").write_text("# changed\n")
    record = await h.session.checkpointer.take("run_command")
    assert record is not None and record["changed"] == ["README.md"] and "error" not in record
