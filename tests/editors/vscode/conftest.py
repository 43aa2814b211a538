"""Fixtures of the VS Code UI tier (TESTING.md §1.6): a real project, code-server with the built VSIX, a
Chromium page on it. The marker `vscode` and the opt-in skip come from tests/conftest.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator
from tests.editors.vscode.harness import (
    CODE_SERVER,
    VSIX,
    CodeServer,
    E2ELog,
    browser_page,
    editor_env,
    pid_alive,
    poll,
    require,
    unpack_real_project,
)


@dataclass
class Editor:
    """One code-server window on `workspace`, its browser page, the extension's e2e log and the model."""

    page: Any
    server: CodeServer
    log: E2ELog
    emulator: Emulator
    workspace: Path
    data_dir: Path


@pytest.fixture
def real_project(tmp_path: Path) -> Path:
    return unpack_real_project(tmp_path / "project")


@pytest.fixture
def editor(tmp_path: Path, emulator: Emulator, real_project: Path) -> Iterator[Editor]:
    require(VSIX.is_file(), f"{VSIX} is not built")
    require(CODE_SERVER.exists(), "code-server is not installed in editor-clients/vscode/e2e")
    require(shutil.which("chromium") is not None, "Debian's chromium is not installed")
    pytest.importorskip("playwright", reason="playwright is not installed")
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    log = E2ELog(tmp_path / "e2e.jsonl")
    env = editor_env(tmp_path / "cs", emulator.url, data_dir, log.path)
    server = CodeServer(tmp_path / "cs", real_project, env)
    server.prepare()
    server.install()
    server.start()
    try:
        with browser_page(server.url) as page:
            yield Editor(page, server, log, emulator, real_project, data_dir)
    finally:
        server.stop()
    pids = log.server_pids()
    poll(lambda: not any(pid_alive(p) for p in pids), 10, f"agentd processes {pids} to exit")
