"""H2 / case C17: `edit_file` and `write_file` keep a file's line endings, BOM and final-newline state
(agentd/tools/textstyle.py), checked on the bytes on disk through the tools themselves."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentd.tools.base import ToolContext, ToolOutput, validate_input
from agentd.tools.fs import ReadFile
from agentd.tools.textstyle import BOM
from agentd.tools.writes import EditFile, WriteFile

EOL = re.compile(r"\r\n|\n")


def _run(tool: Any, raw: dict[str, Any], root: Path) -> ToolOutput:
    args, err = validate_input(tool, raw)
    assert err is None, err
    ctx = ToolContext(root=root)
    tool.check(args, ctx)
    return asyncio.run(tool.run(args, ctx))


def _edit(root: Path, data: bytes, old: str, new: str, **more: Any) -> tuple[ToolOutput, bytes]:
    (root / "f.txt").write_bytes(data)
    out = _run(EditFile(), {"path": "f.txt", "old_string": old, "new_string": new, **more}, root)
    return out, (root / "f.txt").read_bytes()


def _write(root: Path, data: bytes | None, content: str) -> tuple[ToolOutput, bytes]:
    if data is not None:
        (root / "f.txt").write_bytes(data)
    out = _run(WriteFile(), {"path": "f.txt", "content": content}, root)
    return out, (root / "f.txt").read_bytes()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


# ---- the cases of C17, exactly -------------------------------------------------------------------------


def test_a_multi_line_old_string_with_lf_matches_a_crlf_file_and_keeps_crlf(root: Path) -> None:
    """C17, H2: the model's `\\n` matches `\\r\\n`; the new lines get `\\r\\n`; nothing else moves."""
    data = b"def f():\r\n    return 1\r\n\r\nprint(f())\r\n"
    out, after = _edit(root, data, "def f():\n    return 1\n", "def f():\n    x = 1\n    return x\n")
    assert (out.is_error, out.content) == (False, "Edited f.txt: replaced 1 occurrence.")
    assert after == b"def f():\r\n    x = 1\r\n    return x\r\n\r\nprint(f())\r\n"


def test_write_file_over_a_crlf_file_keeps_crlf_and_the_bom(root: Path) -> None:
    """C17, H2: write_file with `\\n` content over a CRLF file with a BOM writes CRLF and keeps the BOM."""
    out, after = _write(root, BOM + b"a\r\nb\r\n", "x\ny\n")
    assert (out.is_error, after) == (False, BOM + b"x\r\ny\r\n")
    assert out.raw_output == {"bytes": len(BOM) + 6, "appliedVia": "disk"}


def test_write_file_content_that_chooses_its_own_style_is_written_as_given(root: Path) -> None:
    """H2: CRLF in the content is a choice (kept over an LF file); a leading U+FEFF brings its own BOM;
    a new file is written exactly as given."""
    assert _write(root, b"a\nb\n", "x\r\ny\r\n")[1] == b"x\r\ny\r\n"
    assert _write(root, BOM + b"a\r\n", "\ufeffx\r\n")[1] == BOM + b"x\r\n"
    assert _write(root, b"a\r\nb\r\n", "no newline at all")[1] == b"no newline at all"
    (root / "f.txt").unlink()
    assert _write(root, None, "x\ny")[1] == b"x\ny"


def test_an_edit_keeps_the_bom_and_read_file_never_shows_it(root: Path) -> None:
    """H2: the BOM stays on disk; read_file shows the text without it; an old_string that copied it still
    matches."""
    out, after = _edit(root, BOM + b"alpha\nbeta\n", "alpha", "gamma")
    assert (out.is_error, after) == (False, BOM + b"gamma\nbeta\n")
    read = _run(ReadFile(), {"path": "f.txt"}, root)
    assert read.content == "     1\tgamma\n     2\tbeta"
    assert _edit(root, BOM + b"alpha\n", "\ufeffalpha", "\ufeffdelta")[1] == BOM + b"delta\n"


@pytest.mark.parametrize(
    ("data", "old", "new", "after"),
    [
        (b"a\nb", "b", "c\n", b"a\nc"),  # no final newline: not gained by accident
        (b"a\nb", "b", "c\nd\n", b"a\nc\nd"),
        (b"a\nb", "b", "b\n", b"a\nb\n"),  # ... unless adding it is the whole edit
        (b"a\r\nb\r\n", "b\n", "c", b"a\r\nc\r\n"),  # a final newline is not lost by accident
        (b"a\r\nb\r\n", "b\n", "b", b"a\r\nb"),  # ... unless removing it is the whole edit
        (b"a\r\nb\r\n", "b\n", "", b"a\r\n"),  # deleting the last line
        (b"a\nb\r\nc\n", "a\nb\nc", "1\n2\n3\n4", b"1\n2\r\n3\r\n4\n"),  # mixed: ending by position
        (b"x = 1\r\n", "x = 1", "x = 1\ny = 2", b"x = 1\r\ny = 2\r\n"),  # one-line match: the file's
        (b"a\rb\r\n", "a\rb\n", "c\n", b"c\r\n"),  # a lone CR is an ordinary character
    ],
)
def test_line_endings_and_the_final_newline_follow_the_file(
    root: Path, data: bytes, old: str, new: str, after: bytes
) -> None:
    """H2: the final-newline state and the line endings of the span follow the file."""
    out, got = _edit(root, data, old, new)
    assert (out.is_error, got) == (False, after), out.content


def test_an_edit_that_only_changes_line_endings_is_refused(root: Path) -> None:
    """H2: edits keep the file's line endings, so this one would change nothing; the model is told."""
    out, after = _edit(root, b"a\r\nb\r\n", "a\r\nb", "a\nb")
    assert out.is_error and "differ only in line endings" in out.content
    assert after == b"a\r\nb\r\n"


def test_replace_all_counts_loose_matches(root: Path) -> None:
    """H2: `replace_all` replaces every loose match; a loose match counts for uniqueness."""
    out, after = _edit(root, b"x\r\ny\nx\ny\r\n", "x\ny", "z", replace_all=True)
    assert (out.content, after) == ("Edited f.txt: replaced 2 occurrences.", b"z\nz\r\n")
    out, _ = _edit(root, b"x\r\ny\nx\ny\r\n", "x\ny", "z")
    assert out.content.startswith("old_string occurs 2 times in f.txt")


# ---- the properties of the acceptance --------------------------------------------------------------------

LINE = st.text(alphabet=st.sampled_from("ab é\t{}"), max_size=6)
FILE_EOL = st.sampled_from(["lf", "crlf", "mixed"])


@st.composite
def files(draw: st.DrawFn) -> tuple[str, bool]:
    """(text without BOM, has BOM): LF, CRLF or mixed endings, with or without a final newline."""
    kind = draw(FILE_EOL)
    lines = draw(st.lists(LINE, min_size=1, max_size=8))
    eols = [
        "\n" if kind == "lf" else "\r\n" if kind == "crlf" else draw(st.sampled_from(["\n", "\r\n"]))
        for _ in lines
    ]
    text = "".join(line + eol for line, eol in zip(lines, eols, strict=True))
    if draw(st.booleans()):
        text = text[: -len(eols[-1])]  # no final newline
    return text, draw(st.booleans())


def _cuts_crlf(text: str, i: int) -> bool:
    return 0 < i < len(text) and text[i - 1 : i + 1] == "\r\n"


_FAST = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much]


@settings(max_examples=200, deadline=None, suppress_health_check=_FAST)
@given(
    files(),
    st.data(),
    st.lists(LINE, max_size=4),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
    st.booleans(),
)
def test_property_bytes_outside_the_edited_span_never_change(
    root: Path,
    file: tuple[str, bool],
    data: st.DataObject,
    new_lines: list[str],
    new_eol: str,
    lf_old: bool,
    tail: bool,
) -> None:
    """H2 acceptance: for any file (LF, CRLF, mixed, BOM, no final newline) and any edit whose old_string
    is a piece of it (as the model copies it: with `\\n` or with the file's endings), every byte before
    and after the edited span is unchanged; a uniform file's new lines get its ending; a failed edit
    changes nothing."""
    text, bom = file
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, len(text)))
    assume(j > i and not _cuts_crlf(text, i) and not _cuts_crlf(text, j))
    old = text[i:j].replace("\r\n", "\n") if lf_old else text[i:j]
    new = new_eol.join(new_lines) + (new_eol if tail and new_lines else "")
    assume(old != new)
    before = (BOM if bom else b"") + text.encode()
    prefix, suffix = (BOM if bom else b"") + text[:i].encode(), text[j:].encode()
    out, after = _edit(root, before, old, new)  # the same f.txt, rewritten for each example
    if out.is_error:
        assert after == before
        assert "occurs" in out.content or "differ only in line endings" in out.content, out.content
        return
    assert after.startswith(prefix) and after.endswith(suffix)
    assert len(after) >= len(prefix) + len(suffix)
    span = after[len(prefix) : len(after) - len(suffix)]
    endings = set(EOL.findall(text))
    if len(endings) <= 1:  # a uniform file: the span is new_string in the file's style, exactly
        assert span == _expected_span(text, j, old, new, endings.pop() if endings else "\n").encode()


def _lf(s: str) -> str:
    return EOL.sub("\n", s)


def _expected_span(text: str, j: int, old: str, new: str, eol: str) -> str:
    """The oracle of a uniform file: the file's ending everywhere; at the end of the file, the final-newline
    state kept unless changing it is all the edit does."""
    body = new[: len(new) - (2 if new.endswith("\r\n") else 1)] if new.endswith("\n") else None
    if j == len(text) and not text.endswith("\n") and body and _lf(body) != _lf(old):
        return EOL.sub(eol, body)
    old_body = old[: len(old) - (2 if old.endswith("\r\n") else 1)]
    if j == len(text) and text.endswith("\n") and new and body is None and _lf(new) != _lf(old_body):
        return EOL.sub(eol, new) + eol
    return EOL.sub(eol, new)


@settings(max_examples=100, deadline=None, suppress_health_check=_FAST)
@given(files(), st.lists(LINE, max_size=5), st.sampled_from(["\n", "\r\n"]), st.booleans(), st.booleans())
def test_property_write_file_keeps_the_style_unless_the_content_chooses(
    root: Path, file: tuple[str, bool], lines: list[str], eol: str, tail: bool, own_bom: bool
) -> None:
    """H2 acceptance: write_file over an existing file keeps its BOM, and its CRLF when CRLF dominates,
    unless the content chooses (CRLF in it, or its own U+FEFF); the content's text is otherwise exact."""
    text, bom = file
    content = ("\ufeff" if own_bom else "") + eol.join(lines) + (eol if tail else "")
    before = (BOM if bom else b"") + text.encode()
    out, after = _write(root, before, content)
    assert not out.is_error
    crlf, lf = text.count("\r\n"), text.count("\n") - text.count("\r\n")
    expected = content
    if "\r\n" not in content and crlf > lf:
        expected = content.replace("\n", "\r\n")
    assert after == (BOM if bom and not own_bom else b"") + expected.encode()
