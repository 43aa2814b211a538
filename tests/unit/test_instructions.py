"""Project instructions (issue 11): which AGENTS.md / CLAUDE.md files are read and in what order, the
32 KiB cap and its note, safe reads (FIFO, links out), the stored record, and the notes that deliver the
files of deeper folders on tool results. Whole texts are compared."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentd.config import load_settings
from agentd.core.instructions import (
    HEADER,
    INSTRUCTIONS_MAX_BYTES,
    Instructions,
    Loaded,
    NestedInstructions,
    latest_record,
    load,
    project_root,
)
from agentd.errors import ConfigError
from agentd.safe_read import UnsafeFile, read_regular
from agentd.tools.base import ToolOutput


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """repo/.git; AGENTS.md at the root; pkg has only CLAUDE.md; pkg/api has both (AGENTS.md wins)."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    put(root / "AGENTS.md", "Root rules.\n")
    put(root / "pkg" / "CLAUDE.md", "Pkg rules (CLAUDE.md).\r\n")
    put(root / "pkg" / "api" / "AGENTS.md", "\ufeffApi rules.\n")
    put(root / "pkg" / "api" / "CLAUDE.md", "never read\n")
    return root


def test_files_from_the_user_then_the_project_root_down(repo: Path, tmp_path: Path) -> None:
    user = tmp_path / "config" / "agentd"
    put(user / "AGENTS.md", "User rules.\n")
    ws = repo / "pkg" / "api"
    got = load(ws, user)
    assert got.text == "\n\n".join(
        [
            HEADER,
            f"## {user / 'AGENTS.md'}\n\nUser rules.",
            f"## {repo / 'AGENTS.md'}\n\nRoot rules.",
            f"## {repo / 'pkg' / 'CLAUDE.md'}\n\nPkg rules (CLAUDE.md).",
            "## AGENTS.md\n\nApi rules.",
        ]
    )
    assert got.files == (
        Loaded(str(user / "AGENTS.md"), 12, 12),
        Loaded(str(repo / "AGENTS.md"), 12, 12),
        Loaded(str(repo / "pkg" / "CLAUDE.md"), 24, 24),
        Loaded("AGENTS.md", 14, 14),
    )
    assert project_root(ws) == repo
    assert load(tmp_path / "nothing-here", None) == Instructions()


def test_a_100_kib_file_is_cut_at_32_kib_with_a_note(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    put(ws / "AGENTS.md", "x" * 102400)
    put(ws / "sub" / "AGENTS.md", "deeper\n")
    got = load(ws / "sub", None)
    assert got.files == (Loaded(str(ws / "AGENTS.md"), 102400, 32768),)
    assert got.text == "\n\n".join(
        [
            HEADER,
            f"## {ws / 'AGENTS.md'}\n\n" + "x" * INSTRUCTIONS_MAX_BYTES,
            f"[... {ws / 'AGENTS.md'} was cut: 32768 of its 102400 bytes loaded; instructions are capped at"
            " 32768 bytes ...]",
            "[... not loaded, over the 32768-byte cap: AGENTS.md ...]",
        ]
    )
    assert got.summary() == f"{ws / 'AGENTS.md'} (cut at 32768 of 102400 bytes)"


def test_unsafe_files_are_skipped_without_blocking(tmp_path: Path) -> None:
    """A FIFO never blocks the session start; a link out of the project is not followed; a link that stays
    inside is (AGENTS.md -> CLAUDE.md is common)."""
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    os.mkfifo(ws / "AGENTS.md")
    put(ws / "CLAUDE.md", "fallback\n")
    assert [f.path for f in load(ws, None).files] == ["CLAUDE.md"]
    outside = put(tmp_path / "outside.md", "secret\n")
    sub = ws / "sub"
    sub.mkdir()
    (sub / "AGENTS.md").symlink_to(outside)
    assert [f.path for f in load(sub, None).files] == [str(ws / "CLAUDE.md")]
    (sub / "AGENTS.md").unlink()
    (sub / "AGENTS.md").symlink_to(ws / "CLAUDE.md")
    assert load(sub, None).text.endswith("## AGENTS.md\n\nfallback")
    with pytest.raises(UnsafeFile) as err:
        read_regular(ws / "AGENTS.md", 10)
    assert err.value.strerror == "not a regular file (a FIFO, device or socket)"
    with pytest.raises(UnsafeFile):
        read_regular(sub / "AGENTS.md", 10, root=sub)  # its target is outside that root
    assert read_regular(ws / "CLAUDE.md", 4, root=ws) == (b"fall", 9)


def test_config_files_are_read_safely(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO as the user's config.toml is a clear error, not a hang; a workspace config linked out of it is
    not read."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    monkeypatch.setenv("AGENTD_CONFIG_DIR", str(cfg))
    os.mkfifo(cfg / "config.toml")
    with pytest.raises(ConfigError) as err:
        load_settings(None)
    assert (
        str(err.value)
        == f"{cfg / 'config.toml'}: not a regular file (a FIFO, device or socket); make it a regular file or remove it"
    )
    (cfg / "config.toml").unlink()
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").symlink_to(put(tmp_path / "elsewhere.toml", "model = 'x'\n"))
    warnings: list[str] = []
    assert load_settings(ws, warnings=warnings).model is None  # not read: a warning (issue 12 §5)
    assert any("a link leading out of the workspace" in w for w in warnings), warnings


def test_record_round_trip_and_latest() -> None:
    a = Instructions((Loaded("AGENTS.md", 10, 10),), "text a")
    b = Instructions((), "")
    assert Instructions.from_record(a.record()) == a
    assert a.record() == {"files": [{"path": "AGENTS.md", "bytes": 10, "loadedBytes": 10}], "text": "text a"}
    meta = {"kind": "meta", "cwd": "/w", "instructions": a.record()}
    assert latest_record([meta, {"kind": "prompt"}]) == a
    assert latest_record([meta, {"kind": "instructions", **b.record()}]) == b
    assert latest_record([{"kind": "meta", "cwd": "/w"}]) is None


def result(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": text}]}


def test_nested_files_are_delivered_once_as_notes(tmp_path: Path) -> None:
    """Folders below the workspace root: their AGENTS.md comes with the first tool result that touches
    them, never twice while the note is in the history, again after compaction removed it."""
    ws = tmp_path / "ws"
    put(ws / "AGENTS.md", "root, in the system prompt\n")
    put(ws / "src" / "AGENTS.md", "src rules\n")
    put(ws / "src" / "api" / "CLAUDE.md", "api rules\n")
    app = put(ws / "src" / "api" / "app.py", "x\n")
    history: list[dict[str, Any]] = []
    nested = NestedInstructions(ws, lambda: history)
    out = ToolOutput(content="     1\tx", locations=[{"path": str(app), "line": 1}])
    assert nested.after_tool("read_file", out) == "loaded src/AGENTS.md, src/api/CLAUDE.md"
    assert out.content == (
        "     1\tx"
        "\n\n[Project instructions from src/AGENTS.md; they apply to work under src/]\nsrc rules"
        "\n\n[Project instructions from src/api/CLAUDE.md; they apply to work under src/api/]\napi rules"
    )
    history.append(result(out.content))
    again = ToolOutput(content="ok", locations=[{"path": str(ws / "src" / "api")}])
    assert (nested.after_tool("list_dir", again), again.content) == (None, "ok")
    history.clear()  # compaction replaced the message that held the notes
    again = ToolOutput(content="ok", locations=[{"path": str(ws / "src" / "x.py")}])
    assert nested.after_tool("read_file", again) == "loaded src/AGENTS.md"
    root_only = ToolOutput(content="ok", locations=[{"path": str(ws / "README.md")}])
    assert nested.after_tool("read_file", root_only) is None
