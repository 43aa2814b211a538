"""The audit log: one JSON line per tool_use decision, appended and fsynced (CONTRACTS.md §5, §9, §10).

Owns: `AuditLog` (`sessions/<id>/audit.jsonl`, opened with O_APPEND, never rewritten; file 0600, folders it
creates 0700) and `summarize()`, the redacted input summary. Each record:
`{"at", "sessionId", "toolUseId", "tool", "inputDigest", "inputSummary", "decision", "decidedBy", "rule"}`
plus `"outcome"` when given (e.g. `refused_outside_workspace`). `inputDigest` is `sha256:<hex>` of the
canonical JSON of the input (sorted keys, compact, UTF-8); `inputSummary` replaces the values of keys that
look like secrets and every known secret string (e.g. the API key) with `[redacted]`, then cuts strings to
200 characters.

Imports agentd.permissions.gate (`Decision`) only; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentd.permissions.gate import Decision

REDACTED = "[redacted]"
SUMMARY_MAX_CHARS = 200  # per string value
SUMMARY_MAX_ITEMS = 50  # per list
MIN_SECRET_CHARS = 8  # shorter "secrets" would redact ordinary words

_SENSITIVE_KEY = re.compile(
    r"token|passw(?:or)?d|secret|api[_-]?key|authorization|credential|private[_-]?key|cookie", re.IGNORECASE
)


def rfc3339(moment: datetime) -> str:
    """`2026-09-01T10:15:41.123Z`: UTC, milliseconds."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _jsonable(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def input_digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of a tool input (sorted keys, compact separators, UTF-8)."""
    canonical = json.dumps(
        _jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def summarize(value: Any, secrets: Iterable[str] = ()) -> Any:
    """The redacted, truncated copy of a tool input stored in the audit log (see the module docstring)."""
    known = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
    return _summarize(_jsonable(value), known)


def _summarize(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, Mapping):
        return {
            _text(str(k), secrets): REDACTED if _SENSITIVE_KEY.search(str(k)) else _summarize(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        items = [_summarize(v, secrets) for v in value[:SUMMARY_MAX_ITEMS]]
        if len(value) > SUMMARY_MAX_ITEMS:
            items.append(f"[+{len(value) - SUMMARY_MAX_ITEMS} more items]")
        return items
    if value is None or isinstance(value, bool | int | float):
        return value
    return _text(value if isinstance(value, str) else repr(value), secrets)


def _text(text: str, secrets: list[str]) -> str:
    for secret in secrets:  # before cutting, so no piece of a secret survives at the cut
        text = text.replace(secret, REDACTED)
    if len(text) > SUMMARY_MAX_CHARS:
        return f"{text[:SUMMARY_MAX_CHARS]}...[{len(text)} chars]"
    return text


def _ensure_dir(path: Path) -> None:
    """Create `path` and missing parents with mode 0700 (existing folders are left as they are)."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)  # the umask may have removed bits


class AuditLog:
    """The append-only audit log of one session.

    `path`: `sessions/<id>/audit.jsonl`; `secrets`: strings never to be written (the API key);
    `now`: the wall clock for `at` (injectable for tests). `record()` returns only after the line is
    fsynced. Raises OSError when the file cannot be written (the caller must not run the tool then).
    """

    def __init__(
        self, path: Path, secrets: Iterable[str] = (), now: Callable[[], datetime] | None = None
    ) -> None:
        self.path = Path(path)
        self.secrets = [s for s in secrets if s]
        self._now = now or (lambda: datetime.now(UTC))

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
        entry: dict[str, Any] = {
            "at": rfc3339(self._now()),
            "sessionId": session_id,
            "toolUseId": tool_use_id,
            "tool": tool_name,
            "inputDigest": input_digest(input),
            "inputSummary": summarize(input, self.secrets),
            "decision": decision.decision,
            "decidedBy": decision.decided_by,
            "rule": decision.rule,
        }
        if outcome is not None:
            entry["outcome"] = outcome
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        self._append(line.encode("utf-8"))
        return entry

    def _append(self, data: bytes) -> None:
        _ensure_dir(self.path.parent)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        created = True
        try:
            fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            created = False
            fd = os.open(self.path, flags)
        try:
            if created:
                os.fchmod(fd, 0o600)
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.path.parent)

    def records(self) -> list[dict[str, Any]]:
        """Every complete record, in order (a torn last line is skipped); [] when the file is missing."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        lines = raw.split(b"\n")
        return [json.loads(line) for line in lines[:-1] if line.strip()]


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
