"""H18: the workspace root is pinned when the session opens. Replacing the root folder by a symbolic link
to `/` between two tool calls (what one approved `cd .. && git checkout …` did in a monorepo subfolder)
gives 0 escapes for every file tool, `read_file` and `list_dir` included, which never ask: each call is
refused with a clear text, and nothing outside is read or written (`grep` and `glob` too)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentd.permissions.approver import QueueApprover
from agentd.testing.emulator import validate_request as emu_validate
from agentd.tools import paths
from agentd.tools.base import PathRefused, ToolContext, ToolOutput, validate_input
from agentd.tools.registry import ToolRegistry, default_tools
from tests.integration.conftest import answers_of, text


def _root_changed(root: Path) -> str:
    return (
        f"Refused: the workspace root {root} is no longer the directory this session opened (it was moved,"
        " deleted or replaced, e.g. by a symbolic link); the call was not run. Open the workspace again"
        " in a new session."
    )


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _attempts(victim: Path, stamp: str) -> list[tuple[str, dict[str, Any]]]:
    """Every file tool, aimed at what the root's new target (`/`) holds. `victim` is a file of ours
    outside the workspace, reached as a relative path from `/`."""
    rel_victim = str(victim).lstrip("/")
    return [
        ("read_file", {"path": "etc/passwd"}),
        ("read_file", {"path": rel_victim}),
        ("list_dir", {"path": "."}),
        ("list_dir", {"path": "etc", "depth": 2}),
        ("grep", {"pattern": "root:", "path": "etc"}),
        ("glob", {"pattern": "**/passwd"}),
        ("write_file", {"path": f"tmp/agentd-h18-{stamp}.txt", "content": "escaped\n"}),
        ("write_file", {"path": rel_victim, "content": "escaped\n"}),
        ("edit_file", {"path": rel_victim, "old_string": "victim", "new_string": "escaped"}),
        ("run_command", {"command": f"echo escaped > /tmp/agentd-h18-{stamp}-cmd.txt"}),
    ]


def _swap_for_root_link(ws: Path) -> Path:
    """`mv ws ws.orig && ln -s / ws`; returns where the pinned directory now lives."""
    moved = ws.with_name(ws.name + ".orig")
    os.rename(ws, moved)
    os.symlink("/", ws)
    return moved


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim.txt"
    v.write_text("victim\n")
    return v


async def test_a_root_swapped_for_a_link_to_slash_mid_session_gives_zero_escapes(
    make_harness, workspace: Path, data_dir: Path, victim: Path
) -> None:
    """H18: turn 1 reads a file; the root is then replaced by a link to `/`; turn 2 tries every file tool
    (and run_command, allowed without asking here): each is refused with the root-changed text, nothing
    outside changes, and the session goes on."""
    (workspace / "a.txt").write_text("alpha\n")
    stamp = os.urandom(4).hex()
    attempts = _attempts(victim, stamp)
    uses = [{"tool_use": {"name": n, "input": i}} for n, i in attempts]
    approver = QueueApprover.of(*["allow_once"] * len(attempts))
    h = make_harness(
        answers_of([{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}], [text("read")],
                   uses, [text("done")]),
        approver=approver,
    )  # fmt: skip
    assert await h.session.prompt([{"type": "text", "text": "read a.txt"}]) == "end_turn"
    assert h.requests[1]["messages"][-1]["content"][0]["content"] == "     1\talpha"
    before = _sha(victim)
    _swap_for_root_link(workspace)
    try:
        assert await h.session.prompt([{"type": "text", "text": "now look around"}]) == "end_turn"
    finally:
        os.unlink(workspace)
    results = [b for b in h.requests[3]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert [(r["content"], r.get("is_error")) for r in results] == [
        (_root_changed(h.session.p.tool_ctx.root), True)
    ] * len(attempts)
    assert _sha(victim) == before
    assert not Path(f"/tmp/agentd-h18-{stamp}.txt").exists()
    assert not Path(f"/tmp/agentd-h18-{stamp}-cmd.txt").exists()
    assert "x:0:0:" not in json.dumps(h.requests[3])  # no line of /etc/passwd reached the model
    audit = (data_dir / "sessions" / h.session.id / "audit.jsonl").read_text().splitlines()
    assert [json.loads(x)["outcome"] for x in audit[1:]] == ["refused_outside_workspace"] * len(attempts)
    assert [emu_validate(r) for r in h.requests] == [None] * 4


async def _call(name: str, raw: dict[str, Any], ctx: ToolContext, *, check: bool = True) -> ToolOutput:
    tool = ToolRegistry(default_tools()).get(name)
    assert tool is not None
    args, err = validate_input(tool, raw)
    assert err is None, err
    try:
        if check:
            tool.check(args, ctx)
        return await tool.run(args, ctx)
    except PathRefused as exc:
        return ToolOutput(content=exc.text(), is_error=True)


@pytest.mark.parametrize("check", [True, False], ids=["check-then-run", "run-only"])
async def test_every_tool_refuses_after_the_swap(tmp_path: Path, victim: Path, check: bool) -> None:
    """H18: the same swap against each tool on its own, with and without the pre-gate check."""
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = ToolContext(root=ws)
    stamp = os.urandom(4).hex()
    before = _sha(victim)
    _swap_for_root_link(ws)
    try:
        outs = [await _call(n, i, ctx, check=check) for n, i in _attempts(victim, stamp)]
    finally:
        os.unlink(ws)
    assert {(o.content, o.is_error) for o in outs} == {(_root_changed(ws), True)}
    assert _sha(victim) == before and not Path(f"/tmp/agentd-h18-{stamp}.txt").exists()


async def test_a_swap_right_after_the_last_check_still_opens_inside(
    tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """H18, the race: the root is replaced by a link to `/` right after the open-time check passed. Opens
    go from the pinned directory handle, never through the root's name, so each lands in the pinned
    directory (now `ws.orig`) or fails: still 0 escapes."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "etc").mkdir()
    ctx = ToolContext(root=ws)
    moved = ws.with_name("ws.orig")
    real_resolve = paths.resolve_in_workspace
    calls = {False: 0, True: 0}
    writing = [False]

    def resolve_then_swap(raw: str, roots: Any, *, for_write: bool) -> Path:
        out = real_resolve(raw, roots, for_write=for_write)
        calls[for_write] += 1
        if calls[for_write] % 2 == 0 and for_write == writing[0]:  # right before the open that matters
            _swap_for_root_link(ws)
        return out

    monkeypatch.setattr(paths, "resolve_in_workspace", resolve_then_swap)
    stamp = os.urandom(4).hex()
    before = _sha(victim)
    outs = []
    for name, raw in _attempts(victim, stamp)[:-1]:  # the file tools
        writing[0] = name in ("write_file", "edit_file")
        outs.append(await _call(name, raw, ctx))
        if ws.is_symlink():  # put the pinned directory back (same inode) for the next attempt
            os.unlink(ws)
            os.rename(moved, ws)
    assert [o.content for o in outs[:4]] == [
        "etc/passwd does not exist.",
        f"{str(victim).lstrip('/')} does not exist.",
        "etc/",  # the pinned directory, not `/`
        "(empty directory)",
    ]
    assert [o.is_error for o in outs[4:6]] == [False, False]  # grep, glob: searched the pinned directory
    assert "x:0:0:" not in "".join(o.content for o in outs)
    assert _sha(victim) == before and not Path(f"/tmp/agentd-h18-{stamp}.txt").exists()
    written = sorted(str(p.relative_to(ws)) for p in ws.rglob("*") if p.is_file())
    assert written == sorted([f"tmp/agentd-h18-{stamp}.txt", str(victim).lstrip("/")])  # inside, as pinned
