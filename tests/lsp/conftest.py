"""Fixtures of the protocol tier (TESTING.md §1.4); the client and recorder live in `harness.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.lsp.harness import CLIENTS, Agentd, start_agentd


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning"))


@pytest.fixture(params=sorted(CLIENTS))
def client_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
async def daemons() -> Any:
    """Start daemons with `await daemons(...)`; every one still running is shut down at teardown."""
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
