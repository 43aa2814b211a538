"""`agentd run` as a new user met it, driven from outside (new-user R2, R3, R7): the real CLI in a pty of its
own (the approval questions go to /dev/tty), the scripted model, a temp HOME and data dir."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.sandbox_fixtures import needs_bwrap


@dataclass
class Ran:
    tty: str
    out: str
    err: str
    code: int


def run_on_a_terminal(tmp: Path, answers: list[dict[str, Any]], *args: str, keys: str = "") -> Ran:
    """`agentd run --provider scripted` on the scenario `answers` in `tmp/ws`, with a pty as its controlling
    terminal; each `Allow?` question on it gets the next letter of `keys`."""
    ws, scenario = tmp / "ws", tmp / "scenario.json"
    ws.mkdir(exist_ok=True)
    scenario.write_text(json.dumps({"answers": answers}))
    argv = [sys.executable, "-m", "agentd", "run", "--provider", "scripted", "--scenario", str(scenario),
            "--data-dir", str(tmp / "data"), "--prompt", "go", *args]  # fmt: skip
    master, slave = pty.openpty()

    def own_terminal() -> None:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=own_terminal, pass_fds=(slave,))  # fmt: skip
    os.close(slave)
    shown, left = b"", list(keys)
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            assert ready, f"no output on the terminal for 120 s: {shown!r}"
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the process and its terminal are gone
                break
            if not chunk:
                break
            asked = shown.count(b"Allow?")
            shown += chunk
            for _ in range(shown.count(b"Allow?") - asked):
                os.write(master, (left.pop(0) if left else "d").encode() + b"\n")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Ran(shown.decode(errors="replace"), out.decode(), err.decode(), proc.returncode)


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": name, "input": args}}]}


DONE = {"reply": [{"text": "Done."}], "stop_reason": "end_turn"}


def test_the_question_says_whether_a_command_runs_outside_the_sandbox(tmp_path: Path) -> None:
    """new-user R2: `agentd run` asked about `run_command` with `"unsandboxed": true` exactly as about a
    sandboxed one; it now says where each runs, in the words of the terminal client."""
    needs_bwrap()
    answers = [call("run_command", command="echo inside"),
               call("run_command", command="echo outside", unsandboxed=True), DONE]  # fmt: skip
    ran = run_on_a_terminal(tmp_path, answers, keys="od")
    inside, outside = ran.tty.split("$ echo outside")
    assert "(runs in the sandbox)" in inside and "outside the sandbox" not in inside, ran.tty
    assert "(asks for: outside the sandbox)" in outside and "runs in the sandbox" not in outside, ran.tty
    assert "[Permission] run_command -> deny (user)" in ran.err and ran.code == 0, ran.err
