"""`agentd audit verify SESSION_ID`: check a session's audit log as evidence (issue 9 H6; CONTRACTS.md §5).

Owns: `verify_session()` and its `AuditReport`. The checks, in order; the first failure is reported:

1. The hash chain of `audit.jsonl` (format: `agentd.audit`): every line is a JSON record of a known version
   for this session, `seq` counts 1, 2, 3, … with no gap, repeat or reordering, and each `prev` is the hash
   of the line before it (`GENESIS` for the first). A deleted record shows as a gap, a reordered pair as a
   seq out of place, an edited record as a `prev` that no longer matches it.
2. Each `inputBlob` exists and hashes to its `sha256`.
3. The session log: every tool call whose result the log holds (`tool_call` record) or that began running
   (`tool_started` record, written after the call was audited: a crash mid-run leaves no result) has an
   audit record (this catches a deleted last record, also one disguised as a torn line; break9), and each audit record's tool, `inputDigest`, input and command
   match the log's tool_use with that id, but for redacted secrets (this catches an edited last record).

A torn last line (a crash during a write) is not tampering: it is reported as a note, and so is one set
aside as `audit.jsonl.torn-<seq>`. A session log that cannot be read is a note too (check 3 is skipped).
Exit codes (PROTOCOL.md §3.1): 0 intact, `EXIT_AUDIT_BROKEN` (8) broken; 3 no such session.
Imports agentd.audit and agentd.persistence only; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from agentd.audit import AUDIT_VERSION, GENESIS, input_digest, line_hash, matches_redacted
from agentd.errors import StorageError
from agentd.persistence.paths import DataDir
from agentd.persistence.store import read_blob, read_records

EXIT_AUDIT_OK, EXIT_AUDIT_BROKEN = 0, 8


@dataclass
class AuditReport:
    """The outcome of `verify_session`: `records` complete records read; `broken` the first failure (None:
    intact), with the 1-based `line` of audit.jsonl it concerns (None when it is not one line); `notes`
    what is worth knowing but is not tampering (a torn last line, a set-aside torn record)."""

    session_id: str
    records: int = 0
    broken: str | None = None
    line: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.broken is None

    @property
    def exit_code(self) -> int:
        return EXIT_AUDIT_OK if self.ok else EXIT_AUDIT_BROKEN

    def fail(self, text: str, line: int | None = None) -> AuditReport:
        if self.broken is None:
            self.broken, self.line = text, line
        return self

    def render(self) -> str:
        """The text `agentd audit verify` prints on stdout."""
        head = f"session {self.session_id}: {self.records} audit record{'s' * (self.records != 1)}"
        if self.ok:
            out = [f"{head}; hash chain intact; consistent with the session log: OK"]
        else:
            where = f" (audit.jsonl line {self.line})" if self.line else ""
            out = [f"{head}; BROKEN{where}: {self.broken}"]
        return "\n".join(out + [f"note: {n}" for n in self.notes]) + "\n"


def verify_session(data_dir: DataDir, session_id: str) -> AuditReport:
    """Verify the audit log of `session_id`. Raises SessionNotFound (exit 3) when there is no such session."""
    try:
        log_records: list[dict[str, Any]] | None = read_records(data_dir, session_id)[0]
        log_problem = None
    except StorageError as exc:  # SessionNotFound is not a StorageError: it propagates
        log_records, log_problem = None, exc.message
    report = AuditReport(session_id)
    path = data_dir.audit_path(session_id)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raw = b""
    lines = raw.split(b"\n")
    if lines[-1]:
        report.notes.append(
            f"the last line ({len(lines[-1])} bytes) is torn: a crash during a write, not tampering; the tool "
            "call it was recording never ran"
        )
    complete = lines[:-1]
    records = _check_chain(report, complete, session_id)
    report.records = len(complete)
    for torn in sorted(path.parent.glob(f"{path.name}.torn-*")):
        report.notes.append(
            f"{torn.name}: a line torn by a crash, set aside when the session was next written; not tampering"
        )
    inputs = _check_blobs(report, records, data_dir, session_id) if report.ok else []
    if log_records is None:
        report.notes.append(f"the session log could not be read ({log_problem}); it was not cross-checked")
    elif report.ok:
        _check_against_log(report, records, inputs, log_records)
    return report


def _check_chain(report: AuditReport, lines: list[bytes], session_id: str) -> list[dict[str, Any]]:
    """Check 1; returns the parsed records (up to the first failure)."""
    parsed: list[dict[str, Any] | None] = [_parse(line) for line in lines]
    seqs = {rec.get("seq"): n for n, rec in enumerate(parsed, 1) if rec is not None}
    records: list[dict[str, Any]] = []
    prev = GENESIS
    for n, (line, rec) in enumerate(zip(lines, parsed, strict=True), 1):
        if rec is None:
            report.fail("not a JSON record: the line was damaged or edited", n)
        elif "seq" not in rec or "prev" not in rec:
            report.fail(
                "a record without a hash chain (written by an earlier agentd, before the chain, or edited)", n
            )
        elif not isinstance(rec.get("v"), int) or rec["v"] > AUDIT_VERSION:
            report.fail(f"record version {rec.get('v')!r} is unknown to this agentd (upgrade agentd)", n)
        elif rec.get("sessionId") != session_id:
            report.fail(f"record {rec['seq']} belongs to session {rec.get('sessionId')!r}", n)
        elif rec["seq"] != n:
            report.fail(_misplaced(n, rec["seq"], seqs), n)
        elif rec["prev"] != prev:
            report.fail(
                f"the chain breaks before record {n}: record {n - 1} (line {n - 1}) was changed after it was "
                f"written (its hash no longer matches the prev of record {n})"
                if n > 1
                else "record 1 does not start the chain: earlier records were removed",
                n,
            )
        if not report.ok:
            return records
        assert rec is not None
        records.append(rec)
        prev = line_hash(line)
    return records


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def _misplaced(line: int, seq: Any, seqs: dict[Any, int]) -> str:
    if line in seqs:
        return (
            f"records out of order: line {line} holds record {seq}, and record {line} is on line {seqs[line]}"
        )
    if isinstance(seq, int) and seq > line:
        gap = f"record {line} is" if seq == line + 1 else f"records {line} to {seq - 1} are"
        return f"{gap} missing (deleted): line {line} holds record {seq}"
    return f"line {line} holds record {seq!r} again or out of place (a copied or reordered record)"


def _check_blobs(
    report: AuditReport, records: list[dict[str, Any]], data_dir: DataDir, sid: str
) -> list[Any]:
    """Check 2; returns each record's input (read from its blob when it has one)."""
    inputs: list[Any] = []
    for n, rec in enumerate(records, 1):
        blob = rec.get("inputBlob")
        if blob is None:
            inputs.append(rec.get("input"))
            continue
        ref = blob.get("sha256") if isinstance(blob, dict) else None
        try:
            data = read_blob(data_dir, sid, str(ref))
        except (ValueError, StorageError):
            report.fail(f"record {n}: its input blob {ref} is missing or unreadable", n)
            return inputs
        if hashlib.sha256(data).hexdigest() != ref:
            report.fail(f"record {n}: its input blob {ref} was changed (its sha256 differs)", n)
            return inputs
        inputs.append(json.loads(data))
    return inputs


def _tool_uses(log_records: list[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The log's tool_use blocks by id, and the ids of the tool calls that began running or whose result it
    holds (each was audited first), in log order."""
    uses: dict[str, list[dict[str, Any]]] = {}
    finished: list[str] = []
    for rec in log_records:
        if rec.get("kind") == "message" and isinstance(rec.get("message"), dict):
            for block in rec["message"].get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    uses.setdefault(str(block.get("id")), []).append(block)
        elif rec.get("kind") in ("tool_call", "tool_started"):
            finished.append(str(rec.get("toolCallId")))
    return uses, finished


def _same_call(rec: dict[str, Any], recorded_input: Any, block: dict[str, Any]) -> bool:
    original = block.get("input")
    command = original.get("command") if isinstance(original, dict) else None
    return (
        rec.get("tool") == block.get("name")
        and rec.get("inputDigest") == input_digest(original)
        and matches_redacted(recorded_input, original)
        and ("command" not in rec or matches_redacted(rec["command"], command))
    )


def _check_against_log(
    report: AuditReport, records: list[dict[str, Any]], inputs: list[Any], log_records: list[dict[str, Any]]
) -> None:
    """Check 3."""
    uses, finished = _tool_uses(log_records)
    audited = set()
    for n, (rec, recorded_input) in enumerate(zip(records, inputs, strict=True), 1):
        tid = str(rec.get("toolUseId"))
        audited.add(tid)
        if tid in uses and not any(_same_call(rec, recorded_input, b) for b in uses[tid]):
            report.fail(
                f"record {n} (tool_use {tid}) does not match the tool call in the session log: its tool, input "
                "or command was changed",
                n,
            )
            return
    missing = [tid for tid in finished if tid not in audited]
    if missing:
        report.fail(
            f"no audit record for tool call {missing[0]}, which the session log shows started or finished: a "
            "record was deleted"
            + (f" ({len(set(missing))} calls have none)" if len(set(missing)) > 1 else "")
        )
