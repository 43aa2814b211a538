"""read_file, list_dir, write_file, edit_file (PROTOCOL.md §7.3, §8.1; CONTRACTS.md §11 texts).

Whole ToolOutput objects are compared; every model-facing text exactly.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.tools.base import PathRefused, Preview, Tool, ToolContext, ToolOutput, validate_input
from agentd.tools.fs import ListDir, ReadFile
from agentd.tools.writes import EditFile, WriteFile, unified_diff


class Buffers:
    """A DocumentOverlay double: unsaved editor text by real path."""

    def __init__(self, texts: dict[Path, str]) -> None:
        self.texts = texts

    def read_text(self, path: Path) -> str | None:
        return self.texts.get(path)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(root=ws)


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


async def call(tool: Tool, raw: Any, ctx: ToolContext) -> ToolOutput:
    """What the loop does: validate, check containment, run; a refusal becomes its §11 text."""
    args, err = validate_input(tool, raw)
    if args is None:
        return ToolOutput(content=err or "", is_error=True)
    try:
        tool.check(args, ctx)
        return await tool.run(args, ctx)
    except PathRefused as exc:
        return ToolOutput(content=exc.text(), is_error=True)


def err(text: str) -> ToolOutput:
    return ToolOutput(content=text, is_error=True)


# --- read_file ---------------------------------------------------------------------------------------


def ten_lines(ws: Path) -> Path:
    p = ws / "ten.txt"
    p.write_text("".join(f"line {i:02d}\n" for i in range(1, 11)))
    return p


async def test_read_whole_file(ws: Path, ctx: ToolContext) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("import os\n\nprint(os.sep)")
    out = await call(ReadFile(), {"path": "src/app.py"}, ctx)
    assert out == ToolOutput(
        content="     1\timport os\n     2\t\n     3\tprint(os.sep)",
        title="Read src/app.py",
        locations=[{"path": str(ws / "src" / "app.py"), "line": 1}],
        raw_output={"lines": 3, "bytes": 24, "source": "disk"},
    )


async def test_read_with_offset_and_limit(ws: Path, ctx: ToolContext) -> None:
    p = ten_lines(ws)
    out = await call(ReadFile(), {"path": "ten.txt", "offset": 9, "limit": 5}, ctx)
    mid = await call(ReadFile(), {"path": "ten.txt", "offset": 3, "limit": 2}, ctx)
    assert out == ToolOutput(
        content="     9\tline 09\n    10\tline 10",
        title="Read ten.txt",
        locations=[{"path": str(p), "line": 9}],
        raw_output={"lines": 2, "bytes": 16, "source": "disk"},
    )
    assert mid.content == "     3\tline 03\n     4\tline 04"


async def test_read_offset_past_end(ws: Path, ctx: ToolContext) -> None:
    ten_lines(ws)
    (ws / "two.txt").write_text("a\nb")
    (ws / "one.txt").write_text("a\n")
    out = await call(ReadFile(), {"path": "ten.txt", "offset": 11}, ctx)
    two = await call(ReadFile(), {"path": "two.txt", "offset": 3, "limit": 1}, ctx)
    one = await call(ReadFile(), {"path": "one.txt", "offset": 2}, ctx)
    assert [out, two, one] == [
        err("offset 11 is past the end of ten.txt (10 lines)."),
        err("offset 3 is past the end of two.txt (2 lines)."),
        err("offset 2 is past the end of one.txt (1 line)."),
    ]


async def test_read_truncates_at_read_max_bytes_with_exact_marker(ws: Path) -> None:
    p = ten_lines(ws)
    ctx = ToolContext(root=ws, read_max_bytes=20)
    out = await call(ReadFile(), {"path": "ten.txt"}, ctx)
    limited = await call(ReadFile(), {"path": "ten.txt", "offset": 2, "limit": 4}, ctx)
    assert out == ToolOutput(
        content="     1\tline 01\n     2\tline 02\n[... 64 of 80 bytes omitted ...]\n",
        title="Read ten.txt",
        locations=[{"path": str(p), "line": 1}],
        raw_output={"lines": 2, "bytes": 16, "source": "disk"},
    )
    assert limited.content == "     2\tline 02\n     3\tline 03\n[... 16 of 32 bytes omitted ...]\n"


async def test_read_truncates_one_long_line_on_a_utf8_boundary(ws: Path) -> None:
    (ws / "long.txt").write_text("ab" + "é" * 10 + "\n")  # 2 + 20 + 1 = 23 bytes
    out = await call(ReadFile(), {"path": "long.txt"}, ToolContext(root=ws, read_max_bytes=7))
    assert out.content == "     1\tabéé\n[... 17 of 23 bytes omitted ...]\n"


async def test_read_empty_file(ws: Path, ctx: ToolContext) -> None:
    (ws / "empty.txt").write_bytes(b"")
    out = await call(ReadFile(), {"path": "empty.txt"}, ctx)
    assert (out.content, out.is_error, out.raw_output) == (
        "(empty file)",
        False,
        {"lines": 0, "bytes": 0, "source": "disk"},
    )


@pytest.mark.parametrize("data", [b"abc\x00def", b"ok\n\xff\xfe\n"], ids=["nul", "bad-utf8"])
async def test_read_binary_is_refused(ws: Path, ctx: ToolContext, data: bytes) -> None:
    (ws / "blob.bin").write_bytes(data)
    out = await call(ReadFile(), {"path": "blob.bin"}, ctx)
    assert out == err("blob.bin is a binary file; read_file works on UTF-8 text only.")


async def test_read_sniffs_only_the_first_8_kib_for_nul(ws: Path, ctx: ToolContext) -> None:
    (ws / "late.txt").write_bytes(b"x" * 9000 + b"\x00")
    out = await call(ReadFile(), {"path": "late.txt"}, ctx)
    assert (out.is_error, out.raw_output) == (False, {"lines": 1, "bytes": 9001, "source": "disk"})


async def test_read_errors(ws: Path, ctx: ToolContext) -> None:
    (ws / "d").mkdir()
    (ws / "f.txt").write_text("f\n")
    assert await call(ReadFile(), {"path": "nope.txt"}, ctx) == err("nope.txt does not exist.")
    assert await call(ReadFile(), {"path": "d"}, ctx) == err(
        "d is a directory; use list_dir to see its entries."
    )
    assert await call(ReadFile(), {"path": "f.txt/x"}, ctx) == err("f.txt/x: Not a directory")


async def test_read_prefers_the_unsaved_buffer(ws: Path) -> None:
    p = ws / "a.py"
    p.write_text("on disk\n")
    ctx = ToolContext(root=ws, documents=Buffers({p: "unsaved\nedit\n"}))
    out = await call(ReadFile(), {"path": "a.py"}, ctx)
    assert out == ToolOutput(
        content="     1\tunsaved\n     2\tedit",
        title="Read a.py",
        locations=[{"path": str(p), "line": 1}],
        raw_output={"lines": 2, "bytes": 13, "source": "buffer"},
    )


@pytest.mark.parametrize(
    ("tool", "raw", "expected"),
    [
        (ReadFile(), {"extra": 1}, "invalid_arguments: path: required; extra: unknown key"),
        (
            ReadFile(),
            {"path": "a", "offset": 0, "limit": "x"},
            "invalid_arguments: offset: must be >= 1; limit: must be an integer",
        ),
        (ReadFile(), [], "invalid_arguments: input: must be an object"),
        (WriteFile(), {"path": 3}, "invalid_arguments: path: must be a string; content: required"),
        (
            EditFile(),
            {"path": "a", "old_string": "", "new_string": "b", "replace_all": "maybe"},
            "invalid_arguments: old_string: must not be empty; replace_all: must be true or false",
        ),
        (ListDir(), {"depth": 0}, "invalid_arguments: depth: must be >= 1"),
    ],
    ids=["missing-and-extra", "ranges", "not-object", "write-types", "edit", "list-depth"],
)
async def test_invalid_input_texts(ctx: ToolContext, tool: Tool, raw: Any, expected: str) -> None:
    assert await call(tool, raw, ctx) == err(expected)


# --- write_file ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("umask022")
async def test_write_new_file_creates_parents(ws: Path, ctx: ToolContext) -> None:
    out = await call(WriteFile(), {"path": "pkg/sub/new.py", "content": "x = 1\n"}, ctx)
    p = ws / "pkg" / "sub" / "new.py"
    assert out == ToolOutput(
        content="Created pkg/sub/new.py (6 bytes).",
        title="Write pkg/sub/new.py",
        locations=[{"path": str(p), "line": 1}],
        diff={"path": str(p), "oldText": None, "newText": "x = 1\n"},
        raw_output={"bytes": 6, "appliedVia": "disk"},
    )
    assert (p.read_text(), stat.S_IMODE(p.stat().st_mode)) == ("x = 1\n", 0o644)


async def test_write_overwrite_keeps_0755(ws: Path, ctx: ToolContext) -> None:
    p = ws / "run.sh"
    p.write_text("#!/bin/sh\n")
    p.chmod(0o755)
    out = await call(WriteFile(), {"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}, ctx)
    assert (out.content, out.diff) == (
        "Wrote 18 bytes to run.sh.",
        {"path": str(p), "oldText": "#!/bin/sh\n", "newText": "#!/bin/sh\necho hi\n"},
    )
    assert (p.read_text(), stat.S_IMODE(p.stat().st_mode)) == ("#!/bin/sh\necho hi\n", 0o755)
    assert sorted(os.listdir(ws)) == ["run.sh"]


async def test_write_preview_shows_the_unified_diff(ws: Path, ctx: ToolContext) -> None:
    (ws / "n.txt").write_text("one\ntwo\n")
    tool = WriteFile()
    args, _ = validate_input(tool, {"path": "n.txt", "content": "one\n2\n"})
    new_args, _ = validate_input(tool, {"path": "fresh.txt", "content": "hi"})
    assert await tool.preview(args, ctx) == Preview(
        summary="Write n.txt",
        path=str(ws / "n.txt"),
        diff="--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n",
        old_text="one\ntwo\n",
        new_text="one\n2\n",
    )
    assert await tool.preview(new_args, ctx) == Preview(
        summary="Write fresh.txt (new file)",
        path=str(ws / "fresh.txt"),
        diff="--- /dev/null\n+++ b/fresh.txt\n@@ -0,0 +1 @@\n+hi\n\\ No newline at end of file\n",
        old_text=None,
        new_text="hi",
    )
    assert os.path.exists(ws / "fresh.txt") is False


async def test_write_into_a_directory_is_an_error(ws: Path, ctx: ToolContext) -> None:
    (ws / "d").mkdir()
    assert await call(WriteFile(), {"path": "d", "content": "x"}, ctx) == err(
        "d is a directory; use list_dir to see its entries."
    )


# --- edit_file ----------------------------------------------------------------------------------------


async def test_edit_replaces_once_and_keeps_mode(ws: Path, ctx: ToolContext) -> None:
    p = ws / "tool.sh"
    p.write_text("#!/bin/sh\necho old\necho end\n")
    p.chmod(0o755)
    out = await call(EditFile(), {"path": "tool.sh", "old_string": "echo old", "new_string": "echo new"}, ctx)
    assert out == ToolOutput(
        content="Edited tool.sh: replaced 1 occurrence.",
        title="Edit tool.sh",
        locations=[{"path": str(p), "line": 2}],
        diff={
            "path": str(p),
            "oldText": "#!/bin/sh\necho old\necho end\n",
            "newText": "#!/bin/sh\necho new\necho end\n",
        },
        raw_output={"appliedVia": "disk", "replacements": 1},
    )
    assert (p.read_text(), stat.S_IMODE(p.stat().st_mode)) == ("#!/bin/sh\necho new\necho end\n", 0o755)


async def test_edit_errors_are_exact(ws: Path, ctx: ToolContext) -> None:
    (ws / "c.py").write_text("x = 1\nx = 1\n")
    tool = EditFile()
    not_found = await call(tool, {"path": "c.py", "old_string": "y = 2", "new_string": "y = 3"}, ctx)
    ambiguous = await call(tool, {"path": "c.py", "old_string": "x = 1", "new_string": "x = 2"}, ctx)
    same = await call(tool, {"path": "c.py", "old_string": "x", "new_string": "x"}, ctx)
    missing = await call(tool, {"path": "gone.py", "old_string": "a", "new_string": "b"}, ctx)
    assert [not_found, ambiguous, same, missing] == [
        err(
            "old_string was not found in c.py; read the file again and copy the exact text, including whitespace and indentation."
        ),
        err(
            "old_string occurs 2 times in c.py; add surrounding context to make it unique, or set replace_all to true."
        ),
        err("old_string and new_string are identical; nothing would change."),
        err("gone.py does not exist; use write_file to create it."),
    ]
    assert (ws / "c.py").read_text() == "x = 1\nx = 1\n"


async def test_edit_replace_all(ws: Path, ctx: ToolContext) -> None:
    (ws / "c.py").write_text("a\nx = 1\nx = 1\n")
    out = await call(
        EditFile(), {"path": "c.py", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True}, ctx
    )
    assert (out.content, out.locations, out.raw_output) == (
        "Edited c.py: replaced 2 occurrences.",
        [{"path": str(ws / "c.py"), "line": 2}],
        {"appliedVia": "disk", "replacements": 2},
    )
    assert (ws / "c.py").read_text() == "a\nx = 2\nx = 2\n"


async def test_edit_binary_and_preview_of_a_failing_edit(ws: Path, ctx: ToolContext) -> None:
    (ws / "b.bin").write_bytes(b"\x00\x01")
    (ws / "c.py").write_text("x = 1\n")
    tool = EditFile()
    args, _ = validate_input(tool, {"path": "c.py", "old_string": "nope", "new_string": "y"})
    assert await call(tool, {"path": "b.bin", "old_string": "a", "new_string": "b"}, ctx) == err(
        "b.bin is a binary file; edit_file works on UTF-8 text only."
    )
    assert await tool.preview(args, ctx) == Preview(
        summary="Edit c.py (old_string was not found in c.py; read the file again and copy the exact text,"
        " including whitespace and indentation.)",
        path=str(ws / "c.py"),
    )


async def test_edit_uses_the_buffer_as_the_before_side(ws: Path) -> None:
    p = ws / "m.txt"
    p.write_text("disk\n")
    ctx = ToolContext(root=ws, documents=Buffers({p: "buffer\n"}))
    out = await call(EditFile(), {"path": "m.txt", "old_string": "buffer", "new_string": "saved"}, ctx)
    assert (out.diff, p.read_text()) == (
        {"path": str(p), "oldText": "buffer\n", "newText": "saved\n"},
        "saved\n",
    )


# --- list_dir -----------------------------------------------------------------------------------------


def tree(ws: Path) -> None:
    for rel in (
        "README.md",
        "src/app.py",
        "src/app.pyc",
        "src/keep.log",
        "src/gen/out.txt",
        "build/x.o",
        "debug.log",
        "docs/notes/a.md",
        ".git/HEAD",
        ".env",
    ):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x\n")
    (ws / ".gitignore").write_text("build/\n*.log\n*.pyc\n")
    (ws / "src" / ".gitignore").write_text("gen/\n!keep.log\n")
    os.symlink("src", ws / "srclink")


async def test_list_dir_one_level(ws: Path, ctx: ToolContext) -> None:
    tree(ws)
    out = await call(ListDir(), {}, ctx)
    assert out == ToolOutput(
        content=".env\n.gitignore\nREADME.md\ndocs/\nsrc/\nsrclink@",
        title="List ./",
        locations=[{"path": str(ws)}],
        raw_output={"entries": 6, "truncated": False},
    )


async def test_list_dir_recursive_honours_nested_gitignore(ws: Path, ctx: ToolContext) -> None:
    tree(ws)
    out = await call(ListDir(), {"path": ".", "depth": 3}, ctx)
    sub = await call(ListDir(), {"path": "src"}, ctx)
    assert out.content == (
        ".env\n.gitignore\nREADME.md\ndocs/\ndocs/notes/\ndocs/notes/a.md\nsrc/\nsrc/.gitignore\n"
        "src/app.py\nsrc/keep.log\nsrclink@"
    )
    assert (sub.content, sub.title) == (".gitignore\napp.py\nkeep.log", "List src/")


async def test_list_dir_empty_missing_file_and_cap(ws: Path, ctx: ToolContext) -> None:
    (ws / "empty").mkdir()
    (ws / "f.txt").write_text("x")
    (ws / "many").mkdir()
    for i in range(1001):
        (ws / "many" / f"{i:04d}").write_text("")
    assert (await call(ListDir(), {"path": "empty"}, ctx)).content == "(empty directory)"
    assert await call(ListDir(), {"path": "nope"}, ctx) == err("nope does not exist.")
    assert await call(ListDir(), {"path": "f.txt"}, ctx) == err("f.txt: Not a directory")
    many = await call(ListDir(), {"path": "many"}, ctx)
    assert many.content.split("\n")[-2:] == [
        "0999",
        "[... listing stopped at 1000 entries; list a subdirectory ...]",
    ]
    assert many.raw_output == {"entries": 1000, "truncated": True}


def test_unified_diff_marks_missing_final_newline() -> None:
    assert unified_diff("a.txt", "x\ny", "x\nz\n") == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+z\n"
    )
