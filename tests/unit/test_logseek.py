"""break16 F4: the log is read from the end (`iter_lines_back`) and a record found by seq (`find_seq`, a binary
search) without reading the rest: exact on lines longer than a read, at the log's edges, and for seqs that
are not there."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentd.persistence.logseek import find_seq, head_at, iter_lines_back


def _log(tmp_path: Path, sizes: list[int]) -> tuple[int, list[tuple[int, bytes]], int]:
    lines, at, out = [], 0, []
    for seq, size in enumerate(sizes, 1):
        rec = {"v": 1, "seq": seq, "at": "2026-01-01T00:00:00Z", "kind": "message", "messageId": "m",
               "message": {"role": "assistant" if seq % 2 else "user", "content": "x" * size}}  # fmt: skip
        line = json.dumps(rec, separators=(",", ":")).encode() + b"\n"
        out.append((at, line))
        lines.append(line)
        at += len(line)
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(lines))
    return os.open(path, os.O_RDONLY), out, at


def test_lines_come_back_last_first_with_their_offsets(tmp_path: Path) -> None:
    """break16 F4: every line, last first, offsets exact, lines of 200 KiB (longer than a read) included;
    a range that starts mid-log starts there."""
    fd, lines, size = _log(tmp_path, [10, 200_000, 5, 70_000, 1, 3, 150_000, 2])
    try:
        assert list(iter_lines_back(fd, 0, size)) == lines[::-1]
        assert list(iter_lines_back(fd, lines[2][0], lines[6][0])) == lines[2:6][::-1]
        assert list(iter_lines_back(fd, 0, 0)) == []
    finally:
        os.close(fd)


def test_find_seq_finds_every_record_and_nothing_else(tmp_path: Path) -> None:
    """break16 F4: each seq's offset; None for 0, a negative seq and one past the log; `head_at` gives the
    record's seq, kind and role without parsing it."""
    fd, lines, size = _log(tmp_path, [10, 200_000, 5, 70_000, 1, 3, 150_000, 2, 9, 9, 9])
    try:
        assert [find_seq(fd, size, seq) for seq in range(1, len(lines) + 1)] == [at for at, _ in lines]
        assert [find_seq(fd, size, seq) for seq in (0, -1, len(lines) + 1)] == [None, None, None]
        assert head_at(fd, lines[3][0]) == (4, "message", "user")
        assert head_at(fd, lines[3][0] + 1) is None
    finally:
        os.close(fd)
