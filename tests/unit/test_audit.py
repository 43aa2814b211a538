"""The audit log: one fsynced JSON line per call, redacted, 0600, append-only (CONTRACTS.md §5, §9, §10)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentd.audit import AuditLog, input_digest, summarize
from agentd.permissions.gate import Decision

KEY = "sk-ant-emu-0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 9, 1, 10, 15, 41, 123000, tzinfo=UTC)
ALLOW = Decision(decision="allow", decided_by="rule", rule="default:read_file=allow", detail="")


def log_at(path: Path, secrets: tuple[str, ...] = ()) -> AuditLog:
    return AuditLog(path, secrets=secrets, now=lambda: NOW)


def digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def test_one_record_per_call_written_before_returning(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "sess_1" / "audit.jsonl"
    audit = log_at(path)
    first = audit.record("sess_1", "toolu_01", "read_file", {"path": "README.md"}, ALLOW)
    after_first = path.read_bytes()
    refused = Decision.invalid_input("Refused: ../x is outside the workspace")
    second = audit.record(
        "sess_1", "toolu_02", "read_file", {"path": "../x"}, refused, "refused_outside_workspace"
    )
    expected_first = {
        "at": "2026-09-01T10:15:41.123Z",
        "sessionId": "sess_1",
        "toolUseId": "toolu_01",
        "tool": "read_file",
        "inputDigest": digest({"path": "README.md"}),
        "inputSummary": {"path": "README.md"},
        "decision": "allow",
        "decidedBy": "rule",
        "rule": "default:read_file=allow",
    }
    expected_second = {
        **expected_first,
        "toolUseId": "toolu_02",
        "inputDigest": digest({"path": "../x"}),
        "inputSummary": {"path": "../x"},
        "decision": "deny",
        "decidedBy": "invalid_input",
        "rule": None,
        "outcome": "refused_outside_workspace",
    }
    assert (first, second) == (expected_first, expected_second)
    assert after_first == (json.dumps(expected_first, separators=(",", ":")) + "\n").encode()
    assert (
        path.read_bytes()
        == after_first + (json.dumps(expected_second, separators=(",", ":")) + "\n").encode()
    )
    assert audit.records() == [expected_first, expected_second]


def test_fsync_happens_before_record_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "audit.jsonl"
    events: list[tuple[str, int]] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        events.append(("fsync", path.stat().st_size if path.exists() else -1))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    audit = log_at(path)
    audit.record("s", "t1", "read_file", {}, ALLOW)
    size_1 = path.stat().st_size
    events.append(("returned", size_1))
    audit.record("s", "t2", "read_file", {}, ALLOW)
    size_2 = path.stat().st_size
    # file fsync (with the line already written), then the new file's directory; second call: the file only
    assert events == [("fsync", size_1), ("fsync", size_1), ("returned", size_1), ("fsync", size_2)]


def test_modes_and_append_only(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        path = tmp_path / "data" / "sessions" / "sess_1" / "audit.jsonl"
        audit = log_at(path)
        audit.record("s", "t1", "read_file", {}, ALLOW)
        audit2 = log_at(path)  # a resumed session appends to the same file
        audit2.record("s", "t2", "read_file", {}, ALLOW)
    finally:
        os.umask(old_umask)
    modes = [
        stat.S_IMODE(p.stat().st_mode) for p in (path, path.parent, path.parent.parent, tmp_path / "data")
    ]
    assert modes == [0o600, 0o700, 0o700, 0o700]
    assert [r["toolUseId"] for r in audit.records()] == ["t1", "t2"]


def test_redaction_of_secret_keys_and_known_secrets(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = log_at(path, secrets=(KEY,))
    raw = {
        "command": f"curl -H 'x-api-key: {KEY}' https://example.test",
        "env": {"api_key": "sk-other-secret-value", "Authorization": "Bearer abc", "PASSWORD": "hunter22"},
        "api_key": "sk-ant-whatever",
        "count": 3,
        "flag": True,
        "nothing": None,
    }
    record = audit.record("s", "t", "run_command", raw, ALLOW)
    assert record["inputSummary"] == {
        "command": "curl -H 'x-api-key: [redacted]' https://example.test",
        "env": {"api_key": "[redacted]", "Authorization": "[redacted]", "PASSWORD": "[redacted]"},
        "api_key": "[redacted]",
        "count": 3,
        "flag": True,
        "nothing": None,
    }
    data = path.read_bytes()
    assert (KEY.encode() in data, KEY[:16].encode() in data, b"sk-other-secret-value" in data) == (
        False,
        False,
        False,
    )
    assert record["inputDigest"] == digest(raw)


def test_long_values_are_cut_after_redaction() -> None:
    secret = "s3cr3t-" + "x" * 30
    text = "a" * 190 + secret + "b" * 100
    assert summarize({"content": text}, [secret]) == {
        "content": "a" * 190 + "[redacted]" + "...[300 chars]",
    }
    assert summarize(list(range(53))) == [*range(50), "[+3 more items]"]


def test_digest_is_canonical() -> None:
    assert input_digest({"b": 1, "a": "é"}) == input_digest({"a": "é", "b": 1}) == digest({"a": "é", "b": 1})


def test_records_skip_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = log_at(path)
    audit.record("s", "t1", "read_file", {}, ALLOW)
    with path.open("ab") as fh:
        fh.write(b'{"at":"2026')
    assert [r["toolUseId"] for r in audit.records()] == ["t1"]
    assert AuditLog(tmp_path / "missing.jsonl").records() == []
