"""ACP's `session/load` opens the session in a worker thread (issue 16 §1, agentd.core.factory.built_off_loop):
a client that goes away while the thread holds the session open leaves no holder record behind, and two loads
of one id at once end in one loaded session and one SessionLocked, never two.

The failpoint `session.build=gate` holds the load's worker thread until the test has acted."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from acp import RequestError

from agentd.persistence.lock import read_lock_info
from agentd.testing.emulator import Emulator
from tests.acp.harness import agent_env, start

WAIT_S = 20.0


async def _stored(data_dir: Path, url: str, workspace: Path, tmp_path: Path) -> str:
    """A session created by one agent process, which then ends (the session unlocked)."""
    a = await start(agent_env(data_dir, url), tmp_path / "first.err")
    sid = await a.new(workspace)
    assert await a.close() == 0
    return sid


async def test_a_client_gone_while_the_load_thread_opens_the_store_leaves_no_holder(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """Issue 16 §1: end of input while `session/load`'s worker thread holds the session open: the agent exits
    0 and the lock file names no holder (the session was closed, not left to the kernel)."""
    sid = await _stored(data_dir, emulator.url, workspace, tmp_path)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = agent_env(data_dir, emulator.url, AGENTD_FAILPOINTS="session.build=gate",
                    AGENTD_FAILPOINT_GATE=str(gate))  # fmt: skip
    a = await start(env, tmp_path / "agent.err")
    load = asyncio.ensure_future(a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))
    try:
        writer = await asyncio.wait_for(asyncio.to_thread(open, gate, "wb"), WAIT_S)
    except TimeoutError:
        os.close(os.open(gate, os.O_RDONLY | os.O_NONBLOCK))  # frees our blocked open()
        raise AssertionError("the agent never reached the session.build failpoint") from None
    try:
        assert a.proc.stdin is not None
        a.proc.stdin.close()
    finally:
        writer.close()
    assert await asyncio.wait_for(a.proc.wait(), WAIT_S) == 0
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(load, 1)
    await a.conn.close()
    assert read_lock_info(data_dir / "sessions" / sid / "lock") is None
    assert "Traceback" not in (tmp_path / "agent.err").read_text(encoding="utf-8", errors="replace")


async def test_two_loads_of_one_session_at_once_give_one_session_and_one_session_locked(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """Issue 16 §1: two `session/load` of one id sent together: one loads it, the other is SessionLocked or
    finds it loaded; never two live sessions."""
    sid = await _stored(data_dir, emulator.url, workspace, tmp_path)
    a = await start(agent_env(data_dir, emulator.url), tmp_path / "agent.err")

    async def load() -> str:
        try:
            await a.call(a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))
        except RequestError as exc:
            return str((exc.data or {}).get("name"))
        return "loaded"

    outcomes = await asyncio.gather(load(), load())
    assert "loaded" in outcomes and set(outcomes) <= {"loaded", "SessionLocked"}, outcomes
    assert await a.close() == 0
    assert read_lock_info(data_dir / "sessions" / sid / "lock") is None
