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


def run_without_a_terminal(
    tmp: Path, answers: list[dict[str, Any]], *args: str, env: dict[str, str] | None = None
) -> Ran:
    """`agentd run --provider scripted` on `answers` with no controlling terminal (nobody to ask); `env`
    adds to the environment."""
    ws, scenario = tmp / "ws", tmp / "scenario.json"
    ws.mkdir(parents=True, exist_ok=True)
    scenario.write_text(json.dumps({"answers": answers}))
    argv = [sys.executable, "-m", "agentd", "run", "--provider", "scripted", "--scenario", str(scenario),
            "--data-dir", str(tmp / "data"), "--prompt", "go", *args]  # fmt: skip
    done = subprocess.run(argv, cwd=ws, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          start_new_session=True, timeout=120, env={**os.environ, **(env or {})})  # fmt: skip
    return Ran("", done.stdout, done.stderr, done.returncode)


def test_a_command_shows_that_it_runs_and_what_it_printed(tmp_path: Path) -> None:
    """new-user R3: `agentd run --yes` showed nothing while a command ran and never its output; it now says
    `[Running] <command>` when it starts and prints its output, bounded, as `agentd demo` does."""
    many = "; ".join(f"echo line{i}" for i in range(60))
    answers = [call("run_command", command="echo hello; echo bye"), call("run_command", command=many), DONE]
    ran = run_without_a_terminal(tmp_path, answers, "--yes")
    assert ran.code == 0, ran.err
    err = ran.err.splitlines()
    first = err.index("[Running] Run `echo hello; echo bye`")
    assert err[first + 1 : first + 6] == [
        "[Output]", "  | hello", "  | bye", "  | [exit code 0]", "[Tool] Run `echo hello; echo bye` -> completed"
    ]  # fmt: skip
    second = err.index("[Output]", first + 2)
    assert err[second + 1 : second + 42] == [f"  | line{i}" for i in range(40)] + ["  | ... (21 more lines)"]
    assert "line0" not in ran.out  # stdout keeps the assistant's text only


def test_the_plan_is_a_checklist_not_json(tmp_path: Path) -> None:
    """new-user R7: `agentd run` printed the plan as raw JSON (`{"todos":[...]}`); it now prints the
    `[Plan]` checklist of `agentd demo` (one renderer, agentd.terminal.Printer)."""
    todos = [{"content": "Read README", "status": "done"}, {"content": "Fix it", "status": "in_progress"},
             {"content": "Test it", "status": "pending"}]  # fmt: skip
    ran = run_without_a_terminal(tmp_path, [call("todo_write", todos=todos), DONE])
    assert ran.code == 0 and '{"todos"' not in ran.err, ran.err
    err = ran.err.splitlines()
    at = err.index("[Tool] Update todos (3 items) -> completed")
    assert err[at + 1 : at + 5] == ["[Plan]", "  [x] Read README", "  [~] Fix it", "  [ ] Test it"]


WEATHER = '''
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("weather")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def forecast(city: str) -> str:
    """Tomorrow's weather."""
    return "sunny"


@server.tool()
def subscribe(city: str) -> str:
    """Mail the forecast every day (not marked read-only)."""
    return "subscribed"


server.run("stdio")
'''


def test_a_refused_read_only_mcp_call_is_no_refused_write(tmp_path: Path) -> None:
    """new-user R7: a read-only MCP call (`readOnlyHint`) refused for lack of a terminal was counted as a
    write (`every write of this turn was refused (mcp__weather__forecast)`, exit 9). Exit 9 counts actions
    (PROTOCOL.md §3.1): a read-only call is none; a tool not marked read-only is one, called an action,
    not a write."""
    server = tmp_path / "weather.py"
    server.write_text(WEATHER)
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.toml").write_text(
        f"[mcp.servers.weather]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(server))}]\n"
        "sandbox = false\n"
    )
    env = {"AGENTD_CONFIG_DIR": str(cfg)}
    read = run_without_a_terminal(
        tmp_path / "r", [call("mcp__weather__forecast", city="Oslo"), DONE], env=env
    )
    act = run_without_a_terminal(
        tmp_path / "a", [call("mcp__weather__subscribe", city="Oslo"), DONE], env=env
    )
    assert read.code == 0, read.err
    assert read.err.splitlines()[-1] == (
        "agentd: no terminal to ask, so 1 read-only tool call of this turn was refused "
        "(mcp__weather__forecast); rerun with --yes or --allow TOOL (e.g. --allow mcp__weather__forecast)"
    )
    assert act.code == 9, act.err
    assert act.err.splitlines()[-1] == (
        "agentd: no terminal to ask, so every action of this turn was refused (mcp__weather__subscribe); "
        "rerun with --yes or --allow TOOL (e.g. --allow mcp__weather__subscribe)"
    )
