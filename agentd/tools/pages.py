"""One page of search results: offset, limit and a size budget, with what is hidden stated (issue 11).

Owns: `Page`, `page_of()` (one line per result: paths, `path:count`) and `render_lines()` (matching lines
as `path:line:text`, context lines as `path-line-text`, ripgrep's notation, `--` between groups), and the
footer texts that state how many results are not shown and the `offset` that shows the next ones.
The budget is in bytes of UTF-8 (`tools.output_max_bytes`, 32 KiB: about 8,000 tokens at agentd's
estimate of 4 bytes a token, `core/tokens.py`). Results keep the order they are given in, so a caller that
sorts them gets stable pages. Imports only the standard library; never pygls, lsprotocol, acp or
`agentd.adapters`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentd.tools.ripgrep import lines_of

K = TypeVar("K")


@dataclass
class Page:
    """`text`: the rendered page with its footer; `shown`: results on it; `hidden`: results after it;
    `total`: all results; `locations`: `{"path", "line"?}` of the shown results (absolute paths)."""

    text: str
    shown: int
    hidden: int
    total: int
    locations: list[dict[str, Any]] = field(default_factory=list)


def footer(noun: str, tool: str, offset: int, shown: int, total: int, budget_cut: bool) -> str:
    """The last line of a page that does not show everything, e.g.
    `[matches 1-50 of 100000 shown; 99950 more not shown: call grep with offset=50 for the next ones]`."""
    first, last = offset + 1, offset + shown
    hidden = total - last
    if shown == 0:
        return f"[no {noun} at offset {offset}: there are {total}; call {tool} with a smaller offset]"
    head = f"[{noun} {first}-{last} of {total} shown"
    if hidden <= 0:
        return head + "]"
    why = " (size limit reached)" if budget_cut else ""
    return f"{head}{why}; {hidden} more not shown: call {tool} with offset={last} for the next ones]"


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass")) + 1


def page_of(
    items: Sequence[K],
    offset: int,
    limit: int | None,
    budget: int,
    *,
    text: Callable[[K], str],
    locate: Callable[[K], str],
    noun: str,
    tool: str,
) -> Page:
    """A page of one-line results: from `offset`, at most `limit` of them, within `budget` bytes (at least
    one result is always shown when there is one). `text(item)` is its line, `locate(item)` its absolute
    path; both are called for the shown items only."""
    total = len(items)
    out: list[str] = []
    used, cut = 0, False
    for item in items[offset : offset + limit if limit else None]:
        line = text(item)
        if out and used + _size(line) > budget:
            cut = True
            break
        out.append(line)
        used += _size(line)
    shown = len(out)
    if offset or shown < total:
        out.append(footer(noun, tool, offset, shown, total, cut))
    locations: list[dict[str, Any]] = [{"path": locate(x)} for x in items[offset : offset + shown]]
    return Page("\n".join(out), shown, total - offset - shown, total, locations)


class _Renderer:
    """Renders matches one at a time, each with the context lines around it that are not shown yet."""

    def __init__(self, context: int) -> None:
        self.context = context
        self.out: list[str] = []
        self.last: tuple[str, int] | None = None  # (path, line) of the last rendered line

    def chunk(self, path: str, lines: Sequence[tuple[int, bool, str]], i: int) -> tuple[list[str], int]:
        """The lines match `lines[i]` adds: context before it (not shown yet), itself, context after it
        up to the next match; and the number of the last of them."""
        m = lines[i][0]
        start = i
        while start > 0 and not lines[start - 1][1] and lines[start - 1][0] >= m - self.context:
            start -= 1
        end = i + 1
        while end < len(lines) and not lines[end][1] and lines[end][0] <= m + self.context:
            end += 1
        seen = self.last[1] if self.last is not None and self.last[0] == path else 0
        picked = [ln for ln in lines[start:end] if ln[0] > seen]
        text = []
        if self.context and self.last is not None and picked:
            if not (self.last[0] == path and picked[0][0] == self.last[1] + 1):
                text.append("--")
        for num, match, body in picked:
            sep = ":" if match else "-"
            text.append(f"{path}{sep}{num}{sep}{body}")
        return text, lines[end - 1][0]


def render_lines(
    files: Sequence[tuple[K, bytes, int]],
    offset: int,
    limit: int | None,
    budget: int,
    context: int,
    *,
    name: Callable[[K], str],
    locate: Callable[[K], str],
    noun: str,
    tool: str,
) -> Page:
    """A page of a content search. `files`: `(key, rg's block of lines, matches in it)` in path order;
    `name(key)` is the path shown, `locate(key)` the absolute one. Results are the matching lines (context
    lines come with them). Within `budget` bytes, at least one match is always shown. Files before
    `offset` are skipped by their counts and only the page's files are split and decoded, so the cost is
    O(files + page)."""
    total = sum(n for _, _, n in files)
    stop = offset + limit if limit else total
    r = _Renderer(context)
    index, used, cut = 0, 0, False
    locations: list[dict[str, Any]] = []
    for key, body, count in files:
        if index + count <= offset:
            index += count
            continue
        path, lines = name(key), lines_of(body)
        for i, (num, match, _) in enumerate(lines):
            if not match:
                continue
            index += 1
            if index <= offset:
                continue
            if index > stop:
                break
            chunk, last = r.chunk(path, lines, i)
            size = sum(_size(t) for t in chunk)
            if locations and used + size > budget:
                cut = True
                break
            r.out += chunk
            r.last = (path, last)
            used += size
            locations.append({"path": locate(key), "line": num})
        if index > stop or cut:
            break
    shown = len(locations)
    if offset or shown < total:
        r.out.append(footer(noun, tool, offset, shown, total, cut))
    return Page("\n".join(r.out), shown, total - offset - shown, total, locations)
