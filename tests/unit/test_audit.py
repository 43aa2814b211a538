"""The audit log: one fsynced, hash-chained JSON line per call with the complete input, redacted, 0600,
append-only (CONTRACTS.md §5, §9, §10; issue 9 H5, H6)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentd.audit import (
    GENESIS,
    INPUT_BLOB_MIN_BYTES,
    AuditLog,
    input_digest,
    line_hash,
    matches_redacted,
    redact,
)
from agentd.permissions.gate import Decision

KEY = "sk-ant-emu-0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 9, 1, 10, 15, 41, 123000, tzinfo=UTC)
ALLOW = Decision(decision="allow", decided_by="rule", rule="default:read_file=allow", detail="")


def log_at(path: Path, secrets: tuple[str, ...] = (), **kw: Any) -> AuditLog:
    return AuditLog(path, secrets=secrets, now=lambda: NOW, **kw)


def digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def line(entry: dict[str, Any]) -> bytes:
    return (json.dumps(entry, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


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
        "v": 1,
        "seq": 1,
        "prev": GENESIS,
        "at": "2026-09-01T10:15:41.123Z",
        "sessionId": "sess_1",
        "toolUseId": "toolu_01",
        "tool": "read_file",
        "inputDigest": digest({"path": "README.md"}),
        "input": {"path": "README.md"},
        "decision": "allow",
        "decidedBy": "rule",
        "rule": "default:read_file=allow",
    }
    expected_second = {
        **expected_first,
        "seq": 2,
        "prev": line_hash(line(expected_first)),
        "toolUseId": "toolu_02",
        "inputDigest": digest({"path": "../x"}),
        "input": {"path": "../x"},
        "decision": "deny",
        "decidedBy": "invalid_input",
        "rule": None,
        "outcome": "refused_outside_workspace",
    }
    assert (first, second) == (expected_first, expected_second)
    assert after_first == line(expected_first)
    assert path.read_bytes() == after_first + line(expected_second)
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
        audit.record("s", "t3", "read_file", {}, ALLOW)  # an older handle continues the chain too
    finally:
        os.umask(old_umask)
    modes = [
        stat.S_IMODE(p.stat().st_mode) for p in (path, path.parent, path.parent.parent, tmp_path / "data")
    ]
    assert modes == [0o600, 0o700, 0o700, 0o700]
    lines = path.read_bytes().splitlines()
    assert [(r["toolUseId"], r["seq"]) for r in audit.records()] == [("t1", 1), ("t2", 2), ("t3", 3)]
    assert [r["prev"] for r in audit.records()] == [GENESIS, line_hash(lines[0]), line_hash(lines[1])]


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
    assert (record["input"], record["command"]) == (
        {
            "command": "curl -H 'x-api-key: [redacted]' https://example.test",
            "env": {"api_key": "[redacted]", "Authorization": "[redacted]", "PASSWORD": "[redacted]"},
            "api_key": "[redacted]",
            "count": 3,
            "flag": True,
            "nothing": None,
        },
        "curl -H 'x-api-key: [redacted]' https://example.test",
    )
    data = path.read_bytes()
    assert (KEY.encode() in data, KEY[:16].encode() in data, b"sk-other-secret-value" in data) == (
        False,
        False,
        False,
    )
    assert record["inputDigest"] == digest(raw)
    assert matches_redacted(record["input"], raw)


def test_h5_the_complete_input_and_the_exact_command_line_are_kept(tmp_path: Path) -> None:
    """H5: a command past character 200 (`ls` padded, then `; cat .env`) is audited as it is, not as `ls`;
    no string or list of any input is cut."""
    command = "ls" + " " * 250 + "; cat .env"
    todos = [{"content": f"step {i} " + "x" * 300, "status": "pending"} for i in range(60)]
    audit = log_at(tmp_path / "audit.jsonl", secrets=(KEY,))
    audit.record("s", "t1", "run_command", {"command": command, "timeout_s": 5}, ALLOW)
    audit.record("s", "t2", "todo_write", {"todos": todos}, ALLOW)
    audit.record("s", "t3", "run_command", {"command": 7}, Decision.invalid_input("bad"))
    first, second, third = audit.records()
    assert (first["command"], first["input"]) == (command, {"command": command, "timeout_s": 5})
    assert second["input"] == {"todos": todos} and "command" not in second
    assert (third["input"], "command" in third) == ({"command": 7}, False)


def test_h5_a_large_input_goes_to_a_blob_named_by_its_sha256(tmp_path: Path) -> None:
    """H5: an input of INPUT_BLOB_MIN_BYTES or more is a blob reference with its sha256 (secrets redacted in
    the blob too); run_command's command line stays in the record."""
    blobs: dict[str, bytes] = {}

    def write_blob(data: bytes) -> str:
        ref = hashlib.sha256(data).hexdigest()
        blobs[ref] = data
        return ref

    audit = log_at(tmp_path / "audit.jsonl", secrets=(KEY,), write_blob=write_blob)
    content = f"token={KEY}\n" + "y" * INPUT_BLOB_MIN_BYTES
    big = audit.record("s", "t1", "write_file", {"path": "big.txt", "content": content}, ALLOW)
    command = "cat <<'EOF' > x\n" + "z" * INPUT_BLOB_MIN_BYTES + "\nEOF"
    cmd = audit.record("s", "t2", "run_command", {"command": command}, ALLOW)
    small = audit.record("s", "t3", "read_file", {"path": "a"}, ALLOW)
    ref = big["inputBlob"]["sha256"]
    stored = json.loads(blobs[ref])
    assert ("input" in big, big["inputBlob"]["bytes"], hashlib.sha256(blobs[ref]).hexdigest()) == (
        False,
        len(blobs[ref]),
        ref,
    )
    assert stored == {"path": "big.txt", "content": content.replace(KEY, "[redacted]")}
    assert (cmd["command"], "input" in cmd, "inputBlob" in cmd) == (command, False, True)
    assert (small["input"], "inputBlob" in small) == ({"path": "a"}, False)
    assert KEY.encode() not in b"".join(blobs.values()) + (tmp_path / "audit.jsonl").read_bytes()


def test_digest_is_canonical() -> None:
    assert input_digest({"b": 1, "a": "é"}) == input_digest({"a": "é", "b": 1}) == digest({"a": "é", "b": 1})


def test_a_lone_surrogate_in_an_input_is_recorded(tmp_path: Path) -> None:
    audit = log_at(tmp_path / "audit.jsonl")
    audit.record("s", "t1", "read_file", {"path": "a\udcffb"}, ALLOW)
    [rec] = audit.records()
    assert rec["input"] == {"path": "a\udcffb"} and rec["inputDigest"].startswith("sha256:")


def test_h6_a_torn_last_line_is_set_aside_and_the_chain_goes_on(tmp_path: Path) -> None:
    """H6: a crash during a write costs at most the torn last line: the next append moves it to
    `audit.jsonl.torn-<seq>` and chains the new record to the last complete one."""
    path = tmp_path / "audit.jsonl"
    audit = log_at(path)
    audit.record("s", "t1", "read_file", {}, ALLOW)
    good = path.read_bytes()
    with path.open("ab") as fh:
        fh.write(b'{"v":1,"seq":2,"at":"2026')
    assert [r["toolUseId"] for r in audit.records()] == ["t1"]
    audit.record("s", "t2", "read_file", {}, ALLOW)
    records = audit.records()
    assert [(r["toolUseId"], r["seq"], r["prev"]) for r in records] == [
        ("t1", 1, GENESIS),
        ("t2", 2, line_hash(good)),
    ]
    assert (tmp_path / "audit.jsonl.torn-2").read_bytes() == b'{"v":1,"seq":2,"at":"2026'
    assert AuditLog(tmp_path / "missing.jsonl").records() == []


def test_h6_a_torn_first_line_restarts_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"v":1,"se')
    rec = log_at(path).record("s", "t1", "read_file", {}, ALLOW)
    assert (rec["seq"], rec["prev"], (tmp_path / "audit.jsonl.torn-1").read_bytes()) == (
        1,
        GENESIS,
        b'{"v":1,"se',
    )


def test_redact_keeps_everything_else_and_matches_redacted_recognises_it() -> None:
    raw = {"a": ["x" * 500] * 70, "k": f"pre {KEY} mid {KEY} post", "token": "abc"}
    red = redact(raw, [KEY])
    assert red == {"a": ["x" * 500] * 70, "k": "pre [redacted] mid [redacted] post", "token": "[redacted]"}
    assert matches_redacted(red, raw)
    assert not matches_redacted({**red, "k": "pre [redacted] mid"}, raw)  # text cut off after a mark
    assert not matches_redacted({**red, "k": "pre [redacted] mid [redacted] post; rm -rf /"}, raw)
    assert not matches_redacted({"command": "ls [redacted]"}, {"command": "ls; cat .env"})  # too short
    assert not matches_redacted({"n": "1"}, {"n": 1})
