"""The resume index of a session log (`sessions/<id>/log.idx`, issue 16; CONTRACTS.md §9).

Owns: `Tally`, the whole-log facts a resume needs from before its start point, kept current record by record
(the `prompt` count, the summed `usage` by model, the number of compactions and the messages they replaced,
every tool_use id, and where the sparse records are: `meta`, `grant`, `mode`, `title`, `checkpoint`,
`rewind`, `instructions`, `todos`, `compaction`); `Entry`, one line of `log.idx` per `compaction` record
(its seq, byte offset, length and sha256, where its turn starts, the Tally's counts up to it, and the
tool_use ids and sparse records since the previous entry); `load_entries` (read and verify) and the line
encoding. `agentd/persistence/store.py` writes entries, only after the record they index is durable; a
resume (agentd/core/replay.py) reads the sparse records through them and the log from the last compaction
on, so a 100 MB log is not read again. The index is a cache: a line that is torn, does not parse, or does
not point at a `compaction` record with its seq and hash ends it there; the store then scans the log from
that point and rewrites the file (temp file, fsync, rename). Permission records found through it are checked
like any other (their signature, agentd/permissions/signing.py). Imports only agentd.failpoints,
agentd.errors, agentd.persistence.paths and agentd.persistence.records from agentd.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd import failpoints
from agentd.errors import StorageError
from agentd.persistence.paths import atomic_write, open_private, write_all
from agentd.persistence.records import LOG_VERSION, decode_line, version_error

log = logging.getLogger(__name__)

INDEX_VERSION = 1
SPARSE_KINDS = frozenset(
    {"meta", "grant", "mode", "title", "checkpoint", "rewind", "instructions", "todos", "compaction"}
)
_CHUNK = 1 << 20


@dataclass
class Sparse:
    """Where one sparse record is: its seq, byte offset, byte length (with its `\\n`) and kind."""

    seq: int
    offset: int
    length: int
    kind: str

    def to_json(self) -> list[Any]:
        return [self.seq, self.offset, self.length, self.kind]


@dataclass
class Tally:
    """Whole-log facts up to some record (module docstring). `usage`: model (`|split` when the 1h/5m cache
    write counts are given) -> {"n": responses, "unknownRead": responses without a cache read count, and the
    sum of every count of the usage records}; inherited usage (a fork's copies) is left out. `turn`: the byte
    offset where the current turn starts (its checkpoints before its `prompt`), `first_turn` the first's."""

    prompts: int = 0
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    compactions: int = 0
    replaced: int = 0
    tool_use_ids: set[str] = field(default_factory=set)
    sparse: list[Sparse] = field(default_factory=list)
    turn: int = 0
    first_turn: int | None = None
    fresh_ids: list[str] = field(default_factory=list)  # tool_use ids first seen since the last entry
    sparse_mark: int = 0  # len(sparse) at the last entry
    _checkpoints_from: int | None = None  # offset of a run of checkpoints just before the next record

    def observe(self, rec: Mapping[str, Any], offset: int, length: int) -> None:
        """Count one record (`rec`: the decoded record or `{"seq", "kind", **payload}`) at `offset`."""
        kind, seq = rec.get("kind"), rec.get("seq")
        if not isinstance(kind, str) or not isinstance(seq, int):
            return
        if kind in SPARSE_KINDS:
            self.sparse.append(Sparse(seq, offset, length, kind))
        if kind == "prompt":
            self.prompts += 1
            self.turn = self._checkpoints_from if self._checkpoints_from is not None else offset
            self.first_turn = self.turn if self.first_turn is None else self.first_turn
        elif kind == "usage" and not rec.get("inherited"):
            self._usage(rec.get("usage"), str(rec.get("model") or ""))
        elif kind == "compaction":
            self.compactions += 1
            self.replaced += int(rec.get("replaced") or 0)
        elif kind == "message":
            for tid in rec[TOOL_USE_IDS] if TOOL_USE_IDS in rec else tool_use_ids_of(rec):
                if tid not in self.tool_use_ids:
                    self.tool_use_ids.add(tid)
                    self.fresh_ids.append(tid)
        if kind == "checkpoint":
            self._checkpoints_from = offset if self._checkpoints_from is None else self._checkpoints_from
        else:
            self._checkpoints_from = None

    def _usage(self, usage: Any, model: str) -> None:
        if not isinstance(usage, dict):
            return
        split = (
            usage.get("cacheCreation1hInputTokens") is not None
            or usage.get("cacheCreation5mInputTokens") is not None
        )
        sums = self.usage.setdefault(model + ("|split" if split else ""), {"n": 0, "unknownRead": 0})
        sums["n"] += 1
        sums["unknownRead"] += usage.get("cacheReadInputTokens") is None
        for key, value in usage.items():
            if type(value) is int:
                sums[key] = sums.get(key, 0) + value

    def entry(self, seq: int, offset: int, line: bytes) -> Entry:
        """The entry of the compaction record `line` (seq `seq` at `offset`, already observed); what was
        gained since the previous entry then starts over."""
        entry = Entry(seq, offset, len(line), hashlib.sha256(line).hexdigest(), json.loads(json.dumps(self.counts())),
                      self.fresh_ids, self.sparse[self.sparse_mark :])  # fmt: skip
        self.fresh_ids, self.sparse_mark = [], len(self.sparse)
        return entry

    def resume(self, entries: list[Entry]) -> None:
        """Take the state of the last of `entries` (the loaded index, in order) as this tally's."""
        last = entries[-1].counts
        self.prompts, self.compactions, self.replaced = last["prompts"], last["compactions"], last["replaced"]
        self.usage = {m: dict(v) for m, v in last["usage"].items()}
        self.turn, self.first_turn = last["turn"], last["firstTurn"]
        for e in entries:
            self.tool_use_ids.update(e.ids)
            self.sparse.extend(e.sparse)
        self.sparse_mark = len(self.sparse)

    def counts(self) -> dict[str, Any]:
        """The cumulative part of an entry (JSON)."""
        return {"prompts": self.prompts, "usage": self.usage, "compactions": self.compactions,
                "replaced": self.replaced, "turn": self.turn, "firstTurn": self.first_turn}  # fmt: skip


def tool_use_ids_of(rec: Mapping[str, Any]) -> list[str]:
    """The tool_use ids of a `message` record's assistant message (any other record: none)."""
    msg = rec.get("message")
    if (
        not isinstance(msg, dict)
        or msg.get("role") != "assistant"
        or not isinstance(msg.get("content"), list)
    ):
        return []
    return [str(b.get("id")) for b in msg["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


@dataclass
class Entry:
    """One line of `log.idx`: the `compaction` record `seq` at `offset` (`length` bytes with its `\\n`,
    `sha256` of them), the Tally's counts up to and including it, and what it gained since the previous
    entry (`ids`, `sparse`)."""

    seq: int
    offset: int
    length: int
    sha256: str
    counts: dict[str, Any]
    ids: list[str]
    sparse: list[Sparse]

    def encode(self) -> bytes:
        return json.dumps(
            {"v": INDEX_VERSION, "seq": self.seq, "offset": self.offset, "length": self.length,
             "sha256": self.sha256, **self.counts, "ids": self.ids,
             "sparse": [s.to_json() for s in self.sparse]},
            ensure_ascii=False, separators=(",", ":"),
        ).encode("utf-8", "surrogateescape") + b"\n"  # fmt: skip

    @classmethod
    def decode(cls, line: bytes) -> Entry:
        """Raises ValueError (KeyError, TypeError included) for a line that is not an entry."""
        d = json.loads(line)
        if d.get("v") != INDEX_VERSION:
            raise ValueError(f"index version {d.get('v')!r}")
        counts = {k: d[k] for k in ("prompts", "usage", "compactions", "replaced", "turn", "firstTurn")}
        sparse = [Sparse(int(s), int(o), int(n), str(k)) for s, o, n, k in d["sparse"]]
        return cls(int(d["seq"]), int(d["offset"]), int(d["length"]), str(d["sha256"]), counts,
                   [str(i) for i in d["ids"]], sparse)  # fmt: skip


def read_line(fd: int, offset: int, length: int) -> bytes:
    """`length` bytes of the file at `offset` (os.pread; fewer at its end)."""
    parts, got = [], 0
    while got < length:
        chunk = os.pread(fd, length - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def verify(fd: int, entry: Entry) -> bool:
    """Whether `entry` points at its compaction record: the bytes at its offset hash to its sha256, end in
    `\\n` and decode to a `compaction` record with its seq."""
    line = read_line(fd, entry.offset, entry.length)
    if (
        len(line) != entry.length
        or not line.endswith(b"\n")
        or hashlib.sha256(line).hexdigest() != entry.sha256
    ):
        return False
    try:
        rec = decode_line(line)
    except ValueError:
        return False
    return rec.get("kind") == "compaction" and rec.get("seq") == entry.seq


def load_entries(path: os.PathLike[str] | str, log_fd: int, log_len: int) -> tuple[list[Entry], bool]:
    """The valid entries of the index at `path` (in order) and whether the file holds exactly those (False:
    torn, a bad line, or an entry that does not verify against the log: the caller rebuilds it; an absent
    file holds none). Entries stop at the first bad one; every later line is dropped with it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], True
    except OSError:
        return [], False
    entries: list[Entry] = []
    lines = data.split(b"\n")
    tail = lines.pop()
    for line in lines:
        try:
            entry = Entry.decode(line)
        except (ValueError, KeyError, TypeError):
            return entries, False
        if entry.offset + entry.length > log_len or (entries and entry.seq <= entries[-1].seq):
            return entries, False
        if not verify(log_fd, entry):
            return entries, False
        entries.append(entry)
    return entries, not tail


def append_entries(path: Path, entries: list[Entry], session_id: str) -> None:
    """Append `entries` to the index at `path` (0600), fsynced; failpoint `store.index.mid` (TESTING.md §4).
    The index is a cache: a failure is logged and the next open rebuilds it."""
    data = b"".join(e.encode() for e in entries)
    try:
        fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            act = failpoints.action("store.index.mid")
            if act == "kill-mid-write":
                write_all(fd, data[: len(data) // 2])
                os.fsync(fd)
            if act in ("kill", "kill-mid-write"):
                failpoints.kill_now()
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("session %s: cannot write %s (%s); the next open rebuilds it", session_id, path, exc)


def rewrite_entries(path: Path, entries: list[Entry], session_id: str) -> None:
    """Write the index at `path` afresh (temp file, fsync, rename); a failure is logged."""
    try:
        atomic_write(path, b"".join(e.encode() for e in entries))
    except OSError as exc:
        log.warning("session %s: cannot write %s (%s); the next open rebuilds it", session_id, path, exc)


def iter_lines(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of every `\\n`-terminated line of the file in [start, end), read in 1 MiB chunks (never
    the whole file); a last line without `\\n` is yielded as is."""
    for batch in _batches(fd, start, end):
        yield from batch


def _batches(fd: int, start: int, end: int) -> Iterator[list[tuple[int, bytes]]]:
    """The lines of `iter_lines`, a list per chunk read."""
    pos, buf, buf_at = start, b"", start
    while pos < end:
        chunk = os.pread(fd, min(_CHUNK, end - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        buf += chunk
        begin, batch = 0, []
        while True:
            nl = buf.find(b"\n", begin)
            if nl < 0:
                break
            batch.append((buf_at + begin, buf[begin : nl + 1]))
            begin = nl + 1
        if batch:
            yield batch
        buf, buf_at = buf[begin:], buf_at + begin
    if buf:
        yield [(buf_at, buf)]


def iter_decoded(fd: int, start: int, end: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(offset, decoded record) of each line in [start, end), streamed; each chunk's lines are parsed as one
    JSON array (one parser call, as `records.scan_log` does), line by line when that fails. Raises
    ValueError naming the offset of a line that is not a record."""
    for batch in _batches(fd, start, end):
        values = _parse_batch([line for _, line in batch])
        prev: Any = None
        for i, (offset, line) in enumerate(batch):
            value: Any = values[i] if values is not None else None
            # consecutive seqs prove the array's alignment (a damaged line could merge with a neighbour)
            if _envelope_ok(value) and (prev is None or value["seq"] == prev + 1):
                rec: dict[str, Any] = value
            else:
                try:
                    rec = decode_line(line)
                except ValueError as exc:
                    raise ValueError(f"the line at byte {offset} is not a record ({exc})") from None
            prev = rec["seq"]
            yield offset, rec


def _parse_batch(lines: list[bytes]) -> Any:
    try:
        values = json.loads(b"[" + b",".join(line.rstrip(b"\n") for line in lines) + b"]")
    except ValueError:
        return None
    return values if isinstance(values, list) and len(values) == len(lines) else None


def _envelope_ok(rec: Any) -> bool:
    if not isinstance(rec, dict):
        return False
    v, seq, at, kind = rec.get("v"), rec.get("seq"), rec.get("at"), rec.get("kind")
    return type(v) is int and type(seq) is int and isinstance(at, str) and isinstance(kind, str)


# The envelope exactly as `records.encode_record` writes it, and the role of a `message` record.
_ENVELOPE = re.compile(
    rb'\{"v":(\d+),"seq":(\d+),"at":"([^"\\]*)","kind":"([a-z_]+)"(?:,"messageId":"[^"\\]*","message":\{"role":"(user|assistant)")?'
)
_TOOL_USE_ID = re.compile(rb'"type":"tool_use","id":"([^"\\]*)"')
TOOL_USE_IDS = "_toolUseIds"  # a light message record's tool_use ids (not a log field)
_PARSED_KINDS = frozenset({"usage", "compaction", "message"})  # the kinds whose payload the Tally reads


def _light(line: bytes) -> dict[str, Any] | None:
    """The envelope of a complete line agentd wrote whose payload the Tally does not need (a user message:
    the bulk of a log; a kind it only counts or locates), or an assistant message's tool_use ids, without
    parsing the payload; else None. A scan then costs a fraction of parsing the log; what it skips is
    parsed, and checked, by whoever reads it. (`"type":"tool_use"` cannot occur inside a JSON string, whose
    quotes are escaped; ids are taken only when each such block starts with its id.)"""
    m = _ENVELOPE.match(line)
    if m is None or not line.endswith(b"\n"):
        return None
    kind = m.group(4).decode()
    rec = {"v": int(m.group(1)), "seq": int(m.group(2)), "at": m.group(3).decode(), "kind": kind}
    if kind == "message" and m.group(5) == b"assistant":
        ids = _TOOL_USE_ID.findall(line)
        if len(ids) != line.count(b'"type":"tool_use"'):
            return None
        rec[TOOL_USE_IDS] = [i.decode() for i in ids]
        return rec
    return None if kind in _PARSED_KINDS and m.group(5) != b"user" else rec


@dataclass
class TailScan:
    """What `scan_tail` found after `start`: as `records.LogScan` (`good_len`, `torn`, `needs_newline`), the
    last record's seq and `at`, the first record when the scan started at 0, and the entries of the
    compaction records it met (to add to the index)."""

    good_len: int
    torn: bytes
    needs_newline: bool
    last_seq: int
    last_at: str | None
    first: dict[str, Any] | None
    entries: list[Entry]


def scan_tail(fd: int, start: int, end: int, tally: Tally, last_seq: int, where: tuple[str, str]) -> TailScan:
    """Decode the log in [start, end) line by line, streamed (CONTRACTS.md §9 checks of `records.scan_log`:
    every `\\n`-terminated line a record, no newer `v`; an unterminated last line that decodes is kept, one
    that does not is the torn tail), counting each record into `tally`. `where`: (session id, log path) for
    errors. Raises StorageError (`data.line` when the scan started at 0, else `data.offset`),
    UnsupportedSessionVersion."""
    sid, path = where
    out = TailScan(start, b"", False, last_seq, None, None, [])
    number = 0
    for offset, line in iter_lines(fd, start, end):
        number += 1
        try:
            rec = _light(line) if out.first is not None or start else None
            rec = rec or decode_line(line)
        except ValueError as exc:
            if not line.endswith(b"\n"):
                out.torn = line
                break
            where_data = {"line": number} if start == 0 else {"offset": offset}
            raise StorageError(
                f"Session {sid}: {'line ' + str(number) if start == 0 else 'the record at byte ' + str(offset)} "
                f"of {path} is not a valid record ({exc}); the log is damaged beyond a torn last line. Move the "
                "session folder aside or restore it from a backup, then retry; or start a new session.",
                sessionId=sid, path=path, **where_data,
            ) from None  # fmt: skip
        if rec["v"] > LOG_VERSION:
            raise version_error(sid, rec, number)
        if out.first is None and start == 0:
            out.first = rec
        tally.observe(rec, offset, len(line))
        if rec["kind"] == "compaction" and line.endswith(b"\n"):
            out.entries.append(tally.entry(rec["seq"], offset, line))
        out.good_len, out.last_seq, out.last_at = offset + len(line), rec["seq"], rec["at"]
        out.needs_newline = not line.endswith(b"\n")
    return out
