"""Session log records: the vocabulary and the line format of `log.jsonl` (CONTRACTS.md §9).

Owns: `LOG_VERSION`; one pydantic model per record kind (`MetaRecord`, `PromptRecord`, `MessageRecord`,
`ToolCallRecord`, `ToolStartedRecord`, `TodosRecord`, `GrantRecord`, `ModeRecord`, `TitleRecord`,
`UsageRecord`, `CompactionRecord`, `InstructionsRecord`, `WithdrawnRecord`, `CheckpointRecord`, `RewindRecord`:
`LogRecord` is their union) with `payload()` (what the writer appends) and
`parse_record()` (what replay reads); the kinds (`KINDS`, from the models); `scan_log` (decoding a whole log,
finding a torn tail); and the byte-exact encoding of one record per line:
`{"v":1,"seq":N,"at":"<RFC 3339 UTC>","kind":K,...payload}` + `\\n`, compact separators, UTF-8 kept as is,
payload keys in insertion order (so content block lists stay block lists and the same history always
yields the same bytes, CONTRACTS.md §6). Readers skip kinds they do not know; a newer `v` is refused by the
store (agentd/persistence/store.py).
The session's `Journal` (agentd/core/journal.py) is the only writer of these records; replay
(agentd/core/replay.py), the load replay (agentd/core/history.py) and the read-only views read them.
Must not import pygls, lsprotocol, acp or agentd.adapters; imports only `agentd.errors` from agentd.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agentd.errors import StorageError, UnsupportedSessionVersion

LOG_VERSION = 1


class Record(BaseModel):
    """A log record's payload (the envelope `v`, `seq`, `at`, `kind` is the store's). Field names are the
    logged camelCase keys; `payload()` keeps the fields the writer set, in declaration order, so the same
    record always yields the same bytes. Unknown fields (a newer agentd) are kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)
    kind: ClassVar[str]

    def payload(self) -> dict[str, Any]:
        """The payload as appended: set fields only (an explicit None stays `null`), camelCase keys."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class MetaRecord(Record):
    """Record 1 of every log: who wrote it and where the session works."""

    kind: ClassVar[str] = "meta"
    session_id: str
    agentd_version: str | None = None
    cwd: str | None = None
    provider: str | None = None
    model: str | None = None
    directories: list[str] = Field(default_factory=list)
    instructions: dict[str, Any] | None = (
        None  # the project instructions read at start (files and exact text)
    )
    forked_from: dict[str, Any] | None = None  # a fork (issue 13): {sessionId, at, seq} of the source


class PromptRecord(Record):
    """A user prompt's original content blocks (before any merge with tool_results)."""

    kind: ClassVar[str] = "prompt"
    message_id: str
    content: list[dict[str, Any]]


class MessageRecord(Record):
    """One API message exactly as sent (a tool_result is one user message of its own; replay joins
    consecutive user records). `blobs`: block index -> blob ref of a large tool_result text; `cut`: tool
    name by id of this assistant reply's calls cut off at max_tokens (issue 9 H3)."""

    kind: ClassVar[str] = "message"
    message_id: str
    message: dict[str, Any]
    blobs: dict[str, str] | None = None
    cut: dict[str, str] | None = None

    def restore(self, read_blob: Callable[[str], bytes]) -> dict[str, Any]:
        """The API message with blob-backed tool_result texts read back (`restore_message`)."""
        return restore_message({"message": self.message, "blobs": self.blobs}, read_blob)


def restore_message(payload: Mapping[str, Any], read_blob: Callable[[str], bytes]) -> dict[str, Any]:
    """The API message of a `message` record (payload or whole decoded record), with blob-backed tool_result
    texts read back. Read-only for the caller: nothing is copied but the blocks whose text comes from a blob,
    so a resume costs a small constant times parsing the log (TESTING.md §5.2 `resume_ratio`)."""
    msg: dict[str, Any] = payload["message"]
    blobs = payload.get("blobs")
    if blobs:
        content = list(msg["content"])
        for j, ref in blobs.items():
            content[int(j)] = {**content[int(j)], "content": read_blob(ref).decode("utf-8")}
        msg = {**msg, "content": content}
    return msg


class ToolCallRecord(Record):
    """The final state of one tool call. `diff` may hold `oldTextBlob`/`newTextBlob` refs instead of texts,
    `outputBlob` the whole output when it was large (case C07)."""

    kind: ClassVar[str] = "tool_call"
    tool_call_id: str
    status: str
    title: str | None = None
    tool_kind: str | None = None
    raw_input: Any = None
    raw_output: Any = None
    diff: dict[str, Any] | None = None
    locations: list[dict[str, Any]] | None = None
    decided_by: str | None = None
    output_blob: str | None = None


class ToolStartedRecord(Record):
    """Written and fsynced right before a tool runs (the synthetic result then says its outcome is unknown)."""

    kind: ClassVar[str] = "tool_started"
    tool_call_id: str


class TodosRecord(Record):
    """A successful todo_write snapshot: `[{"content", "status"}]`."""

    kind: ClassVar[str] = "todos"
    todos: list[dict[str, Any]]


class GrantRecord(Record):
    """An "always" answer: `grant` is `allow_always` or `reject_always` for the exact `tool` name."""

    kind: ClassVar[str] = "grant"
    tool: str
    grant: str


class ModeRecord(Record):
    kind: ClassVar[str] = "mode"
    mode: str


class TitleRecord(Record):
    kind: ClassVar[str] = "title"
    title: str | None = None


class UsageRecord(Record):
    """One model request's usage (`Usage.to_json()`: camelCase counts, null = not reported) and model."""

    kind: ClassVar[str] = "usage"
    usage: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    inherited: bool | None = None  # copied by a fork: sets the known context size, not the token totals


class CompactionRecord(Record):
    """The first `replaced` active messages were replaced by `summary` (and `ack`); nothing is deleted.
    `kept` (issue 16): the messages that follow the summary, each `{"message", "blobs"?}` as in a `message`
    record, and `stale` the todo tracker's round counter then, so a resume can start at this record; absent
    in records written before (a resume then reads the whole log)."""

    kind: ClassVar[str] = "compaction"
    replaced: int
    summary: dict[str, Any]
    ack: dict[str, Any] | None = None
    kept: list[dict[str, Any]] | None = None
    stale: int | None = None


class InstructionsRecord(Record):
    """A reload of the project instructions (agentd.core.instructions): the files read and the exact text."""

    kind: ClassVar[str] = "instructions"
    files: list[dict[str, Any]] = Field(default_factory=list)
    text: str = ""


class WithdrawnRecord(Record):
    """A failed turn's unanswered prompt (`messageId`), taken back out of the active context (issue 17)."""

    kind: ClassVar[str] = "withdrawn"
    message_id: str
    reason: str = ""


class CheckpointRecord(Record):
    """A checkpoint of the workspace (issue 13; agentd.core.checkpoints): `id` (`N`, `N.M`, `N.end`, `rK`,
    `rK.end`), `before` (`prompt`, `run_command`, `turn_end`, `rewind`), `prompt` (the turn's number);
    `roots` [{path, tree}] (absent: it failed, `error`, or checkpoints are off); `files`, `bytes` covered;
    `changed` (paths changed since the previous checkpoint, at most 10,000; `changedTotal` when more);
    `notCovered` (how many paths it leaves out); `ms` (the walk's time)."""

    kind: ClassVar[str] = "checkpoint"
    id: str
    before: str
    prompt: int = 0
    message_id: str | None = None
    text: str | None = None
    tool_call_id: str | None = None
    roots: list[dict[str, Any]] | None = None
    files: int | None = None
    bytes: int | None = None
    changed: list[str] | None = None
    changed_total: int | None = None
    not_covered: int | None = None
    ms: int | None = None
    error: str | None = None


class RewindRecord(Record):
    """A rewind (issue 13; agentd.core.rewind): to checkpoint `to` (record `toSeq`); `files`, `conversation`:
    what went back (a conversation rewind moves the active branch, agentd.persistence.branches); `before`:
    the checkpoint taken just before it; `kept`: [path, reason] left alone."""

    kind: ClassVar[str] = "rewind"
    id: str
    to: str
    to_seq: int
    files: bool
    conversation: bool
    before: str | None = None
    kept: list[list[str]] | None = None


LogRecord = (
    MetaRecord
    | PromptRecord
    | MessageRecord
    | ToolCallRecord
    | ToolStartedRecord
    | TodosRecord
    | GrantRecord
    | ModeRecord
    | TitleRecord
    | UsageRecord
    | CompactionRecord
    | InstructionsRecord
    | WithdrawnRecord
    | CheckpointRecord
    | RewindRecord
)
MODELS: dict[str, type[Record]] = {
    m.kind: m
    for m in (
        MetaRecord, PromptRecord, MessageRecord, ToolCallRecord, ToolStartedRecord, TodosRecord, GrantRecord,
        ModeRecord, TitleRecord, UsageRecord, CompactionRecord, InstructionsRecord, WithdrawnRecord,
        CheckpointRecord, RewindRecord,
    )
}  # fmt: skip
KINDS = frozenset(MODELS)


def parse_record(record: Mapping[str, Any]) -> Record | None:
    """The typed payload of a decoded record (envelope keys dropped), or None for a kind this agentd does not
    know (readers skip it). Raises pydantic.ValidationError when a known kind lacks a required field."""
    model = MODELS.get(str(record.get("kind")))
    if model is None:
        return None
    return model.model_validate({k: v for k, v in record.items() if k not in ENVELOPE_KEYS})


ENVELOPE_KEYS = ("v", "seq", "at", "kind")


def format_at(when: datetime | None = None) -> str:
    """An RFC 3339 UTC timestamp with second precision, e.g. `2026-09-01T10:15:30Z` (PROTOCOL.md §2).

    `when` defaults to now; a naive datetime is taken as UTC.
    """
    when = datetime.now(UTC) if when is None else when
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_known_kind(kind: object) -> bool:
    """True if this agentd understands records of `kind`; readers skip the others."""
    return kind in KINDS


def encode_record(seq: int, kind: str, payload: Mapping[str, Any], at: str) -> bytes:
    """One log line (UTF-8, ending in `\\n`) for record number `seq` (>= 1) of `kind` written at `at`.

    `payload` keys follow the envelope in their insertion order and must not be `v`, `seq`, `at` or `kind`.
    Deterministic: `json.dumps(..., ensure_ascii=False, separators=(",", ":"))`; a record holding a lone
    surrogate (a file name that is not UTF-8, kept by `os.fsdecode` as `surrogateescape`) is written with
    `ensure_ascii=True` instead, so the line stays UTF-8 and reads back to the same strings.
    Raises ValueError for an unknown kind, a bad seq, an envelope key in the payload, or a value JSON cannot
    encode (including NaN).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}; known kinds: {', '.join(sorted(KINDS))}")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError(f"record seq must be an int >= 1, got {seq!r}")
    clash = [k for k in ENVELOPE_KEYS if k in payload]
    if clash:
        raise ValueError(f"payload must not contain envelope keys: {', '.join(clash)}")
    record: dict[str, Any] = {"v": LOG_VERSION, "seq": seq, "at": at, "kind": kind}
    record.update(payload)
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except TypeError as exc:
        raise ValueError(f"record of kind {kind!r} is not JSON-serialisable: {exc}") from exc
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: \udcff escapes round-trip through json.loads
        return json.dumps(record, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode_line(line: bytes) -> dict[str, Any]:
    """Decode one log line (with or without its trailing `\\n`) into the record dict, key order kept.

    Checks the envelope only: an object with int `v` and `seq`, str `at` and `kind`. The kind may be
    unknown and `v` may be newer than LOG_VERSION; the caller decides (CONTRACTS.md §9).
    Raises ValueError (json.JSONDecodeError is one) with the reason.
    """
    if line.endswith(b"\n"):
        line = line[:-1]
    record = json.loads(line)
    if not isinstance(record, dict):
        raise ValueError(f"a record must be a JSON object, got {type(record).__name__}")
    for key, typ in (("v", int), ("seq", int), ("at", str), ("kind", str)):
        value = record.get(key)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise ValueError(f"record field {key!r} must be {typ.__name__}, got {value!r}")
    return record


def _envelope_ok(record: Any) -> bool:
    if not isinstance(record, dict):
        return False
    v, seq, at, kind = record.get("v"), record.get("seq"), record.get("at"), record.get("kind")
    return type(v) is int and type(seq) is int and isinstance(at, str) and isinstance(kind, str)


def _parse_all(lines: list[bytes]) -> list[Any] | None:
    """All complete lines parsed as one JSON array (one parser call instead of one per line: resume cost
    stays close to the cost of reading the bytes). None when any line is not JSON; the caller then finds the
    bad line one by one. A line holding several values (`1,2`) would shift the count, so it is checked."""
    if not lines:
        return []
    try:
        values = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        return None
    return values if isinstance(values, list) and len(values) == len(lines) else None


def payload_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record without its envelope (`v`, `seq`, `at`, `kind`), key order kept."""
    return {k: v for k, v in record.items() if k not in ENVELOPE_KEYS}


@dataclass
class LogScan:
    """The result of `scan_log`: the complete records, where they end, and what follows them.

    `good_len` is the byte length of the log up to the end of the last complete record (including a last
    record that lacks only its `\\n`); `torn` the bytes after it (empty if none); `needs_newline` is True when
    the last record is complete but unterminated, so the next append must start with `\\n` (TESTING.md §4.2).
    """

    records: list[dict[str, Any]]
    good_len: int
    torn: bytes
    needs_newline: bool

    @property
    def last_seq(self) -> int:
        return self.records[-1]["seq"] if self.records else 0


def version_error(session_id: str, record: dict[str, Any], line: int) -> Exception:
    version = record.get("agentdVersion")  # only a meta record names its writer
    writer = f"agentd {version}" if isinstance(version, str) else "a newer agentd"
    return UnsupportedSessionVersion(
        f"{session_id} was written by {writer} (log v{record['v']}); upgrade agentd to open it.",
        sessionId=session_id,
        logVersion=record["v"],
        supportedVersion=LOG_VERSION,
        line=line,
    )


def scan_log(data: bytes, session_id: str, path: str) -> LogScan:
    """Decode a whole `log.jsonl` (CONTRACTS.md §9).

    Every `\\n`-terminated line must be a record: otherwise StorageError with `data.line` (1-based) naming the
    first bad line. A record with `v` > LOG_VERSION raises UnsupportedSessionVersion. An unterminated last
    line that decodes is accepted (`needs_newline`); one that does not is the torn tail (`torn`), which the
    caller sets aside or skips. Unknown kinds are kept; replay skips them.
    """
    records: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the log ends with "\n"
    fast = _parse_all(lines)
    for number, line in enumerate(lines, start=1):
        if fast is not None:
            record = fast[number - 1]
            # A damaged line could in theory merge with a neighbour into one value; consecutive seqs
            # prove the alignment, anything else is decoded line by line below.
            if _envelope_ok(record) and (not records or record["seq"] == records[-1]["seq"] + 1):
                if record["v"] > LOG_VERSION:
                    raise version_error(session_id, record, number)
                records.append(record)
                continue
        try:
            record = decode_line(line)
        except ValueError as exc:
            raise StorageError(
                f"Session {session_id}: line {number} of {path} is not a valid record ({exc}); the log is "
                "damaged beyond a torn last line. Move the session folder aside or restore it from a "
                "backup, then retry; or start a new session.",
                sessionId=session_id,
                path=path,
                line=number,
            ) from None
        if record["v"] > LOG_VERSION:
            raise version_error(session_id, record, number)
        records.append(record)
    if not tail:
        return LogScan(records, len(data), b"", False)
    try:
        record = decode_line(tail)
    except ValueError:
        return LogScan(records, len(data) - len(tail), tail, False)
    if record["v"] > LOG_VERSION:
        raise version_error(session_id, record, len(lines) + 1)
    records.append(record)
    return LogScan(records, len(data), b"", True)
