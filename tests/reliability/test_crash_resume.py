"""`kill -9` of a real `agentd run` at chosen points, SIGINT during a command, then `--resume`
(TESTING.md §4.1, §4.2; CONTRACTS.md §9, §11; cases C01, C09, C10).

Every recipe ends the same way: `agentd run --resume ID --prompt ...` sends a request the emulator accepts
(status 200, no validation error), the log keeps every record written before the kill byte for byte (resume
only appends), and the messages the resumed request carries are compared as whole objects.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from agentd.core.session import INTERRUPTED_AFTER, INTERRUPTED_BEFORE
from agentd.providers.models import DEFAULT_MODELS
from tests.reliability.conftest import (
    Agentd,
    accepted,
    assistant,
    messages_of,
    result_block,
    strip_cc,
    takeover,
    tool_use_block,
    user,
    wait_file,
    warnings_of,
)
from tests.sandbox_fixtures import wait_survivors

MODEL = DEFAULT_MODELS["anthropic"]
TU1 = "toolu_emu_1_1"  # the emulator's id of the first tool_use of answer 1


def reply(*blocks: dict, **fault: object) -> dict:
    return {"reply": list(blocks), **fault}


def text(t: str) -> dict:
    return {"text": t}


def tool(name: str, **inp: object) -> dict:
    return {"tool_use": {"name": name, "input": inp}}


def test_kill_during_a_model_stream_then_resume(agentd: Agentd) -> None:
    """§4.1 row 1 (C10): SIGKILL while a reply streams; the partial reply is never stored nor sent again,
    and every message acknowledged before the kill is replayed as it was."""
    partial = "This reply is cut off by a crash in the middle of its stream, and must vanish."
    (agentd.ws / "a.txt").write_text("alpha\n")
    agentd.emu.script(
        [
            reply(text("I will read a.txt."), tool("read_file", path="a.txt")),
            reply(text("a.txt says alpha.")),
            # events: message_start, content_block_start, ping, then 16-character deltas: 3 deltas pass
            reply(text(partial), hold_after_events=6, gate="stream"),
            reply(text("Resumed.")),
        ]
    )
    first = agentd.run("one")
    assert first.popen.returncode == 0, first.stderr
    sid = first.session_id()

    held = agentd.start("two", resume=sid)
    assert agentd.emu.wait_reached("stream", 15), "the second run's request never reached the gate"
    lock = agentd.session_dir(sid) / "lock"
    assert json.loads(lock.read_text())["pid"] == held.pid
    held.wait_output(lambda out, _e: out == partial[:48], "the 48 streamed characters on stdout")
    assert held.sigkill() == -9
    assert held.stdout == partial[:48]  # shown as provisional text, never acknowledged

    acknowledged = [
        user("one"),
        assistant("I will read a.txt.", tool_use_block(TU1, "read_file", {"path": "a.txt"})),
        user(result_block(TU1, "     1\talpha")),
        assistant("a.txt says alpha."),
        user("two"),
    ]
    assert messages_of(agentd.records(sid)) == acknowledged
    before = agentd.log_bytes(sid)

    resumed = agentd.run("continue", resume=sid)
    assert (resumed.popen.returncode, resumed.stdout) == (0, "Resumed.\n"), resumed.stderr
    assert warnings_of(resumed.stderr) == [takeover(sid, held.pid)]  # the kernel had released the flock
    assert lock.read_bytes() == b""  # a clean exit clears the holder record
    journal = agentd.emu.journal
    assert [accepted(e) for e in journal] == [(200, None)] * 4
    after = agentd.log_bytes(sid)
    assert after[: len(before)] == before
    assert messages_of(agentd.records(sid)) == [*acknowledged, user("continue"), assistant("Resumed.")]
    sent = journal[3]["body"]
    assert strip_cc(sent["messages"]) == [*acknowledged[:4], user("two", "continue")]
    assert (partial[:16] in json.dumps(sent), partial[:16].encode() in after) == (False, False)


@pytest.mark.parametrize(
    ("point", "synthetic", "ran"),
    [
        ("loop.after_tool_use_persisted", INTERRUPTED_BEFORE, False),
        ("loop.after_tool_started", INTERRUPTED_AFTER, False),
        ("loop.after_tool_exec", INTERRUPTED_AFTER, True),
    ],
)
def test_kill_between_tool_use_and_tool_result_then_resume(
    agentd: Agentd, point: str, synthetic: str, ran: bool
) -> None:
    """C09 / §4.1 rows 2-4: the tool_use is on disk, its result is not; resume answers it synthetically."""
    write = tool_use_block(TU1, "write_file", {"path": "x.txt", "content": "hello\n"})
    agentd.emu.script(
        [
            reply(text("Writing x.txt."), tool("write_file", path="x.txt", content="hello\n")),
            reply(text("Noted.")),
        ]
    )
    killed = agentd.run("write x", args=("--allow", "write_file"), failpoints=f"{point}=kill")
    assert killed.popen.returncode == -9, killed.stderr
    sid = killed.session_id()
    records = agentd.records(sid)
    acknowledged = [user("write x"), assistant("Writing x.txt.", write)]
    assert messages_of(records) == acknowledged
    started = [r["toolCallId"] for r in records if r["kind"] == "tool_started"]
    assert (started, (agentd.ws / "x.txt").exists()) == (
        [] if synthetic == INTERRUPTED_BEFORE else [TU1],
        ran,
    )
    assert "[Tool] " not in killed.stderr  # nothing was reported done that is not stored
    before = agentd.log_bytes(sid)

    resumed = agentd.run("continue", resume=sid, args=("--allow", "write_file"))
    assert (resumed.popen.returncode, resumed.stdout) == (0, "Noted.\n"), resumed.stderr
    assert warnings_of(resumed.stderr) == [takeover(sid, killed.pid)]
    journal = agentd.emu.journal
    assert [accepted(e) for e in journal] == [(200, None), (200, None)]
    answer = result_block(TU1, synthetic, is_error=True)
    assert strip_cc(journal[1]["body"]["messages"]) == [*acknowledged, user(answer, "continue")]
    assert agentd.log_bytes(sid)[: len(before)] == before
    assert messages_of(agentd.records(sid)) == [
        *acknowledged,
        user(answer),
        user("continue"),
        assistant("Noted."),
    ]
    assert (agentd.ws / "x.txt").exists() == ran  # the resume never re-runs the interrupted call


def test_kill_in_the_middle_of_writing_a_record_then_resume(agentd: Agentd) -> None:
    """§4.1 row 5 + §4.2: `store.append.mid=kill-mid-write` tears the tool_result record (append #8, seq 9)."""
    (agentd.ws / "a.txt").write_text("a" * 400 + "\n")
    agentd.emu.script([reply(text("Reading."), tool("read_file", path="a.txt")), reply(text("Back."))])
    # appends: meta (seq 1), prompt+message (2, 3), the checkpoint before the prompt, title, usage, assistant
    # message, tool_started (8), then the tool_result (seq 9)
    killed = agentd.run("read a", failpoints="store.append.mid=kill-mid-write@8")
    assert killed.popen.returncode == -9, killed.stderr
    assert "[Tool] " not in killed.stderr  # persist before notify: the result was never reported
    sid = killed.session_id()
    log = agentd.log_bytes(sid)
    torn = log[log.rindex(b"\n") + 1 :]
    assert re.fullmatch(
        rb'\{"v":1,"seq":9,"at":"[0-9TZ:-]{20}","kind":"message","messageId":"msg_[0-9a-z]{26}",'
        rb'"message":\{"role":"user","content":\[\{"type":"tool_result","tool_use_id":"toolu_emu_1_1",'
        rb'"content":"     1\\ta*',
        torn,
    ), torn
    good = log[: len(log) - len(torn)]
    acknowledged = [
        user("read a"),
        assistant("Reading.", tool_use_block(TU1, "read_file", {"path": "a.txt"})),
    ]

    shown = agentd.cli("sessions", "show", sid)  # the read-only view skips the torn line and writes nothing
    assert shown.popen.returncode == 0, shown.stderr
    assert shown.stderr == (
        f"agentd: warning: Session {sid}: skipped a torn last line of log.jsonl ({len(torn)} bytes after "
        "record 8); it is set aside the next time the session is opened.\n"
    )
    assert agentd.log_bytes(sid) == log

    resumed = agentd.run("continue", resume=sid)
    assert (resumed.popen.returncode, resumed.stdout) == (0, "Back.\n"), resumed.stderr
    warning = (
        f"Session {sid}: the last line of log.jsonl was torn (a crash during a write); its {len(torn)} bytes "
        "were moved to log.jsonl.torn-9 and the log ends at record 8."
    )
    assert warnings_of(resumed.stderr) == [takeover(sid, killed.pid), warning]
    assert (agentd.session_dir(sid) / "log.jsonl.torn-9").read_bytes() == torn
    after = agentd.log_bytes(sid)
    assert after[: len(good)] == good
    records = agentd.records(sid)  # every line parses: the next append started on a fresh line
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    journal = agentd.emu.journal
    assert [accepted(e) for e in journal] == [(200, None), (200, None)]
    answer = result_block(TU1, INTERRUPTED_AFTER, is_error=True)  # tool_started (seq 8) is on disk
    assert strip_cc(journal[1]["body"]["messages"]) == [*acknowledged, user(answer, "continue")]
    assert messages_of(records) == [*acknowledged, user(answer), user("continue"), assistant("Back.")]


def test_sigint_during_run_command_exits_130_and_the_resume_is_valid(agentd: Agentd) -> None:
    """C01: SIGINT while `run_command` runs: exit 130 at once, the command's group is gone, and the
    resumed request answers the open tool_use with the synthetic result first."""
    mark = "30.004218"  # finds the command's processes on the host (inside the sandbox pids differ)
    command = f"echo $$ > cmd.pid; sleep {mark} & sleep {mark}"
    agentd.emu.script([reply(text("Running."), tool("run_command", command=command)), reply(text("Again."))])
    proc = agentd.start("wait", args=("--allow", "run_command"))
    wait_file(agentd.ws / "cmd.pid", "the command's pid file")
    assert len(wait_survivors(mark, 2)) == 2
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    rc = proc.wait(10)
    elapsed = time.monotonic() - t0
    assert (rc, elapsed < 5.0) == (130, True), (elapsed, proc.stderr)  # vs a 30 s command; ~1 s seen
    assert wait_survivors(mark, 0) == []
    sid = proc.session_id()
    acknowledged = [
        user("wait"),
        assistant("Running.", tool_use_block(TU1, "run_command", {"command": command})),
    ]
    assert messages_of(agentd.records(sid)) == acknowledged

    resumed = agentd.run("again", resume=sid)
    assert (resumed.popen.returncode, resumed.stdout) == (0, "Again.\n"), resumed.stderr
    journal = agentd.emu.journal
    assert [accepted(e) for e in journal] == [(200, None), (200, None)]
    answer = result_block(TU1, INTERRUPTED_AFTER, is_error=True)
    sent = strip_cc(journal[1]["body"]["messages"])
    assert sent == [*acknowledged, user(answer, "again")]
    assert sent[2]["content"][0] == answer  # the first user message after the tool_use starts with it


def test_first_request_after_a_resume_reads_the_cache(agentd: Agentd) -> None:
    """C10 through the real anthropic provider: tools, system and history are rebuilt byte for byte, so
    the first request after a resume (inside the TTL) reads the whole earlier prompt from the cache."""
    (agentd.ws / "a.txt").write_text("alpha\n")
    agentd.emu.script(
        {
            "models": {MODEL: {"min_cacheable_tokens": 1024}},
            "answers": [
                reply(text("Reading."), tool("read_file", path="a.txt")),
                reply(text("It says alpha.")),
                reply(text("Still alpha.")),
            ],
        }
    )
    first = agentd.run("what is in a.txt?")
    assert first.popen.returncode == 0, first.stderr
    sid = first.session_id()
    agentd.emu.clock.advance(240)  # type: ignore[attr-defined]  # 4 minutes: inside every TTL
    resumed = agentd.run("and now?", resume=sid)
    assert resumed.popen.returncode == 0, resumed.stderr
    journal = agentd.emu.journal
    assert [accepted(e) for e in journal] == [(200, None)] * 3
    before, after = journal[1], journal[2]
    b, a = before["body"], after["body"]
    # byte for byte but for cache_control, which is not part of the cache key (the TTL policy's choice)
    plain = lambda blocks: [{k: v for k, v in x.items() if k != "cache_control"} for x in blocks]  # noqa: E731
    assert (json.dumps(plain(a["tools"])), json.dumps(plain(a["system"]))) == (
        json.dumps(plain(b["tools"])),
        json.dumps(plain(b["system"])),
    )
    n = len(b["messages"])
    assert strip_cc(a["messages"][:n]) == strip_cc(b["messages"])
    assert strip_cc(a["messages"][n:]) == [assistant("It says alpha."), user("and now?")]
    u0, u1 = before["usage"], after["usage"]
    prompt0 = u0["input_tokens"] + u0["cache_creation_input_tokens"] + u0["cache_read_input_tokens"]
    prompt1 = u1["input_tokens"] + u1["cache_creation_input_tokens"] + u1["cache_read_input_tokens"]
    # the whole earlier prompt is read; only the two new blocks are written (or sent uncached)
    assert u1["cache_read_input_tokens"] == prompt0 > 1024
    assert u1["input_tokens"] + u1["cache_creation_input_tokens"] == prompt1 - prompt0 > 0
