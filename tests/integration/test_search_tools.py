"""`grep` and `glob` through the real ripgrep on a real tree (issue 11): .gitignore/.ignore, hidden files,
binary files, symbolic links out of the workspace (never followed), unsaved editor buffers, 100,000 matches
(capped, counted, pageable), bad patterns as clear `is_error` results, ripgrep missing. Whole outputs are
compared."""

from __future__ import annotations

import json
import os
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from agentd.permissions.approver import QueueApprover
from agentd.tools import ripgrep
from agentd.tools.base import PathRefused, Tool, ToolContext, ToolOutput
from agentd.tools.search import Glob, Grep
from tests.integration.conftest import answers_of, text


class Buffers:
    """A DocumentOverlay double: unsaved editor text by real path."""

    def __init__(self, texts: dict[Path, str]) -> None:
        self.texts = texts

    def read_text(self, path: Path) -> str | None:
        return self.texts.get(path)

    def open_paths(self) -> list[Path]:
        return sorted(self.texts)


async def call(tool: Tool, raw: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    """What the loop does: validate, check containment, run; a refusal becomes its §11 text."""
    args, err = tool.validate(raw, ctx)
    if args is None:
        return ToolOutput(content=err or "", is_error=True)
    try:
        tool.check(args, ctx)
        return await tool.run(args, ctx)
    except PathRefused as exc:
        return ToolOutput(content=exc.text(), is_error=True)


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data, encoding="utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A workspace with ignored, hidden, binary and linked files, and a folder outside it."""
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "needle outside\n"})
    write(
        ws,
        {
            ".gitignore": "build/\n*.log\n",
            "docs/.ignore": "draft.md\n",
            "src/app.py": "import os\n\ndef needle():\n    return 'needle'\n",
            "src/util.py": "x = 1\n# needle here\n",
            "docs/guide.md": "a needle in docs\n",
            "docs/draft.md": "needle in a draft\n",
            "build/out.py": "needle built\n",
            "run.log": "needle logged\n",
            ".env": "NEEDLE=1 needle\n",
            ".github/ci.yml": "run: needle\n",
            "blob.bin": b"needle\x00\x01\x02needle\n",
            "README.md": "Needle in caps\n",
        },
    )
    (ws / "link-out").symlink_to(outside, target_is_directory=True)
    (ws / "secret-link.txt").symlink_to(outside / "secret.txt")
    (ws / "inner-link.py").symlink_to(ws / "src" / "app.py")
    return ws


@pytest.fixture
def ctx(tree: Path) -> ToolContext:
    return ToolContext(root=tree)


async def test_grep_default_view_sorted(tree: Path, ctx: ToolContext) -> None:
    """ripgrep's default view: ignored, hidden, binary and linked files are skipped; results sorted."""
    out = await call(Grep(), {"pattern": "needle"}, ctx)
    assert out.content == (
        "docs/guide.md:1:a needle in docs\n"
        "src/app.py:3:def needle():\n"
        "src/app.py:4:    return 'needle'\n"
        "src/util.py:2:# needle here"
    )
    assert (out.is_error, out.title) == (False, 'Search "needle" in .')
    assert out.locations == [
        {"path": str(tree / "docs/guide.md"), "line": 1},
        {"path": str(tree / "src/app.py"), "line": 3},
        {"path": str(tree / "src/app.py"), "line": 4},
        {"path": str(tree / "src/util.py"), "line": 2},
    ]
    assert out.raw_output == {"matches": 4, "files": 3, "shown": 4, "offset": 0, "truncated": False}
    for _ in range(3):  # stable: ripgrep runs in parallel, the order never changes
        assert (await call(Grep(), {"pattern": "needle"}, ctx)).content == out.content


async def test_grep_options(tree: Path, ctx: ToolContext) -> None:
    """case_insensitive, glob relative to path, context, files and count outputs."""
    out = await call(Grep(), {"pattern": "needle", "case_insensitive": True, "output": "files"}, ctx)
    assert out.content == "README.md\ndocs/guide.md\nsrc/app.py\nsrc/util.py"
    out = await call(Grep(), {"pattern": "needle", "output": "count"}, ctx)
    assert out.content == "docs/guide.md:1\nsrc/app.py:2\nsrc/util.py:1"
    out = await call(Grep(), {"pattern": "needle", "path": "src", "glob": "u*.py"}, ctx)
    assert out.content == "src/util.py:2:# needle here"
    out = await call(Grep(), {"pattern": "needle", "path": "src", "context": 1}, ctx)
    assert out.content == (
        "src/app.py-2-\n"
        "src/app.py:3:def needle():\n"
        "src/app.py:4:    return 'needle'\n"
        "--\n"
        "src/util.py-1-x = 1\n"
        "src/util.py:2:# needle here"
    )


async def test_hidden_and_ignored_when_named(tree: Path, ctx: ToolContext) -> None:
    """Hidden files are searched when path or glob names them; an ignored folder when path names it."""
    out = await call(Grep(), {"pattern": "needle", "glob": ".github/**"}, ctx)
    assert out.content == ".github/ci.yml:1:run: needle"
    out = await call(Grep(), {"pattern": "needle", "path": ".github"}, ctx)
    assert out.content == ".github/ci.yml:1:run: needle"
    out = await call(Grep(), {"pattern": "needle", "glob": "**/.env"}, ctx)
    assert out.content == ".env:1:NEEDLE=1 needle"
    out = await call(Grep(), {"pattern": "needle", "path": "build"}, ctx)
    assert out.content == "build/out.py:1:needle built"
    out = await call(Grep(), {"pattern": "needle", "path": ".env"}, ctx)
    assert out.content == ".env:1:NEEDLE=1 needle"


async def test_glob_narrows_the_default_view(tree: Path, ctx: ToolContext) -> None:
    """A glob never brings back what ignore files or hidden folders leave out (ripgrep's own --glob would:
    `*` would list .git and ignored folders)."""
    (tree / ".git").mkdir()
    (tree / ".git" / "config").write_text("needle\n")
    out = await call(Glob(), {"pattern": "*"}, ctx)
    assert sorted(out.content.splitlines()) == [
        "README.md",
        "blob.bin",
        "docs/guide.md",
        "src/app.py",
        "src/util.py",
    ]
    out = await call(Glob(), {"pattern": "**/*.log"}, ctx)
    assert out.content == 'No files match "**/*.log" in path ".".'
    out = await call(Grep(), {"pattern": "needle", "glob": "**"}, ctx)
    assert out.raw_output == {"matches": 4, "files": 3, "shown": 4, "offset": 0, "truncated": False}
    out = await call(Glob(), {"pattern": "**/.*"}, ctx)
    assert sorted(out.content.splitlines()) == [".env", ".gitignore", "docs/.ignore"]
    out = await call(Glob(), {"pattern": "src/*.{py,md}"}, ctx)
    assert sorted(out.content.splitlines()) == ["src/app.py", "src/util.py"]


async def test_binary_file_named(tree: Path, ctx: ToolContext) -> None:
    out = await call(Grep(), {"pattern": "needle", "path": "blob.bin"}, ctx)
    assert (out.is_error, out.content) == (
        False,
        'No matches for "needle" in path "blob.bin".\n[blob.bin is a binary file; grep searches text files only]',
    )


async def test_links_out_are_not_followed(tree: Path, ctx: ToolContext) -> None:
    """C08: a link out of the workspace is never searched, and a path through one is refused."""
    out = await call(Grep(), {"pattern": "outside"}, ctx)
    assert out.content == 'No matches for "outside" in path ".".'
    root = tree
    for path in ("link-out", "secret-link.txt", "link-out/secret.txt", "../outside"):
        out = await call(Grep(), {"pattern": "needle", "path": path}, ctx)
        assert (out.is_error, out.content) == (True, PathRefused(path, root).text())
        out = await call(Glob(), {"pattern": "*", "path": path}, ctx)
        assert (out.is_error, out.content) == (True, PathRefused(path, root).text())
    out = await call(Glob(), {"pattern": "**/*secret*"}, ctx)
    assert out.content == 'No files match "**/*secret*" in path ".".'


async def test_bad_patterns_are_clear_errors(ctx: ToolContext) -> None:
    out = await call(Grep(), {"pattern": "needle("}, ctx)
    assert out.is_error
    assert out.content.startswith("Invalid regex 'needle(': regex parse error:")
    assert "unclosed group" in out.content
    out = await call(Grep(), {"pattern": "x", "glob": "src/[a"}, ctx)
    assert out.is_error and out.content.startswith("Invalid glob 'src/[a': error parsing glob")
    out = await call(Glob(), {"pattern": "{a"}, ctx)
    assert (out.is_error, out.content) == (True, "Invalid glob '{a': unclosed '{'")
    out = await call(Glob(), {"pattern": "!*.py"}, ctx)
    assert (out.is_error, out.content) == (
        True,
        "Invalid glob '!*.py': a leading '!' (exclusion) is not supported; name the files to search",
    )
    out = await call(Grep(), {"pattern": "x", "context": 99}, ctx)
    assert (out.is_error, out.content) == (True, "invalid_arguments: context: must be <= 20")
    out = await call(Grep(), {"pattern": "x", "path": "nope"}, ctx)
    assert (out.is_error, out.content) == (True, "nope does not exist.")


async def test_glob_newest_first(tree: Path, ctx: ToolContext) -> None:
    now = time.time_ns()
    for i, rel in enumerate(["src/util.py", "docs/guide.md", "src/app.py", "docs/draft.md"]):
        os.utime(tree / rel, ns=(now + i * 10**9, now + i * 10**9))
    out = await call(Glob(), {"pattern": "**/*.*"}, ctx)
    assert out.content.splitlines()[:3] == ["src/app.py", "docs/guide.md", "src/util.py"]
    out = await call(Glob(), {"pattern": "*.py", "path": "src"}, ctx)
    assert out.content == "src/app.py\nsrc/util.py"
    assert out.locations == [{"path": str(tree / "src/app.py")}, {"path": str(tree / "src/util.py")}]
    assert out.title == 'Search "*.py" in src'
    out = await call(Glob(), {"pattern": ".github/*"}, ctx)
    assert out.content == ".github/ci.yml"
    out = await call(Glob(), {"pattern": "*.py", "path": "src", "limit": 1}, ctx)
    assert (
        out.content
        == "src/app.py\n[files 1-1 of 2 shown; 1 more not shown: call glob with offset=1 for the next ones]"
    )


async def test_unsaved_buffers_searched_as_the_buffer_holds_them(tree: Path) -> None:
    """A file open with unsaved changes is searched as the editor holds it; an ignored one stays ignored."""
    app, built = tree / "src/app.py", tree / "build/out.py"
    ctx = ToolContext(root=tree, documents=Buffers({app: "needle typed\n", built: "needle unsaved\n"}))
    out = await call(Grep(), {"pattern": "needle"}, ctx)
    assert (
        out.content
        == "docs/guide.md:1:a needle in docs\nsrc/app.py:1:needle typed\nsrc/util.py:2:# needle here"
    )
    out = await call(Grep(), {"pattern": "typed", "path": "src/app.py"}, ctx)
    assert out.content == "src/app.py:1:needle typed"
    out = await call(Grep(), {"pattern": "return", "output": "count"}, ctx)
    assert out.content == 'No matches for "return" in path ".".'


async def test_100000_matches_capped_counted_pageable(tmp_path: Path) -> None:
    """100,000 matches: the page fits the budget, the total is stated, and offset pages on without gaps."""
    ws = tmp_path / "big"
    for f in range(100):
        write(ws, {f"f{f:03}.txt": "".join(f"hit {f:03} {n:04}\n" for n in range(1000))})
    ctx = ToolContext(root=ws)
    out = await call(Grep(), {"pattern": "hit"}, ctx)
    lines = out.content.splitlines()
    assert len(out.content.encode()) <= ctx.output_max_bytes + 200
    shown = len(lines) - 1
    assert lines[0] == "f000.txt:1:hit 000 0000"
    assert lines[-1] == (
        f"[matches 1-{shown} of 100000 shown (size limit reached); {100000 - shown} more not shown:"
        f" call grep with offset={shown} for the next ones]"
    )
    nxt = await call(Grep(), {"pattern": "hit", "offset": shown, "limit": 2}, ctx)
    n = shown
    assert nxt.content.splitlines()[:2] == [
        f"f{n // 1000:03}.txt:{n % 1000 + 1}:hit {n // 1000:03} {n % 1000:04}",
        f"f{(n + 1) // 1000:03}.txt:{(n + 1) % 1000 + 1}:hit {(n + 1) // 1000:03} {(n + 1) % 1000:04}",
    ]
    last = await call(Grep(), {"pattern": "hit", "offset": 99998}, ctx)
    assert (
        last.content
        == "f099.txt:999:hit 099 0998\nf099.txt:1000:hit 099 0999\n[matches 99999-100000 of 100000 shown]"
    )
    count = await call(Grep(), {"pattern": "hit", "output": "count", "limit": 1}, ctx)
    assert (
        count.content
        == "f000.txt:1000\n[files 1-1 of 100 shown; 99 more not shown: call grep with offset=1 for the next ones]"
    )
    assert count.raw_output is not None and count.raw_output["matches"] == 100000


async def test_ripgrep_missing_is_a_clear_error(
    ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(sysconfig, "get_path", lambda name: str(empty))
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ripgrep.RipgrepMissing):
        ripgrep.find_rg()
    for tool, raw in ((Grep(), {"pattern": "x"}), (Glob(), {"pattern": "*"})):
        out = await call(tool, raw, ctx)
        assert (out.is_error, out.content) == (
            True,
            "The search tools need ripgrep (rg), which was not found. Install it in agentd's environment"
            " (`pip install ripgrep`) or put `rg` on PATH; meanwhile use list_dir and read_file.",
        )


async def test_in_a_session_search_needs_no_approval_and_is_audited(
    make_harness: Any, workspace: Path, data_dir: Path
) -> None:
    """grep and glob are allowed without asking under the default rules and in readOnly mode; each call is
    audited; the tool call updates carry kind `search`, the title and the locations."""
    write(workspace, {"src/a.py": "def needle():\n    pass\n"})
    grep = {"tool_use": {"name": "grep", "input": {"pattern": "needle"}}}
    glob = {"tool_use": {"name": "glob", "input": {"pattern": "**/*.py", "path": "src"}}}
    approver = QueueApprover()
    h = make_harness(answers_of([grep, glob], [text("ok")]), approver=approver)
    h.session.p.gate.mode = "readOnly"
    assert await h.session.prompt([{"type": "text", "text": "find it"}]) == "end_turn"
    assert approver.requests == []
    audit = [
        json.loads(x) for x in (data_dir / "sessions" / h.session.id / "audit.jsonl").read_text().splitlines()
    ]
    assert [(r["tool"], r["decision"], r["decidedBy"], r["rule"]) for r in audit] == [
        ("grep", "allow", "rule", "default:grep=allow"),
        ("glob", "allow", "rule", "default:glob=allow"),
    ]
    results = h.requests[1]["messages"][-1]["content"]
    assert [r["content"] for r in results] == ["src/a.py:1:def needle():", "src/a.py"]
    calls = [u for u in h.updates if u["sessionUpdate"] == "tool_call"]
    assert [(c["title"], c["kind"]) for c in calls] == [
        ('Search "needle" in .', "search"),
        ('Search "**/*.py" in src', "search"),
    ]
    done = [u for u in h.updates if u["sessionUpdate"] == "tool_call_update" and u["status"] == "completed"]
    real = str(workspace.resolve() / "src" / "a.py")
    assert [d["locations"] for d in done] == [[{"path": real, "line": 1}], [{"path": real}]]
    assert '[Tool] Search "needle" in . -> completed' in h.lines
