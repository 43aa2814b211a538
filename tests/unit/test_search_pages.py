"""Pages of search results, the glob filter and ripgrep's output parsers (issue 11): whole texts compared."""

from __future__ import annotations

import pytest

from agentd.tools.globs import GlobFilter, InvalidGlob, expand_braces, names_hidden
from agentd.tools.pages import footer, page_of, render_lines
from agentd.tools.ripgrep import lines_of, match_count, parse_counts, parse_files, parse_paths


def block(*lines: tuple[int, str, bool]) -> bytes:
    return b"\n".join(f"{n}{':' if m else '-'}{t}".encode() for n, t, m in lines)


def locate(key: str) -> str:
    return "/w/" + key


def test_parse_rg_null_output() -> None:
    data = b"./a b.py\x003:x = 1\n4-ctx\r\n5:\n\n./odd\nname\x001:hit\n"
    files = parse_files(data)
    assert {p: lines_of(b) for p, b in files.items()} == {
        b"./a b.py": [(3, True, "x = 1"), (4, False, "ctx"), (5, True, "")],
        b"./odd\nname": [(1, True, "hit")],
    }
    assert [match_count(files[b"./a b.py"], True), match_count(files[b"./odd\nname"], False)] == [2, 1]
    assert parse_files(b"") == {}
    assert parse_counts(b"./a\x003\n./b\x0012\n") == {b"./a": 3, b"./b": 12}
    assert parse_paths(b"./a\x00./b c\x00") == [b"./a", b"./b c"]


def test_page_of_budget_limit_offset_and_footer() -> None:
    items = [f"f{i}.py" for i in range(10)]
    page = page_of(items, 0, None, 1000, text=str, locate=locate, noun="files", tool="glob")
    assert (page.shown, page.hidden, page.text.count("\n")) == (10, 0, 9)
    page = page_of(items, 0, None, 20, text=str, locate=locate, noun="files", tool="glob")
    assert page.text == (
        "f0.py\nf1.py\nf2.py\n[files 1-3 of 10 shown (size limit reached); 7 more not shown:"
        " call glob with offset=3 for the next ones]"
    )
    assert page.locations == [{"path": "/w/f0.py"}, {"path": "/w/f1.py"}, {"path": "/w/f2.py"}]
    page = page_of(items, 8, 5, 1000, text=str, locate=locate, noun="files", tool="glob")
    assert page.text == "f8.py\nf9.py\n[files 9-10 of 10 shown]"
    page = page_of(items, 12, None, 1000, text=str, locate=locate, noun="files", tool="glob")
    assert page.text == "[no files at offset 12: there are 10; call glob with a smaller offset]"
    page = page_of(items, 0, None, 1, text=str, locate=locate, noun="files", tool="glob")
    assert page.shown == 1  # one result is always shown, whatever the budget


def test_render_lines_context_and_separators() -> None:
    """Context lines come with their match once; `--` separates groups that do not touch."""
    a = block(
        (1, "c1", False),
        (2, "m2", True),
        (3, "m3", True),
        (4, "c4", False),
        (8, "c8", False),
        (9, "m9", True),
    )
    b = block((5, "m5", True))
    files = [("a.py", a, 3), ("b.py", b, 1)]
    page = render_lines(files, 0, None, 10_000, 1, name=str, locate=locate, noun="matches", tool="grep")
    assert page.text == "a.py-1-c1\na.py:2:m2\na.py:3:m3\na.py-4-c4\n--\na.py-8-c8\na.py:9:m9\n--\nb.py:5:m5"
    assert page.locations == [
        {"path": "/w/a.py", "line": 2},
        {"path": "/w/a.py", "line": 3},
        {"path": "/w/a.py", "line": 9},
        {"path": "/w/b.py", "line": 5},
    ]
    page = render_lines(files, 1, 2, 10_000, 1, name=str, locate=locate, noun="matches", tool="grep")
    assert page.text == (
        "a.py:3:m3\na.py-4-c4\n--\na.py-8-c8\na.py:9:m9\n"
        "[matches 2-3 of 4 shown; 1 more not shown: call grep with offset=3 for the next ones]"
    )
    page = render_lines(files, 0, None, 10_000, 0, name=str, locate=locate, noun="matches", tool="grep")
    assert page.text == "a.py:2:m2\na.py:3:m3\na.py:9:m9\nb.py:5:m5"


def test_footer_texts() -> None:
    assert footer("matches", "grep", 0, 50, 100000, True) == (
        "[matches 1-50 of 100000 shown (size limit reached); 99950 more not shown:"
        " call grep with offset=50 for the next ones]"
    )
    assert footer("files", "glob", 10, 5, 15, False) == "[files 11-15 of 15 shown]"


def test_glob_filter() -> None:
    g = GlobFilter("src/**/*.{ts,tsx}")
    assert [g.matches(p) for p in ("src/a.ts", "src/x/b.tsx", "lib/src/a.ts", "src/a.js")] == [
        True,
        True,
        False,
        False,
    ]
    assert g.rg_flags() == [
        "--type-add=agentdglob:*.ts",
        "--type-add=agentdglob:*.tsx",
        "--type=agentdglob",
    ]
    star = GlobFilter("*")
    assert [star.matches(p) for p in ("a", "d/b", ".env", "d/.x", ".git/config")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    hid = GlobFilter(".github/**")
    assert (hid.hidden, hid.matches(".github/ci.yml"), hid.matches("ci.yml"), hid.rg_flags()) == (
        True,
        True,
        False,
        [],
    )
    assert expand_braces("{a,b{c,d}}.x") == ["a.x", "bc.x", "bd.x"]
    assert names_hidden("**/.env") and not names_hidden("../x/*.py") and not names_hidden(None)
    for bad, why in (("{a", "unclosed '{'"), ("a}", "unmatched '}'"), ("!x", "a leading '!'")):
        with pytest.raises(InvalidGlob) as err:
            GlobFilter(bad)
        assert str(err.value).startswith(why)
