"""A text file's style, kept by `edit_file` and `write_file` (issue 9 H2, case C17).

Owns: how a file's bytes become the text the tools work on and back (`decode`, `encode`: the UTF-8 BOM is
set aside and restored), line-ending-tolerant matching (`find_spans`), the rules that give an edit or a
whole new content the file's style (`replace_spans`, `conform`), and `newline_of` (the dominant ending).
Imports only the standard library; never pygls, lsprotocol, acp or `agentd.adapters`.

Rules:
- Matching: a line ending in `old_string` (`\\n` or `\\r\\n`) matches either ending in the file, so the
  model's `\\n` finds text in a CRLF file; everything else matches exactly. Uniqueness counts overlapping
  matches too (`aa` occurs twice in `aaa`); `replace_all` replaces non-overlapping ones, left to right.
- Only the matched span changes: every byte before and after it stays as it was, BOM included.
- The line endings of `new_string` take the file's: the i-th one becomes the i-th ending of the matched
  text, and the ones beyond those the last ending of the match (or the file's dominant ending when the
  match has none). An edit cannot change line endings; `write_file` can.
- The final-newline state survives an edit at the end of the file: a file without a final newline does
  not gain one, and a file with one does not lose it, unless that is all the edit changes.
- `write_file` over an existing file keeps its BOM and, when the file's dominant ending is CRLF, turns the
  content's `\\n` into CRLF, unless the content clearly chooses its own style: a content with any CRLF
  keeps its endings, a content that starts with U+FEFF carries its own BOM. The content's final newline is
  its own choice (a whole file is written as given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"
BOM_CHAR = "\ufeff"
CRLF, LF = "\r\n", "\n"
_EOL = re.compile(r"\r\n|\n")
_ANY_EOL = r"(?:\r\n|\n)"


@dataclass(frozen=True)
class Loaded:
    """A text file as the tools see it: `text` without the BOM, `bom` whether the bytes had one."""

    text: str
    bom: bool = False


def decode(data: bytes) -> Loaded:
    """UTF-8 `data` as text with its BOM set aside. Raises `UnicodeDecodeError` for anything else."""
    if data.startswith(BOM):
        return Loaded(data[len(BOM) :].decode("utf-8"), True)
    return Loaded(data.decode("utf-8"), False)


def encode(text: str, bom: bool) -> bytes:
    """The bytes of `text` (UTF-8), with the BOM first when `bom`. Raises `UnicodeEncodeError` for a lone
    surrogate."""
    return (BOM if bom else b"") + text.encode("utf-8")


def newline_of(text: str, default: str = LF) -> str:
    """The file's dominant line ending: CRLF when it has more CRLF than bare LF endings, LF when it has
    more LF; `default` when it has none (or as many of each)."""
    crlf = text.count(CRLF)
    lf = text.count(LF) - crlf
    if crlf == lf:
        return default
    return CRLF if crlf > lf else LF


def _pattern(old: str) -> re.Pattern[str]:
    return re.compile(_ANY_EOL.join(re.escape(piece) for piece in _EOL.split(old)))


def find_spans(text: str, old: str) -> list[tuple[int, int]]:
    """Where `old` occurs in `text` as `(start, end)` character offsets, line endings matched loosely (see
    the module docstring); non-overlapping, left to right (what `replace_all` replaces). `old` must not be
    empty."""
    return [m.span() for m in _pattern(old).finditer(text)]


def count_occurrences(text: str, old: str) -> int:
    """How many places `old` matches at, overlapping ones included: `aa` occurs twice in `aaa`, so an edit
    of it is ambiguous. `old` must not be empty."""
    return sum(1 for _ in re.finditer(f"(?=(?:{_pattern(old).pattern}))", text))


def _restyle(new: str, matched: str, fallback: str) -> str:
    """`new` with its line endings taken from `matched` (position by position), then `fallback`."""
    endings = _EOL.findall(matched)
    pieces = _EOL.split(new)
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        out.append(endings[i] if i < len(endings) else (endings[-1] if endings else fallback))
        out.append(piece)
    return "".join(out)


def _same(a: str, b: str) -> bool:
    """Equal once line endings are ignored."""
    return _EOL.sub(LF, a) == _EOL.sub(LF, b)


def _trailing_eol(text: str) -> str:
    return CRLF if text.endswith(CRLF) else LF if text.endswith(LF) else ""


def _keep_final_newline(text: str, end: int, old: str, new: str, eol: str) -> str:
    """Apply the final-newline rule to the restyled `new` of a span ending at `end`; `eol` is the
    ending to add back (the match's last one)."""
    if end != len(text) or not new:
        return new
    new_eol = _trailing_eol(new)
    body = new[: len(new) - len(new_eol)]
    if not _trailing_eol(text):  # no final newline: do not gain one, unless that is the whole edit
        return body if new_eol and body and not _same(body, old) else new
    old_eol = _trailing_eol(old)  # the match ends at the final newline, so `old` ends with an ending
    if not new_eol and old_eol and not _same(new, old[: len(old) - len(old_eol)]):
        return new + eol
    return new


def replace_spans(text: str, spans: list[tuple[int, int]], old: str, new: str) -> str:
    """`text` with each span (from `find_spans(text, old)`) replaced by `new` in the file's style; the
    characters outside the spans are unchanged."""
    fallback = newline_of(text)
    out, pos = [], 0
    for start, end in spans:
        matched = text[start:end]
        styled = _restyle(new, matched, fallback)
        last = (_EOL.findall(matched) or [fallback])[-1]
        out += [text[pos:start], _keep_final_newline(text, end, old, styled, last)]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def conform(content: str, old: Loaded | None) -> Loaded:
    """What `write_file` writes over `old` (None: a new file, written as given): see the module docstring."""
    if old is None:
        return Loaded(content, False)
    if CRLF not in content and LF in content and newline_of(old.text) == CRLF:
        content = content.replace(LF, CRLF)
    return Loaded(content, old.bom and not content.startswith(BOM_CHAR))
