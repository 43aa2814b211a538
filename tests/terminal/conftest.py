"""Fixtures of the terminal tier (TESTING.md §1): the interactive client as a person meets it, `agentd` on a
real pseudo-terminal against the Messages-API emulator, its screen drawn by a terminal emulator (pyte)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.terminal.screen import Terminal

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "shop"
    ws.mkdir()
    (ws / "CHANGELOG.md").write_text("# Changelog\n\n## 0.3.0\n- First release.\n", encoding="utf-8")
    return ws


@pytest.fixture
def term_env(tmp_path: Path, emulator: object) -> dict[str, str]:
    """A private HOME, config and data dir; the emulator as the Anthropic endpoint; a colour terminal."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "AGENTD_"))}
    env.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"), "AGENTD_DATA_DIR": str(tmp_path / "data"),
        "ANTHROPIC_BASE_URL": emulator.url, "ANTHROPIC_API_KEY": "sk-ant-emu-" + secrets.token_hex(8),  # type: ignore[attr-defined]
        "TERM": "xterm-256color", "COLORTERM": "truecolor", "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8",
    })  # fmt: skip
    return env


@pytest.fixture
def terminals() -> Iterator[Callable[..., Terminal]]:
    """Open `agentd ARGS` on a new pseudo-terminal with `open(args, env, cwd)`; all are closed at teardown."""
    opened: list[Terminal] = []

    def open_terminal(args: list[str], env: dict[str, str], cwd: Path, **size: int) -> Terminal:
        t = Terminal([sys.executable, "-m", "agentd", *args], env, str(cwd), **size)
        opened.append(t)
        return t

    yield open_terminal
    for t in opened:
        t.close()
