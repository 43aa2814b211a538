"""grep, glob and nested AGENTS.md see what git would show, whatever lies above the workspace (issue 11,
break11)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentd.tools.base import ToolContext
from agentd.tools.search import Glob, Grep
from agentd.tools.walk import visible_files
from tests.integration.test_search_tools import call

pytestmark = pytest.mark.integration


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "proj" / "src").mkdir(parents=True)
    (home / ".gitignore").write_text("*\n!*/\n")  # a dotfiles setup: everything ignored but folders
    (home / "proj" / "src" / "main.py").write_text("needle\n")
    (home / "proj" / "src" / "AGENTS.md").write_text("rules\n")
    (home / "proj" / ".gitignore").write_text("build/\n")
    (home / "proj" / "build").mkdir()
    (home / "proj" / "build" / "out.py").write_text("needle\n")
    return home / "proj"


@pytest.mark.parametrize("repo", [False, True])
async def test_a_gitignore_above_the_workspace_hides_nothing(tmp_path: Path, repo: bool) -> None:
    """break11 (finding 4): `~/.gitignore` with `*` and `!*/` hid every file from grep and glob (rg read
    every parent's .gitignore up to /). Now only the workspace's own ignore files apply (in a git
    repository: the repository's, as git does), and the workspace's own .gitignore still does."""
    ws = _home(tmp_path)
    if repo:
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
    ctx = ToolContext(root=ws)
    out = await call(Grep(), {"pattern": "needle"}, ctx)
    assert "src/main.py" in out.content and "build/out.py" not in out.content
    out = await call(Glob(), {"pattern": "**/*.py"}, ctx)
    assert "src/main.py" in out.content and "build" not in out.content
    assert visible_files(ws, ["AGENTS.md"]) == {"src/AGENTS.md"}
