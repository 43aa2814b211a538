"""Approvers: terminal (no tty, a pty), presets, the queue double (CONTRACTS.md §5; PROTOCOL.md §3.1)."""

from __future__ import annotations

import asyncio
import os
import pty
import socket

import pytest

from agentd.clock import ManualClock
from agentd.permissions import approver as approver_mod
from agentd.permissions.approver import (
    ApprovalOutcome,
    ApprovalRequest,
    PresetApprover,
    QueueApprover,
    TerminalApprover,
    render_prompt,
)
from agentd.permissions.gate import Decision, Gate, denial_text
from agentd.tools.base import Preview


def request(preview: Preview, tool: str = "run_command", timeout_s: float = 120) -> ApprovalRequest:
    return ApprovalRequest("sess_1", "toolu_01", tool, f"Approve {tool}", preview, timeout_s)


CMD = Preview(summary="Run `npm test`", command="npm test", cwd="/projects/shop")


def no_tty(path: str) -> int:
    raise OSError(6, "No such device or address", path)


async def test_no_tty_denies_as_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approver_mod, "_open_tty", no_tty)
    outcome = await TerminalApprover().request(request(CMD))
    assert outcome == ApprovalOutcome(option="reject_once", decided_by="timeout", detail="no terminal to ask")


async def test_no_tty_through_the_gate() -> None:
    gate = Gate(approver=TerminalApprover(open_tty=no_tty), clock=ManualClock(), line_writer=lambda _l: None)
    decision = await gate.decide("run_command", {"command": "npm test"}, CMD, "toolu_01")
    assert decision == Decision(
        decision="deny", decided_by="timeout", rule="default:run_command=ask", detail="no terminal to ask"
    )
    assert (
        denial_text("run_command", decision)
        == "No approval was given (no terminal to ask); the call was not run."
    )


@pytest.mark.parametrize(
    ("typed", "option"),
    [
        (b"o\n", "allow_once"),
        (b"A\n", "allow_always"),
        (b"d\n", "reject_once"),
        (b"maybe\nd\n", "reject_once"),
        (b"y\n", "allow_once"),
        (b"no\n", "reject_once"),
    ],
)
async def test_terminal_answers_on_a_pty(typed: bytes, option: str) -> None:
    """`agentd run` also takes the terminal client's keys (y once, n reject; found by a new user, who typed
    y and was told to answer o, a or d)."""
    master, slave = pty.openpty()
    try:
        os.write(master, typed)  # typed before the question: the line discipline keeps it
        outcome = await TerminalApprover(open_tty=lambda _p: slave).request(request(CMD))
        assert outcome == ApprovalOutcome(option=option)  # type: ignore[arg-type]
    finally:
        os.close(master)
    with pytest.raises(OSError):
        os.fstat(slave)  # the approver closed the tty


async def test_terminal_eof_or_io_error_is_no_terminal() -> None:
    ours, peer = socket.socketpair()
    peer.shutdown(socket.SHUT_WR)  # the other side will never type anything
    read_end, write_end = os.pipe()
    os.close(write_end)
    try:
        eof = await TerminalApprover(open_tty=lambda _p: os.dup(ours.fileno())).request(request(CMD))
        shown = peer.recv(4096)
        broken = await TerminalApprover(open_tty=lambda _p: read_end).request(request(CMD))  # write fails
    finally:
        ours.close()
        peer.close()
    none = ApprovalOutcome(option="reject_once", decided_by="timeout", detail="no terminal to ask")
    assert (eof, broken) == (none, none)
    assert shown == b"\n" + render_prompt(request(CMD)).encode()


async def test_terminal_timeout() -> None:
    master, slave = pty.openpty()
    try:
        outcome = await TerminalApprover(open_tty=lambda _p: slave).request(request(CMD, timeout_s=0))
    finally:
        os.close(master)
    assert outcome == ApprovalOutcome(
        option="reject_once", decided_by="timeout", detail="timed out after 0 s"
    )


def test_prompt_shows_command_and_cwd() -> None:
    assert render_prompt(request(CMD)) == (
        "[agentd] Approve run_command\n$ npm test\n(cwd /projects/shop)\nAllow? [o]nce / [a]lways / [d]eny: "
    )


def test_the_terminal_prompt_escapes_bidi_controls_and_invisible_characters() -> None:
    """H20: on the terminal, a command and a diff show `\\u202e`, `\\u200b`, `\\xa0` instead of the
    characters that would make them look like something else; the cwd too."""
    cmd = Preview(summary="Run", command="ls\u202e -la\u200b;\xa0rm x", cwd="/p/w\u2066s")
    assert render_prompt(request(cmd)) == (
        "[agentd] Approve run_command\n$ ls\\u202e -la\\u200b;\\xa0rm x\n(cwd /p/w\\u2066s)\n"
        "Allow? [o]nce / [a]lways / [d]eny: "
    )
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-ok = 1\n+ok = 0  # \u202e1 = ko\ufeff"
    text = render_prompt(request(Preview(summary="Edit x.py", path="x.py", diff=diff), "edit_file"))
    assert "+ok = 0  # \\u202e1 = ko\\ufeff\n" in text and text.isascii()


def test_prompt_shows_the_first_200_diff_lines() -> None:
    diff = "\n".join(f"+line {i}" for i in range(250))
    text = render_prompt(request(Preview(summary="Write a.txt", path="a.txt", diff=diff), "write_file"))
    lines = text.split("\n")
    assert lines[:2] == ["[agentd] Approve write_file", "+line 0"]
    assert lines[-3:] == ["+line 199", "... (50 more diff lines)", "Allow? [o]nce / [a]lways / [d]eny: "]
    assert len(lines) == 203


async def test_preset_yes_and_allow() -> None:
    fallback = QueueApprover.of("reject_once")
    yes = PresetApprover(yes=True, allow=(), fallback=fallback)
    only = PresetApprover(yes=False, allow=["run_command"], fallback=fallback)
    outcomes = [
        await yes.request(request(CMD, "write_file")),
        await only.request(request(CMD, "run_command")),
        await only.request(request(CMD, "write_file")),
    ]
    assert outcomes == [
        ApprovalOutcome(option="allow_once", rule="--yes", note="auto-answered by --yes"),
        ApprovalOutcome(
            option="allow_once", rule="--allow run_command", note="auto-answered by --allow run_command"
        ),
        ApprovalOutcome(option="reject_once"),
    ]
    assert [r.tool_name for r in fallback.requests] == ["write_file"]


async def test_queue_approver_answers_later() -> None:
    queue = QueueApprover()
    gate = Gate(approver=queue, approval_timeout_s=120, line_writer=lambda _l: None)
    task = asyncio.ensure_future(gate.decide("write_file", {}, Preview(summary="w"), "toolu_01"))
    await asyncio.wait_for(queue.asked.wait(), timeout=5)
    queue.answer(ApprovalOutcome(option="allow_once"))
    assert await asyncio.wait_for(task, timeout=5) == Decision(
        decision="allow",
        decided_by="user",
        rule="default:write_file=ask",
        detail="allow_once",
        option="allow_once",
    )
