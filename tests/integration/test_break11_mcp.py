"""MCP servers that misbehave (issue 11, break11): one that never answers at start, one whose result is
larger than agentd accepts, one whose error text must reach the model."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import pytest

from agentd.mcp.connection import ServerSpec
from agentd.mcp.manager import MCPManager

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
