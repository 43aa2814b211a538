"""The path-escape table of TESTING.md §4.5 through the registry's tools, as the loop calls them.

Each call goes validate -> check -> run (like the loop), and also straight to `run()` (the open-time check).
A refusal is an `is_error` result with the exact text of CONTRACTS.md §11, and `outside/` is unchanged
(names, modes, sha256). Allowed cases, a symlinked root and the TOCTOU swap are covered too.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentd import failpoints
from agentd.tools.base import PathRefused, ToolContext, ToolOutput, validate_input
from agentd.tools.registry import ToolRegistry, default_tools


def refused(raw: str, root: Path) -> ToolOutput:
    return ToolOutput(
        content=f"Refused: {raw} is outside the workspace ({root}) or reached through a symbolic link;"
        " the call was not run.",
        is_error=True,
    )


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else "-"
            out[str(p.relative_to(root))] = (stat.S_IMODE(st.st_mode), digest)
    return out


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (outside / "secret.txt").chmod(0o640)
    (ws / "a.txt").write_text("alpha\n")
    (ws / "a").mkdir()
    (ws / "sub").mkdir()
    (ws / "sub" / "b.txt").write_text("beta\n")
    os.symlink(outside, ws / "link")
    os.symlink(outside / "secret.txt", ws / "f")
    os.symlink(outside / "new.txt", ws / "notes.md")
    return ws, outside


async def call(name: str, raw: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    """The loop's order: validate, containment check, run; a PathRefused becomes its text."""
    tool = ToolRegistry(default_tools()).get(name)
    assert tool is not None
    args, err = validate_input(tool, raw)
    if args is None:
        return ToolOutput(content=err or "", is_error=True)
    try:
        tool.check(args, ctx)
        return await tool.run(args, ctx)
    except PathRefused as exc:
        return ToolOutput(content=exc.text(), is_error=True)


async def run_only(name: str, raw: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    """Skip `check()`: the refusal must also happen at open time."""
    tool = ToolRegistry(default_tools()).get(name)
    assert tool is not None
    args, _ = validate_input(tool, raw)
    try:
        return await tool.run(args, ctx)
    except PathRefused as exc:
        return ToolOutput(content=exc.text(), is_error=True)


def rows(ws: Path, outside: Path) -> list[tuple[str, dict[str, Any]]]:
    secret = str(outside / "secret.txt")
    return [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("write_file", {"path": "a/../../outside/x", "content": "x"}),
        ("read_file", {"path": secret}),
        ("write_file", {"path": str(outside / "new.txt"), "content": "x"}),
        ("read_file", {"path": "link/secret.txt"}),
        ("write_file", {"path": "link/new.txt", "content": "x"}),
        ("list_dir", {"path": "link"}),
        ("read_file", {"path": "f"}),
        ("write_file", {"path": "f", "content": "x"}),
        ("edit_file", {"path": "f", "old_string": "secret", "new_string": "pwned"}),
        ("write_file", {"path": "notes.md", "content": "x"}),
        ("read_file", {"path": "/proc/self/root" + secret}),
        ("read_file", {"path": "d/" * 2100}),
        ("write_file", {"path": "n" * 256, "content": "x"}),
        ("read_file", {"path": "a\x00b"}),
        ("edit_file", {"path": "a\x00b", "old_string": "a", "new_string": "b"}),
        ("list_dir", {"path": "../"}),
    ]


async def test_every_escape_is_refused_and_outside_is_unchanged(dirs: tuple[Path, Path]) -> None:
    ws, outside = dirs
    ctx = ToolContext(root=ws)
    before = snapshot(outside)
    table = rows(ws, outside)
    results = [await call(name, raw, ctx) for name, raw in table]
    at_open = [await run_only(name, raw, ctx) for name, raw in table]
    expected = [refused(raw["path"], ws) for _, raw in table]
    assert results == expected
    assert at_open == expected
    assert snapshot(outside) == before
    assert os.path.lexists(outside / "new.txt") is False


async def test_allowed_absolute_paths_inside(dirs: tuple[Path, Path]) -> None:
    ws, _ = dirs
    ctx = ToolContext(root=ws)
    read = await call("read_file", {"path": str(ws / "a.txt")}, ctx)
    write = await call("write_file", {"path": str(ws / "n.txt"), "content": "n\n"}, ctx)
    edit = await call(
        "edit_file", {"path": str(ws / "a.txt"), "old_string": "alpha", "new_string": "ALPHA"}, ctx
    )
    listing = await call("list_dir", {"path": str(ws / "sub")}, ctx)
    assert [read.content, write.content, edit.content, listing.content] == [
        "     1\talpha",
        f"Created {ws / 'n.txt'} (2 bytes).",
        f"Edited {ws / 'a.txt'}: replaced 1 occurrence.",
        "b.txt",
    ]
    assert [read.title, write.title, edit.title, listing.title] == [
        "Read a.txt",
        "Write n.txt",
        "Edit a.txt",
        "List sub/",
    ]


async def test_symlinked_root_works_normally(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    ws, _ = dirs
    alias = tmp_path / "alias"
    os.symlink(ws, alias)
    ctx = ToolContext(root=alias)
    write = await call("write_file", {"path": "new/c.txt", "content": "c\n"}, ctx)
    edit = await call("edit_file", {"path": "new/c.txt", "old_string": "c", "new_string": "C"}, ctx)
    read = await call("read_file", {"path": str(alias / "new" / "c.txt")}, ctx)
    listing = await call("list_dir", {"path": "new"}, ctx)
    escape = await call("read_file", {"path": "../outside/secret.txt"}, ctx)
    assert [write.is_error, edit.is_error, read.content, listing.content] == [
        False,
        False,
        "     1\tC",
        "c.txt",
    ]
    assert write.diff == {"path": str(ws / "new" / "c.txt"), "oldText": None, "newText": "c\n"}
    assert escape == refused("../outside/secret.txt", alias)
    assert (ws / "new" / "c.txt").read_text() == "C\n"


def swap_sub_for_link(ws: Path, outside: Path) -> Callable[[str], None]:
    def hit(point: str) -> None:
        if point == "paths.after_check" and not os.path.islink(ws / "sub"):
            os.rename(ws / "sub", ws / "sub-moved")
            os.symlink(outside, ws / "sub")

    return hit


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("read_file", {"path": "sub/b.txt"}),
        ("write_file", {"path": "sub/b.txt", "content": "x"}),
        ("edit_file", {"path": "sub/b.txt", "old_string": "beta", "new_string": "x"}),
        ("list_dir", {"path": "sub"}),
    ],
    ids=["read", "write", "edit", "list"],
)
async def test_toctou_swap_is_refused_at_open_time(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, name: str, raw: dict[str, Any]
) -> None:
    ws, outside = dirs
    (outside / "b.txt").write_text("beta\n")
    before = snapshot(outside)
    monkeypatch.setattr(failpoints, "hit", swap_sub_for_link(ws, outside))
    out = await call(name, raw, ToolContext(root=ws))
    assert out == refused(raw["path"], ws)
    assert snapshot(outside) == before
