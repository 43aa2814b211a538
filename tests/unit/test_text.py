"""agentd/text.py: the escaping of approval texts (H20), lone surrogates and JSON depth (H19), and the flat
envelope scan of a request too deep to decode (H19, agentd/adapters/lsp/transport.py)."""

from __future__ import annotations

import json
import unicodedata

import pytest

from agentd.adapters.lsp.transport import envelope_of
from agentd.protocol.display import ESCAPED_RANGES
from agentd.text import (
    ESCAPED_SAMPLE,
    deeper_than,
    scrub_surrogates,
    surrogate_error,
    surrogate_problems,
    visible,
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("rm -rf ~ #\r\x1b[K$ ls", "rm -rf ~ #\\r\\x1b[K$ ls"),
        ('echo "\u202eevil\u202c" # safe', 'echo "\\u202eevil\\u202c" # safe'),  # Trojan Source
        ("cat /etc/pass\u200bwd", "cat /etc/pass\\u200bwd"),  # zero-width space
        ("rm\u00a0-rf /", "rm\\xa0-rf /"),  # a space that is not U+0020
        ("ls \U000e0041\U000e0042", "ls \\U000e0041\\U000e0042"),  # tag characters
        ("git\u2066 push\u2069", "git\\u2066 push\\u2069"),
        ("\ufeffpython x.py", "\\ufeffpython x.py"),
        ("café 中文 😀\tok", "café 中文 😀\tok"),  # visible text stays as it is
    ],
)
def test_visible_escapes_bidi_controls_and_invisible_characters(raw: str, shown: str) -> None:
    """H20: a command cannot look like another in an approval: every bidi control, invisible or
    non-ASCII space is shown as an escape; ordinary letters, CJK and emoji stay."""
    assert visible(raw, one_line=True) == shown
    assert visible(visible(raw)) == visible(raw)  # idempotent: escapes are printable ASCII


def test_every_kind_in_the_shared_sample_is_escaped() -> None:
    """H20: the sample the editor clients are tested with escapes to ASCII with no character left."""
    shown = visible(ESCAPED_SAMPLE, one_line=True)
    assert shown.isascii() and shown.count("\\") == len(ESCAPED_SAMPLE)
    assert visible("a\nb") == "a\nb" and visible("a\nb", one_line=True) == "a\\nb"


def test_lone_surrogates_are_found_and_replaced_at_any_depth() -> None:
    """H19: where lone surrogates are (dotted, document order) and the same value with U+FFFD."""
    value = {"path": "a\udcff", "todos": [{"content": "ok"}, {"content": "\ud800x"}], "k\udfff": 1}
    assert surrogate_problems(value) == [
        ("path", "U+DCFF"),
        ("todos.1.content", "U+D800"),
        ("k\ufffd", "a key"),
    ]
    assert scrub_surrogates(value) == {
        "path": "a\ufffd",
        "todos": [{"content": "ok"}, {"content": "\ufffdx"}],
        "k\ufffd": 1,
    }
    clean = {"a": ["b", 1]}
    assert scrub_surrogates(clean) is clean and surrogate_problems(clean) == []
    deep: object = "\udcff"
    for _ in range(5000):
        deep = [deep]
    assert len(surrogate_problems(deep)) == 1
    json.dumps(surrogate_error(surrogate_problems(value))).encode("utf-8")


def test_deeper_than_counts_container_levels_without_recursion() -> None:
    """H19: `{}` is one level; 100,000 levels are measured without a RecursionError."""
    assert not deeper_than({"a": [1, {"b": "c"}]}, 3) and deeper_than({"a": [1, {"b": []}]}, 3)
    deep: object = 1
    for _ in range(100_000):
        deep = {"a": deep}
    assert deeper_than(deep) and not deeper_than("x" * 10, 0)


def test_envelope_of_a_request_too_deep_to_decode() -> None:
    """H19: the top-level id and method are found by a flat scan; nested ones and non-scalar ids are not."""
    body = '{"jsonrpc":"2.0","params":{"id":9,"method":"no","x":' + "[" * 50_000 + "]" * 50_000
    assert envelope_of(body + '},"method":"a\\"b", "id" : "s\\u00e9"}') == {"method": 'a"b', "id": "sé"}
    assert envelope_of("[" * 100_000 + "]" * 100_000) == {}
    assert envelope_of('{"id":[1],"method":{}}') == {}


IGNORABLE_OUTSIDE_CATEGORIES = [
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2800, 0x2800),
    (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0FFF),
]  # fmt: skip


def test_the_escaped_table_is_the_unicode_categories_and_ignorables() -> None:
    """H20: `ESCAPED_RANGES` (which the editor clients get too) is exactly Cc but tab and newline, Cf, Cs,
    Zl, Zp, Zs but U+0020, plus the default-ignorables outside those categories (Unicode 14.0)."""
    if unicodedata.unidata_version != "14.0.0":
        pytest.skip(f"the table is Unicode 14.0 (Python 3.11); this Python has {unicodedata.unidata_version}")
    want: list[tuple[int, int]] = []
    # planes 4-13 are unassigned and 15-16 private use in Unicode 14.0: nothing there is escaped
    for cp in (*range(0x40000), *range(0xE0000, 0xF0000)):
        hit = cp not in (0x09, 0x0A, 0x20) and (
            unicodedata.category(chr(cp)) in ("Cc", "Cf", "Cs", "Zl", "Zp", "Zs")
            or any(lo <= cp <= hi for lo, hi in IGNORABLE_OUTSIDE_CATEGORIES)
        )
        if hit and want and want[-1][1] == cp - 1:
            want[-1] = (want[-1][0], cp)
        elif hit:
            want.append((cp, cp))
    assert tuple(want) == ESCAPED_RANGES
