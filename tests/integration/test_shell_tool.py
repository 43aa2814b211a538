"""run_command with real processes (TESTING.md §4.5 B10 cleanup, §4.6 child environment; CONTRACTS.md §11).

No sleeps: waits are polls with a deadline whose failure names what was awaited.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentd.tools import shell
from agentd.tools.base import Preview, ToolContext, ToolOutput, validate_input
from agentd.tools.shell import OutputCapture, RunCommand
from agentd.tools.workspace import RootChanged

CANARY = "sk-ant-emu-0123456789abcdef0123456789abcdef"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(root=ws, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


async def run(command: str, ctx: ToolContext, **extra: object) -> ToolOutput:
    args, err = validate_input(RunCommand(), {"command": command, **extra})
    assert err is None
    return await RunCommand().run(args, ctx)


async def poll_until(pred: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        tick = loop.create_future()
        loop.call_later(0.02, tick.set_result, None)
        await tick


PGID = "$(ps -o pgid= -p $$ | tr -d ' ')"  # the command's process group (its leader is the helper, not $$)


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_exit_zero_and_merged_output(ctx: ToolContext) -> None:
    out = await run("echo out; echo err >&2", ctx)
    assert out == ToolOutput(
        content="out\nerr\n[exit code 0]",
        title="Run `echo out; echo err >&2`",
        raw_output={"exitCode": 0, "bytes": 8, "timedOut": False, "truncated": False},
    )


async def test_nonzero_exit_is_an_error(ctx: ToolContext) -> None:
    out = await run("printf 'no newline'; exit 3", ctx)
    assert (out.content, out.is_error, out.raw_output) == (
        "no newline\n[exit code 3]",
        True,
        {"exitCode": 3, "bytes": 10, "timedOut": False, "truncated": False},
    )


async def test_killed_by_signal(ctx: ToolContext) -> None:
    out = await run("kill -9 $$", ctx)
    assert (out.content, out.is_error) == ("[killed by signal SIGKILL]", True)


async def test_cwd_is_the_workspace_and_stdin_is_empty(ws: Path, ctx: ToolContext) -> None:
    out = await run("pwd; cat; echo done", ctx)
    assert out.content == f"{os.path.realpath(ws)}\ndone\n[exit code 0]"


async def test_output_head_and_tail_with_exact_marker(ws: Path) -> None:
    ctx = ToolContext(root=ws, output_max_bytes=20)
    out = await run("printf 0123456789abcdefghijklmnopqrstuvwxyz", ctx)
    assert out == ToolOutput(
        content="0123456789\n[... 16 of 36 bytes omitted ...]\nqrstuvwxyz\n[exit code 0]",
        title="Run `printf 0123456789abcdefghijklmnopqrstuvwxyz`",
        raw_output={"exitCode": 0, "bytes": 36, "timedOut": False, "truncated": True},
    )


def test_capture_cuts_on_utf8_boundaries() -> None:
    cap = OutputCapture(8)
    for chunk in (b"ab\xc3\xa9", b"\xc3\xa9xyz", b"\xc3\xa9\xc3\xa9!"):  # abé + éxyz + éé!
        cap.feed(chunk)
    assert (cap.total, cap.truncated) == (14, True)
    assert cap.render() == "abé\n[... 7 of 14 bytes omitted ...]\né!"


async def test_timeout_kills_the_whole_group(ctx: ToolContext) -> None:
    out = await run(f"echo pgid={PGID}; sleep 1000 & sleep 1000", ctx, timeout_s=1)
    match = re.fullmatch(r"pgid=(\d+)\n\[timed out after 1 s; process group killed\]", out.content)
    assert match is not None, out.content
    assert (out.is_error, out.raw_output and out.raw_output["timedOut"]) == (True, True)
    pgid = int(match.group(1))
    await poll_until(lambda: group_gone(pgid), f"process group {pgid} to disappear")


async def test_timeout_is_capped_by_the_config(ws: Path) -> None:
    ctx = ToolContext(root=ws, run_timeout_s=1)
    out = await run("sleep 1000", ctx, timeout_s=500)
    assert (out.content, out.is_error) == ("[timed out after 1 s; process group killed]", True)


async def test_background_job_does_not_outlive_the_command(ctx: ToolContext) -> None:
    out = await run(f"sleep 1000 & echo {PGID}", ctx)
    match = re.fullmatch(r"(\d+)\n\[exit code 0\]", out.content)
    assert match is not None, out.content
    pgid = int(match.group(1))
    await poll_until(lambda: group_gone(pgid), f"process group {pgid} to disappear")


async def test_cancellation_kills_the_group(ws: Path, ctx: ToolContext) -> None:
    pid_file = ws / "pid"
    task = asyncio.create_task(run(f"echo {PGID} > pid.tmp && mv pid.tmp pid; sleep 1000 & sleep 1000", ctx))
    await poll_until(pid_file.exists, "the command to write its pid")
    pgid = int(pid_file.read_text())
    assert group_gone(pgid) is False
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await poll_until(lambda: group_gone(pgid), f"process group {pgid} to disappear after cancel")


async def test_child_env_lacks_provider_keys(ws: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ANTHROPIC_API_KEY": CANARY,
        "ANTHROPIC_AUTH_TOKEN": CANARY,
        "OPENAI_API_KEY": CANARY,
        "MY_PROVIDER_KEY": CANARY,
        "KEEP_ME": "yes",
    }
    ctx = ToolContext(root=ws, env=env, state={"api_key_env": "MY_PROVIDER_KEY"})
    out = await run("env", ctx)
    lines = out.content.split("\n")
    names = {line.split("=", 1)[0] for line in lines[:-1]}
    assert names & {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "MY_PROVIDER_KEY"} == set()
    assert ("KEEP_ME=yes" in lines, lines[-1], out.content.count(CANARY[:16])) == (True, "[exit code 0]", 0)


async def test_preview_and_start_failure(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = RunCommand()
    args, _ = validate_input(tool, {"command": "make test"})
    assert await tool.preview(args, ToolContext(root=ws)) == Preview(
        summary=f"Run `make test` in {ws}", command="make test", cwd=str(ws)
    )
    monkeypatch.setattr(shell, "shell_path", lambda: "/nonexistent/bash")
    out = await tool.run(args, ToolContext(root=ws))
    assert out == ToolOutput(
        content="run_command could not start: [Errno 2] No such file or directory: '/nonexistent/bash'",
        is_error=True,
        title="Run `make test`",
    )


async def test_a_workspace_root_that_is_gone_is_refused_before_running(ws: Path) -> None:
    """H18: the root was deleted (or replaced) since the session pinned it: run_command refuses in check()
    and again in run(), instead of running somewhere else."""
    tool = RunCommand()
    args, _ = validate_input(tool, {"command": "touch x"})
    ctx = ToolContext(root=ws)
    moved = ws.with_name("moved")
    ws.rename(moved)
    with pytest.raises(RootChanged) as refused:
        tool.check(args, ctx)
    assert refused.value.text().startswith(f"Refused: the workspace root {ws} is no longer the directory")
    with pytest.raises(RootChanged):
        await tool.run(args, ctx)
    assert not (moved / "x").exists() and not ws.exists()


@given(chunks=st.lists(st.binary(max_size=40), max_size=12), limit=st.integers(min_value=1, max_value=64))
def test_property_capture_keeps_head_and_tail(chunks: list[bytes], limit: int) -> None:
    cap = OutputCapture(limit)
    for chunk in chunks:
        cap.feed(chunk)
    data = b"".join(chunks)
    text = cap.render()
    if len(data) <= limit:
        assert (text, cap.truncated) == (data.decode("utf-8", "replace"), False)
    else:
        head, _, rest = text.partition("\n[... ")
        counts, _, tail = rest.partition(" bytes omitted ...]\n")
        omitted, total = (int(n) for n in counts.split(" of "))
        head_b = data[: limit // 2]
        tail_b = data[len(data) - (limit - limit // 2) :]
        assert (total, cap.truncated) == (len(data), True)
        assert len(head_b) + len(tail_b) - 6 <= len(data) - omitted <= len(head_b) + len(tail_b)
        assert (
            head_b.decode("utf-8", "replace").startswith(head),
            tail_b.decode("utf-8", "replace").endswith(tail),
        ) == (True, True)


async def test_descendants_that_leave_the_group_are_killed_too(tmp_path) -> None:
    """Review finding: `setsid` / `set -m` children escaped the group kill on timeout."""
    import asyncio as _asyncio
    import os as _os

    from agentd.tools.base import ToolContext
    from agentd.tools.shell import RunCommand

    pidfile = tmp_path / "pids"
    ctx = ToolContext(root=tmp_path, run_timeout_s=1.0, env=dict(_os.environ))
    tool = RunCommand()
    cmd = f"setsid sleep 1009 & echo $! >> {pidfile}; set -m; sleep 1004 & echo $! >> {pidfile}; sleep 100"
    out = await tool.run(tool.Input.model_validate({"command": cmd}), ctx)
    pids = [int(x) for x in pidfile.read_text().split()]

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split()[2] != "Z"
        except OSError:
            return False

    loop = _asyncio.get_running_loop()
    deadline = loop.time() + 10
    while any(alive(p) for p in pids) and loop.time() < deadline:
        await _asyncio.sleep(0)
    assert (out.is_error, len(pids), [p for p in pids if alive(p)]) == (True, 2, [])


async def test_run_command_lists_files_with_unsaved_agentd_edits(tmp_path) -> None:
    """CONTRACTS §11: a command reads the disk, so the model is told which editor edits are not saved."""
    import os as _os

    from agentd.tools.base import ToolContext
    from agentd.tools.shell import RunCommand

    class Editor:
        async def apply_edit(self, *a, **k):  # pragma: no cover - not used here
            return None

        def unsaved_paths(self) -> list[str]:
            return [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]

    ctx = ToolContext(root=tmp_path, env=dict(_os.environ), editor=Editor())
    tool = RunCommand()
    out = await tool.run(tool.Input.model_validate({"command": "echo hi"}), ctx)
    assert (
        out.content
        == f"hi\n[exit code 0]\n[not saved to disk yet: {tmp_path / 'a.txt'}, {tmp_path / 'b.txt'}]"
    )
