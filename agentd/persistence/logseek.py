"""Reading a session log from the end and finding a record by seq, without reading the rest (issue 16;
break16 F4: a page of `agentd/session/history` costs about its own size, whatever the log's).

Owns: `iter_lines_back` (lines last first, 64 KiB reads), `find_seq` (binary search on the seqs at line
starts: O(log size) small reads), `head_at` (seq, kind, role of the record at an offset from its line's
head). The envelope pattern is agentd/persistence/logindex.py's. Imports only agentd.persistence.logindex
from agentd.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from agentd.persistence.logindex import _ENVELOPE, read_line

_BACK_CHUNK = 64 << 10
_SEQ_HEAD = re.compile(rb'\{"v":\d+,"seq":(\d+),')


def iter_lines_back(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of the lines of the file in [start, end), last first, read backwards in 64 KiB chunks
    (a page of history reads what it shows, not the log before it; issue 16). `start` and `end` must be
    where lines start (or the file's end)."""
    pos, tail = end, b""
    while pos > start:
        n = min(_BACK_CHUNK, pos - start)
        pos -= n
        buf = read_line(fd, pos, n) + tail
        cut = 0 if pos == start else buf.find(b"\n") + 1
        if pos > start and cut == 0:
            tail = buf  # one line longer than what was read so far
            continue
        tail, complete, at = buf[:cut], buf[cut:], pos + cut
        lines = complete.splitlines(keepends=True)
        offsets = []
        for line in lines:
            offsets.append(at)
            at += len(line)
        yield from zip(reversed(offsets), reversed(lines), strict=True)


def _line_start_from(fd: int, pos: int, end: int) -> int | None:
    """The offset of the first line that starts at or after `pos` (< `end`), None if none does."""
    if pos <= 0:
        return 0 if end > 0 else None
    at = pos - 1
    while at < end:
        chunk = os.pread(fd, min(_BACK_CHUNK, end - at), at)
        if not chunk:
            return None
        nl = chunk.find(b"\n")
        if nl >= 0:
            return at + nl + 1 if at + nl + 1 < end else None
        at += len(chunk)
    return None


def _seq_at(fd: int, offset: int) -> int | None:
    m = _SEQ_HEAD.match(os.pread(fd, 128, offset))
    return int(m.group(1)) if m else None


def find_seq(fd: int, end: int, seq: int) -> int | None:
    """The byte offset of the record `seq` in a log of `end` bytes, by binary search on the seqs at line
    starts (they increase with the offset): O(log size) small reads, nothing parsed but each line's head.
    None when no record has that seq (or a line's head is not agentd's envelope)."""
    lo, hi = 0, end
    while lo < hi:
        mid = (lo + hi) // 2
        at = _line_start_from(fd, mid, end)
        found = _seq_at(fd, at) if at is not None else None
        if at is not None and found is None:
            return None
        if at is None or (found is not None and found >= seq):
            hi = mid
        else:
            lo = mid + 1
    at = _line_start_from(fd, lo, end)
    return at if at is not None and _seq_at(fd, at) == seq else None


def head_at(fd: int, offset: int) -> tuple[int, str, str | None] | None:
    """The seq, kind and (for a `message`) role of the record at `offset`, from its line's first 4 KiB
    (agentd's envelope, not parsed); None when that is not a record's head."""
    m = _ENVELOPE.match(os.pread(fd, 4096, offset))
    if m is None:
        return None
    role: bytes | None = m.group(5)
    return int(m.group(2)), m.group(4).decode(), role.decode() if role else None
