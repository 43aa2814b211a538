"""`grep` and `glob` against hostile trees (issue 11, break11): file names holding newlines or control
characters, `.git` named as the path or in the glob, and paths that are neither files nor folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd.tools import ripgrep
from agentd.tools.base import ToolContext
from agentd.tools.search import Glob, Grep
from tests.integration.test_search_tools import call, write

FORGED = "a\n\nb.txt"  # the blank line rg puts between files
FAKE_LINE = "c\n3:forged"  # a name that looks like a result line
ESC = "d\x1b[31mred.txt"  # a terminal escape


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(
        ws,
        {
            FORGED: "needle one\nx\nneedle two\n",
            FAKE_LINE: "needle\n",
            ESC: "needle\n",
            "plain.txt": "needle\n",
        },
    )
    return ws


async def test_file_names_with_newlines_cannot_forge_results_content(hostile: Path) -> None:
    """break11, finding 3: rg's --heading output was split on blank lines, so a file named "a\\n\\nb.txt"
    forged a file "b.txt" and a name "c\\n3:forged" a result line. The output is now read in order (a
    path runs to its NUL) and names are shown with control characters escaped (agentd.text.visible)."""
    ctx = ToolContext(root=hostile)
    out = await call(Grep(), {"pattern": "needle"}, ctx)
    assert out.content == (
        "a\\n\\nb.txt:1:needle one\n"
        "a\\n\\nb.txt:3:needle two\n"
        "c\\n3:forged:1:needle\n"
        "d\\x1b[31mred.txt:1:needle\n"
        "plain.txt:1:needle"
    )
    assert out.raw_output == {"matches": 5, "files": 4, "shown": 5, "offset": 0, "truncated": False}
    assert {loc["path"] for loc in out.locations} == {
        str(hostile / n) for n in (FORGED, FAKE_LINE, ESC, "plain.txt")
    }
    out = await call(Grep(), {"pattern": "needle", "context": 1}, ctx)
    assert out.content.splitlines()[:3] == [
        "a\\n\\nb.txt:1:needle one",
        "a\\n\\nb.txt-2-x",
        "a\\n\\nb.txt:3:needle two",
    ]


async def test_file_names_with_newlines_files_count_and_glob(hostile: Path) -> None:
    """break11, finding 3: the files and count modes and glob show each hostile name once, escaped."""
    ctx = ToolContext(root=hostile)
    names = ["a\\n\\nb.txt", "c\\n3:forged", "d\\x1b[31mred.txt", "plain.txt"]
    out = await call(Grep(), {"pattern": "needle", "output": "files"}, ctx)
    assert out.content == "\n".join(names)
    out = await call(Grep(), {"pattern": "needle", "output": "count"}, ctx)
    assert out.content == "\n".join(f"{n}:{2 if n.startswith('a') else 1}" for n in names)
    out = await call(Glob(), {"pattern": "**/*"}, ctx)
    assert sorted(out.content.splitlines()) == names
    out = await call(Grep(), {"pattern": "needle", "path": FORGED}, ctx)  # one file, named as the path
    assert out.content == "a\\n\\nb.txt:1:needle one\na\\n\\nb.txt:3:needle two"


def test_parsers_read_paths_to_their_nul() -> None:
    """break11, finding 3: the --null parsers, on rg's own shapes, with names that hold blank lines."""
    data = b"./a\n\nb\x001:x\n3:y\n\n./c\n3:z\x001:w\n"
    assert ripgrep.parse_files(data) == {b"./a\n\nb": b"1:x\n3:y", b"./c\n3:z": b"1:w"}
    assert ripgrep.parse_counts(b"./a\n\nb\x002\n./c\n3:z\x001\n") == {b"./a\n\nb": 2, b"./c\n3:z": 1}
    assert ripgrep.parse_files(b"./a\x001:x\n2:y") == {b"./a": b"1:x\n2:y"}  # cut at the output cap


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(
        ws,
        {
            ".git/config": "[core] needle\n",
            ".git/HEAD": "ref: refs/heads/main\n",
            "sub/.git/config": "needle sub\n",
            "src/a.py": "needle\n",
        },
    )
    return ws


@pytest.mark.parametrize(
    "raw",
    [
        {"pattern": "needle", "path": ".git"},
        {"pattern": "needle", "path": "./.git/"},
        {"pattern": "needle", "path": ".git/config"},
        {"pattern": "needle", "path": "sub/.git"},
        {"pattern": "needle", "glob": ".git/**"},
        {"pattern": "needle", "glob": "**/.git/*"},
    ],
)
async def test_git_is_never_searched_by_grep(repo: Path, raw: dict[str, str]) -> None:
    """break11, finding 5: grep path=".git" (or a glob naming .git) searched git's own data though the
    docs say never; it is now a clear is_error result."""
    out = await call(Grep(), raw, ToolContext(root=repo))
    assert (
        out.is_error
        and ".git (git's own data)" in out.content
        and "needle" not in out.content.split("never")[1]
    )


async def test_git_is_never_searched_by_glob(repo: Path) -> None:
    """break11, finding 5: glob ".git/**" or path ".git" is refused; a hidden glob never lists a .git
    folder at any depth."""
    ctx = ToolContext(root=repo)
    for raw in (
        {"pattern": ".git/**"},
        {"pattern": "*", "path": ".git"},
        {"pattern": "**", "path": "sub/.git"},
    ):
        out = await call(Glob(), raw, ctx)
        assert out.is_error and ".git (git's own data)" in out.content
    out = await call(Glob(), {"pattern": "**/.*"}, ctx)
    assert ".git" not in out.content
    out = await call(Grep(), {"pattern": "needle", "glob": "**/.*/*"}, ctx)
    assert ".git" not in out.content


async def test_grep_on_a_fifo_says_what_it_is(tmp_path: Path) -> None:
    """break11, finding 7: grep on a FIFO said "not a folder"; it names what the path is and that it
    cannot be searched (and never blocks opening it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "pipe")
    out = await call(Grep(), {"pattern": "x", "path": "pipe"}, ToolContext(root=ws))
    assert out.is_error and out.content.startswith("pipe is a named pipe (FIFO), not a file or a folder")
    out = await call(Glob(), {"pattern": "*", "path": "pipe"}, ToolContext(root=ws))
    assert out.is_error and "named pipe (FIFO)" in out.content
