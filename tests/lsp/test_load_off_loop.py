"""`agentd/session/load` opens the session in a worker thread (issue 16 §1, agentd.core.factory.built_off_loop),
and the rules of a load on the loop still hold: `$/cancelRequest` while the thread opens the store answers
-32800 and leaves the session unlocked (a later load works); a client that goes away meanwhile leaves no
holder record behind; two loads of one id at once end in one loaded session, never two.

The failpoint `session.build=gate@2` holds the second session build (the load; the first is the
`agentd/session/new` that made the session) in its worker thread until the test has acted."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import IO, Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from agentd.persistence.lock import holder, read_lock_info
from agentd.testing.emulator import Emulator
from tests.lsp.harness import Agentd, daemon_env

CLIENT = "neovim"
WAIT_S = 20.0


async def _reached(gate: Path) -> IO[bytes]:
    """Open the gate FIFO for writing: returns once the daemon's worker thread waits at the failpoint."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(open, gate, "wb"), WAIT_S)
    except TimeoutError:
        fd = os.open(gate, os.O_RDONLY | os.O_NONBLOCK)  # frees our blocked open(), then fail
        os.close(fd)
        raise AssertionError("the daemon never reached the session.build failpoint") from None


async def _stored(d: Agentd, workspace: Path) -> str:
    """A session created, then closed (unlocked)."""
    sid = await d.new(workspace)
    await d.request("agentd/session/close", {"sessionId": sid})
    return sid


def _gated_env(tmp_path: Path, data_dir: Path, url: str) -> tuple[dict[str, str], Path]:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = daemon_env(data_dir, url, AGENTD_FAILPOINTS="session.build=gate@2", AGENTD_FAILPOINT_GATE=str(gate))
    return env, gate


async def test_a_load_cancelled_while_its_thread_opens_the_store_leaves_it_unlocked(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path, daemons: Any
) -> None:
    """Issue 16 §1: `$/cancelRequest` reaches the load while the worker thread holds the session open; the
    answer is -32800 only once the thread's session is closed, the lock has no holder, the session is not
    loaded, and the next load of the same id succeeds."""
    env, gate = _gated_env(tmp_path, data_dir, emulator.url)
    d = await daemons(CLIENT, env, [workspace])
    sid = await _stored(d, workspace)
    params = {"sessionId": sid, "cwd": str(workspace)}
    load = asyncio.wrap_future(d.client.protocol.send_request("agentd/session/load", params, msg_id="load-1"))
    writer = await _reached(gate)
    try:
        d.notify("$/cancelRequest", types.CancelParams(id="load-1"))
        await d.request("agentd/session/list", {})  # answered after the cancel: the loop has handled it
        assert not load.done()  # the answer waits for the thread
    finally:
        writer.close()
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(load, WAIT_S)
    assert info.value.code == -32800
    assert holder(data_dir / "sessions" / sid / "lock") is None
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    assert (await d.error("agentd/session/prompt", prompt))["data"]["name"] == "SessionNotLoaded"
    assert "modes" in await d.request("agentd/session/load", params)


async def test_a_client_gone_while_the_thread_opens_the_store_leaves_no_holder(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path, daemons: Any
) -> None:
    """Issue 16 §1: the editor's stdin closes while the load's worker thread holds the session open; the
    daemon exits 0 and the lock file names no holder (the session was closed, not left to the kernel), so
    the next daemon loads the session without taking a stale lock over."""
    env, gate = _gated_env(tmp_path, data_dir, emulator.url)
    d = await daemons(CLIENT, env, [workspace])
    sid = await _stored(d, workspace)
    params = {"sessionId": sid, "cwd": str(workspace)}
    load = asyncio.wrap_future(d.client.protocol.send_request("agentd/session/load", params, msg_id="load-1"))
    writer = await _reached(gate)
    server = d.client._server
    try:
        assert server is not None and server.stdin is not None
        server.stdin.close()
    finally:
        writer.close()
    assert await asyncio.wait_for(server.wait(), WAIT_S) == 0
    with contextlib.suppress(Exception):
        await asyncio.wait_for(load, 1)
    assert read_lock_info(data_dir / "sessions" / sid / "lock") is None
    again = await daemons(CLIENT, daemon_env(data_dir, emulator.url), [workspace])
    assert "modes" in await again.request("agentd/session/load", params)


async def test_two_loads_of_one_session_at_once_give_one_live_session(
    emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    """Issue 16 §1: two `agentd/session/load` of one id sent together (their worker threads race for the
    lock): one loads it; the other is SessionLocked or finds it loaded; closing it once unlocks it."""
    d = await daemons(CLIENT, daemon_env(data_dir, emulator.url), [workspace])
    sid = await _stored(d, workspace)
    params = {"sessionId": sid, "cwd": str(workspace)}

    async def load() -> dict[str, Any]:
        try:
            return {"result": await d.request("agentd/session/load", params)}
        except JsonRpcException as exc:
            return {"error": exc.data}

    outcomes = await asyncio.gather(load(), load())
    assert any("result" in o for o in outcomes), outcomes
    for o in outcomes:
        assert "result" in o or (o["error"]["name"], o["error"]["sameProcess"]) == ("SessionLocked", True), o
    await d.request("agentd/session/close", {"sessionId": sid})
    assert holder(data_dir / "sessions" / sid / "lock") is None
