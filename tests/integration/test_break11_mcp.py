"""MCP servers that misbehave (issue 11, break11): one that never answers at start, one whose result is
larger than agentd accepts, one whose error text must reach the model."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from mcp.shared.exceptions import MCPError

from agentd.mcp.bounded import Oversize
from agentd.mcp.connection import MCPConnection, ServerSpec, server_error
from agentd.mcp.manager import MCPManager
from agentd.mcp.tools import MCPArgs, MCPTool
from agentd.tools.base import ToolContext
from tests.lsp.harness import wait_until

HUNG = (
    "import sys, time; sys.stderr.write('hung: waiting for the index lock\\n'); sys.stderr.flush();"
    " time.sleep(120)"
)


async def test_a_server_that_never_answers_costs_start_at_most_the_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """break11, finding 6: a server that did not answer within the start timeout held session start
    ~15 s (the stop after the timeout waited 10 s, then the SDK's own shutdown) and printed "Future
    exception was never retrieved". Servers start together, a failed start is abandoned at the timeout
    (it cleans up in the background and is awaited when the session closes), the warning names the server
    and its stderr tail, and nothing reaches stderr."""
    specs = [ServerSpec(name=f"hung{i}", command=sys.executable, args=("-c", HUNG)) for i in range(3)]
    manager = MCPManager(specs, tmp_path, start_timeout_s=2.0, default_timeout_s=5.0)
    began = time.monotonic()
    warnings = await manager.start()
    elapsed = time.monotonic() - began
    assert elapsed < 2.0 + 3.0, elapsed  # in series, or waiting for the stop, it was 3 x 2 s or 12 s+
    assert warnings == [
        f"MCP server hung{i} did not start (no answer within 2 s; stderr: hung: waiting for the index lock)"
        for i in range(3)
    ]
    assert [c.state for c in manager.connections] == ["failed"] * 3
    await manager.aclose()  # the abandoned starts finish (their processes are gone)
    assert all(not c._closing for c in manager.connections)
    gc.collect()
    assert not [r for r in caplog.records if r.name == "asyncio"]
    assert "never retrieved" not in capfd.readouterr().err


REPO = Path(__file__).resolve().parents[2]
DEMO = ServerSpec(
    name="demo", command=sys.executable, args=("-m", "tests.mcp_servers.demo"), env={"PYTHONPATH": str(REPO)}
)
LIMIT = 1 << 20


async def _connection(spec: ServerSpec, tmp_path: Path) -> MCPConnection:
    conn = MCPConnection(
        spec, tmp_path, secret_env=frozenset(), start_timeout_s=30.0, max_message_bytes=LIMIT
    )
    await conn.start()
    return conn


async def _too_large_then_usable(conn: MCPConnection, tmp_path: Path, *, partial: bool) -> list[str]:
    """The big call's error, then an echo on the same server: returns the echo's text."""
    tool = MCPTool(conn, NS(name="big", description="", title=None, input_schema={}), 60.0)
    began = time.monotonic()
    out = await tool.run(MCPArgs(raw={"mib": 30}), ToolContext(root=tmp_path))
    assert time.monotonic() - began < 30  # unbounded, the 30 MiB line took minutes: later calls timed out
    size = "more than 1048576 bytes" if partial else "62914783 bytes"
    assert out.is_error and out.content.startswith(
        f"mcp__demo__big failed: the MCP server's answer was larger than agentd accepts ({size}"
    ), out.content
    assert "the limit is 1 MiB, mcp.max_message_bytes); it was dropped. Ask for less" in out.content
    result = await conn.call("echo", {"text": "still here"}, 30.0)
    return [c.text for c in result.content]


async def test_a_result_over_the_limit_is_an_error_and_the_stdio_server_stays_usable(tmp_path: Path) -> None:
    """break11, finding 2: one 30 MiB result made the server's later calls time out (no bound while
    receiving; the SDK joined the line chunk by chunk). What agentd accepts per message is bounded
    (`mcp.max_message_bytes`): the bytes past it are dropped as they arrive, the call is an is_error result
    naming the limit, and the next call on the same server works."""
    conn = await _connection(DEMO, tmp_path)
    try:
        assert await _too_large_then_usable(conn, tmp_path, partial=False) == ["still here"]
        assert (conn.starts, conn.state) == (1, "running")  # the same server, not restarted
    finally:
        await conn.stop()


@pytest.mark.parametrize("json_answers", [False, True], ids=["event-stream", "json"])
async def test_a_result_over_the_limit_over_streamable_http(tmp_path: Path, json_answers: bool) -> None:
    """break11, finding 2: the same bound on Streamable HTTP, for an event-stream answer (per event) and
    a JSON body; the server stays usable."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DEMO_HTTP_PORT": str(port),
        "DEMO_JSON": "1" if json_answers else "",
    }
    proc = subprocess.Popen([sys.executable, "-m", "tests.mcp_servers.demo"], env=env, stderr=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        await wait_until(lambda: _listening(port), "the demo server's HTTP port")
        conn = await _connection(ServerSpec(name="demo", url=f"http://127.0.0.1:{port}/mcp"), tmp_path)
        try:
            assert await _too_large_then_usable(conn, tmp_path, partial=True) == ["still here"]
            assert (conn.starts, conn.state) == (1, "running")  # the same server, not restarted
        finally:
            await conn.stop()
    finally:
        proc.kill()
        proc.wait()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_an_oversize_answer_is_matched_to_its_request() -> None:
    """break11, finding 2: the id of an answer too large to hold is read from the bytes kept at its ends
    (the Python SDK writes it first, the TypeScript SDK last); a server's own request is not an answer."""
    pending: dict[object, None] = {3: None, "a": None}
    first = Oversize(9, b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"id":7', b"xx]}}")
    last = Oversize(9, b'{"result":{"content":[{"id":3', b'xx]},"jsonrpc":"2.0","id":"a"}\n'.strip())
    note = Oversize(9, b'{"jsonrpc":"2.0","method":"notifications/message","params":{', b"}}")
    assert (first.request_id(pending), last.request_id(pending), note.request_id(pending)) == (
        (True, 3), (True, "a"), (False, None))  # fmt: skip
    assert Oversize(9, b"{", b"}").request_id({5: None}) == (True, 5)  # one call waits: it is the answer
    assert Oversize(9, b"{", b"}").request_id(pending) == (True, None)


async def test_the_servers_error_text_reaches_the_model(tmp_path: Path) -> None:
    """break11, finding 7: a JSON-RPC error answer reached the model as its message only (its data was
    lost); the model now gets the message and the data, bounded, control characters escaped."""
    conn = await _connection(DEMO, tmp_path)
    try:
        tool = MCPTool(conn, NS(name="refuse", description="", title=None, input_schema={}), 30.0)
        text = "no \x1b[2J such table: " + "t" * 3000
        out = await tool.run(MCPArgs(raw={"text": text}), ToolContext(root=tmp_path))
    finally:
        await conn.stop()
    assert out.is_error
    assert out.content.startswith(
        "mcp__demo__refuse failed: the server answered with an error (-32602): no \\x1b[2J such table: ttt"
    ), out.content
    assert out.content.endswith("more characters]") and len(out.content) < 2200
    assert server_error(MCPError(-1, "bad\x07", {"reason": "why"})) == (
        'the server answered with an error (-1): bad\\x07; data: {"reason": "why"}'
    )
