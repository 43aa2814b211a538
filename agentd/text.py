"""Text safety: what agentd shows a person (`visible`) and what it may store or send (valid Unicode, JSON
of a bounded depth). LEAF: imports only the standard library and `agentd.protocol.display`.

Owns four rules (issue 9, H19 and H20):

- `visible(text)`: the one escaping function of every approval text and operator line (the terminal
  approver, the LSP `requestPermission` params and `showMessageRequest` fallback, tool titles, `[Tool]`
  lines). A character that could make a command or a path look like another is shown as an escape instead
  of itself: C0/C1 control characters and DEL (`\\x1b`), Unicode bidi controls (`\\u202e`, Trojan Source,
  CVE-2021-42574), zero-width and other invisible or default-ignorable characters (`\\u200b`, `\\ufeff`,
  `\\U000e0041`), line/paragraph separators, and every space other than U+0020 (`\\xa0`): the table of
  `agentd.protocol.display`, which the editor clients get too. Tabs and newlines stay (`one_line=True`
  escapes newlines too). Escapes are printable ASCII, so `visible` is idempotent.
- `terminal_safe(text)`: what may reach a terminal of everything else agentd writes there (the model's
  streamed text, transcripts, session titles, command output, log lines): C0 control characters but tab
  and newline, DEL and C1 controls are shown as escapes, so a model reply or a file cannot clear the
  screen, set the window title, write the clipboard (OSC 52) or forge an operator line with `\r`
  (H20 class, break9). A CRLF is a newline. Other characters stay (prose may be right-to-left).
- Lone surrogates (`"\\udcff"`: what Python makes of undecodable bytes or of a JSON `\\udcff` escape) are not
  Unicode text: UTF-8 cannot encode them, so a session log, an audit record or an API request holding one
  fails. `surrogate_problems()` names where they are; `scrub_surrogates()` replaces each with U+FFFD.
- JSON nested deeper than `MAX_JSON_DEPTH` levels (a tool input `{"a": {"a": …}}` 700 deep) cannot be
  copied, stored and replayed safely (Python's recursion limit); `deeper_than()` tells, without recursion.
  No tool input needs more than a few levels.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from agentd.protocol.display import ESCAPED_RANGES

REPLACEMENT = "\ufffd"
MAX_JSON_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")

_STARTS = [lo for lo, _ in ESCAPED_RANGES]

# One of each kind that must be escaped (the editor clients' tests use the same list).
ESCAPED_SAMPLE = (
    "\x00\x07\x1b\x7f\x85\x9b\xa0\xad\u061c\u115f\u180e\u2000\u200b\u200d\u200e\u200f\u2028\u2029"
    "\u202a\u202e\u2060\u2066\u2069\u206f\u2800\u3000\u3164\ufe0f\ufeff\uffa0\U000e0001\U000e0041\U000e007f"
)


def escaped(cp: int) -> bool:
    """Is code point `cp` shown as an escape (`agentd.protocol.display.ESCAPED_RANGES`)?"""
    i = bisect.bisect_right(_STARTS, cp) - 1
    return i >= 0 and cp <= ESCAPED_RANGES[i][1]


_ASCII = {c: f"\\x{c:02x}" for c in range(0x80) if escaped(c)}
_ASCII_TABLE = {**_ASCII, 0x0D: "\\r"}
_ASCII_ONE_LINE = {**_ASCII_TABLE, 0x0A: "\\n"}


def _escape(ch: str) -> str:
    cp = ord(ch)
    if ch == "\r":
        return "\\r"
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` safe to show a person (see the module docstring): every character of `ESCAPED_RANGES` becomes
    `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN` (a CR `\\r`: it would rewrite the line on a terminal,
    `rm -rf ~ #\\r$ ls`). Tabs stay; newlines stay unless `one_line` (then `\\n`)."""
    if text.isascii():
        return text.translate(_ASCII_ONE_LINE if one_line else _ASCII_TABLE)
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n" if one_line else ch)
        else:
            out.append(_escape(ch) if escaped(ord(ch)) else ch)
    return "".join(out)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with every control character but tab and newline (C0, DEL, C1) shown as `\\xNN` (a CR as
    `\\r`, a CRLF as a newline): the rule of every stream agentd writes to a terminal (module docstring).
    Idempotent; printable text, tabs and newlines are unchanged."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: _escape(m.group()), text)


# ---- lone surrogates ---------------------------------------------------------------------------------


def has_surrogates(text: str) -> bool:
    """True when `text` holds a lone surrogate (U+D800..U+DFFF), so UTF-8 cannot encode it."""
    return not text.isascii() and _SURROGATE.search(text) is not None


_BAD_KEY = object()  # a stack entry: the key at this location holds a lone surrogate


def surrogate_problems(value: Any) -> list[tuple[str, str]]:
    """Every string (dict keys included) in the JSON-like `value` that holds a lone surrogate, as
    `(dotted location, "U+DCFF")` pairs (`"a key"` for a key) in document order (`todos.0.content`;
    `input` for `value` itself); the locations hold U+FFFD instead. Iterative: any nesting depth is fine."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, loc = stack.pop()
        if item is _BAD_KEY:
            found.append((scrub_surrogates(loc), "a key"))
        elif isinstance(item, str):
            bad = _SURROGATE.search(item) if not item.isascii() else None
            if bad is not None:
                found.append((scrub_surrogates(loc or "input"), f"U+{ord(bad.group()):04X}"))
        elif isinstance(item, dict):
            children: list[tuple[Any, str]] = []
            for key, child in item.items():
                where = f"{loc}.{key}" if loc else str(key)
                if isinstance(key, str) and has_surrogates(key):
                    children.append((_BAD_KEY, where))
                children.append((child, where))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(c, f"{loc}.{i}" if loc else str(i)) for i, c in enumerate(item)]))
    return found


def scrub_surrogates(value: Any) -> Any:
    """A copy of the JSON-like `value` with every lone surrogate (in strings and dict keys) replaced by
    U+FFFD; containers are copied only when something changes. Iterative, so any nesting depth is fine."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value) if has_surrogates(value) else value
    if not surrogate_problems(value):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, str):
            parent[slot] = scrub_surrogates(item)
        elif isinstance(item, dict):
            new: dict[Any, Any] = {}
            parent[slot] = new
            for key, child in item.items():
                fixed = scrub_surrogates(key) if isinstance(key, str) else key
                new[fixed] = None
                stack.append((child, new, fixed))
        elif isinstance(item, (list, tuple)):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            stack.extend((child, items, i) for i, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


def surrogate_error(problems: list[tuple[str, str]]) -> str:
    """The model-facing `invalid_arguments` text (CONTRACTS.md §11) for input holding lone surrogates."""
    parts = [
        f"{loc}: not valid Unicode (a lone surrogate {what}, e.g. from undecodable bytes); send UTF-8 text"
        if what != "a key"
        else f"{loc}: a key that is not valid Unicode (a lone surrogate); send UTF-8 text"
        for loc, what in problems
    ]
    return "invalid_arguments: " + "; ".join(parts)


def deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON-like `value` nests containers more than `limit` levels deep (`{}` is 1 level,
    `{"a": []}` 2). Iterative; stops at the first path that is too deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, (list, tuple)):
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in item)
    return False
