"""Fixtures of the acp tier (TESTING.md §1.4): `daemons` starts LSP daemons too, for the tests that carry a
session from the ACP adapter to the LSP adapter."""

from __future__ import annotations

from typing import Any

import pytest

from tests.lsp.harness import Agentd, start_agentd


@pytest.fixture
async def daemons() -> Any:
    """Start LSP daemons with `await daemons(...)`; every one still running is shut down at teardown."""
    started: list[Agentd] = []

    async def start(*args: Any, **kwargs: Any) -> Agentd:
        d = await start_agentd(*args, **kwargs)
        started.append(d)
        return d

    yield start
    for d in started:
        server = d.client._server
        if server is not None and server.returncode is None:
            try:
                await d.stop()
            except Exception:
                server.kill()
                await server.wait()
