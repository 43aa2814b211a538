"""Log record encoding and log scanning (CONTRACTS.md §9; agentd/persistence/records.py)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentd.errors import StorageError, UnsupportedSessionVersion
from agentd.persistence.records import (
    KINDS,
    LOG_VERSION,
    decode_line,
    encode_record,
    format_at,
    is_known_kind,
    payload_of,
    scan_log,
)

AT = "2026-09-01T10:15:30Z"


def test_kinds_and_version() -> None:
    assert LOG_VERSION == 1
    assert frozenset(
        {"meta", "prompt", "message", "tool_call", "tool_started", "todos", "grant", "mode", "title",
         "usage", "compaction", "instructions", "withdrawn", "checkpoint", "rewind"}
    ) == KINDS  # fmt: skip
    assert is_known_kind("message") is True
    assert is_known_kind("future_kind") is False


def test_encode_a_non_utf8_file_name_round_trips() -> None:
    """issue 13 (break13): a checkpoint record naming a file whose name is not UTF-8 (`os.fsdecode` keeps
    the byte as a lone surrogate) crashed the log write: the turn ended in an internal error and no rewind
    was possible. The line is now written with `\\udcff` escapes and reads back to the same string."""
    name = os.fsdecode(b"bad\xff.txt")
    line = encode_record(2, "checkpoint", {"id": "1", "changed": [name, "编"]}, AT)
    line.decode("utf-8")  # valid UTF-8
    assert decode_line(line)["changed"] == [name, "编"]
    assert encode_record(2, "checkpoint", {"id": "1", "changed": ["编"]}, AT).decode().count("编") == 1


def test_encode_exact_bytes_keeps_order_blocks_and_utf8() -> None:
    payload = {
        "messageId": "msg_1",
        "role": "user",
        "content": [{"type": "text", "text": "编写 README"}, {"type": "tool_result", "tool_use_id": "t1"}],
    }
    line = encode_record(3, "message", payload, AT)
    assert (
        line
        == (
            '{"v":1,"seq":3,"at":"2026-09-01T10:15:30Z","kind":"message","messageId":"msg_1","role":"user",'
            '"content":[{"type":"text","text":"编写 README"},{"type":"tool_result","tool_use_id":"t1"}]}\n'
        ).encode()
    )


def test_round_trip_keeps_key_order() -> None:
    payload = {"z": 1, "a": [{"type": "text", "text": "x"}], "m": None}
    record = decode_line(encode_record(7, "prompt", payload, AT))
    assert list(record) == ["v", "seq", "at", "kind", "z", "a", "m"]
    assert record == {"v": 1, "seq": 7, "at": AT, "kind": "prompt", **payload}
    assert payload_of(record) == payload
    assert list(payload_of(record)) == ["z", "a", "m"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@given(
    payload=st.dictionaries(st.text(max_size=8).filter(lambda k: k not in {"v", "seq", "at", "kind"}), _json),
    seq=st.integers(min_value=1, max_value=2**40),
    kind=st.sampled_from(sorted(KINDS)),
)
def test_round_trip_property(payload: dict[str, Any], seq: int, kind: str) -> None:
    line = encode_record(seq, kind, payload, AT)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1  # one record, one line, whatever the strings hold
    record = decode_line(line)
    assert record == {"v": 1, "seq": seq, "at": AT, "kind": kind, **payload}
    assert encode_record(seq, kind, payload_of(record), AT) == line  # deterministic bytes


@pytest.mark.parametrize(
    ("seq", "kind", "payload", "error"),
    [
        (1, "nonsense", {}, "unknown record kind 'nonsense'"),
        (0, "prompt", {}, "record seq must be an int >= 1, got 0"),
        (True, "prompt", {}, "record seq must be an int >= 1, got True"),
        (1, "prompt", {"seq": 2, "kind": "x"}, "payload must not contain envelope keys: seq, kind"),
        (1, "usage", {"x": float("nan")}, "Out of range float values are not JSON compliant"),
        (1, "usage", {"x": object()}, "record of kind 'usage' is not JSON-serialisable"),
    ],
)
def test_encode_rejects(seq: Any, kind: str, payload: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError) as info:
        encode_record(seq, kind, payload, AT)
    assert str(info.value).startswith(error)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"[1]", "a record must be a JSON object, got list"),
        (b'{"v":1,"seq":1,"at":"x"}', "record field 'kind' must be str, got None"),
        (b'{"v":1,"seq":true,"at":"x","kind":"k"}', "record field 'seq' must be int, got True"),
        (b'{"v":"1","seq":1,"at":"x","kind":"k"}', "record field 'v' must be int, got '1'"),
    ],
)
def test_decode_rejects(line: bytes, error: str) -> None:
    with pytest.raises(ValueError) as info:
        decode_line(line)
    assert str(info.value) == error


def test_decode_rejects_invalid_json() -> None:
    with pytest.raises(json.JSONDecodeError):
        decode_line(b'{"v":1,"seq"')


def test_format_at() -> None:
    assert format_at(datetime(2026, 9, 1, 10, 15, 30, 999_000, tzinfo=UTC)) == AT
    assert format_at(datetime(2026, 9, 1, 12, 15, 30, tzinfo=timezone(timedelta(hours=2)))) == AT
    assert format_at(datetime(2026, 9, 1, 10, 15, 30)) == AT  # naive means UTC
    assert datetime.fromisoformat(format_at()).tzinfo == UTC


def _log(*records: tuple[int, str, dict[str, Any]]) -> bytes:
    return b"".join(encode_record(seq, kind, payload, AT) for seq, kind, payload in records)


def test_scan_complete_log_keeps_unknown_kinds() -> None:
    data = _log((1, "meta", {"sessionId": "s"})) + b'{"v":1,"seq":2,"at":"x","kind":"later"}\n'
    scan = scan_log(data, "s", "/d/log.jsonl")
    assert [r["kind"] for r in scan.records] == ["meta", "later"]
    assert (scan.good_len, scan.torn, scan.needs_newline, scan.last_seq) == (len(data), b"", False, 2)


def test_scan_torn_and_unterminated_tail() -> None:
    good = _log((1, "meta", {}), (2, "prompt", {"content": []}))
    torn = scan_log(good + b'{"v":1,"se', "s", "p")
    assert (len(torn.records), torn.good_len, torn.torn, torn.needs_newline) == (
        2,
        len(good),
        b'{"v":1,"se',
        False,
    )
    last = encode_record(3, "title", {"title": "t"}, AT)
    whole = scan_log(good + last[:-1], "s", "p")
    assert (whole.last_seq, whole.good_len, whole.torn, whole.needs_newline) == (
        3,
        len(good) + len(last) - 1,
        b"",
        True,
    )
    empty = scan_log(b"", "s", "p")
    assert (empty.records, empty.last_seq, empty.good_len) == ([], 0, 0)


def test_scan_corrupt_middle_line_names_it() -> None:
    data = _log((1, "meta", {})) + b"garbage\n" + _log((3, "title", {"title": "t"}))
    with pytest.raises(StorageError) as info:
        scan_log(data, "sess_x", "/d/log.jsonl")
    assert info.value.message == (
        "Session sess_x: line 2 of /d/log.jsonl is not a valid record (Expecting value: line 1 column 1 "
        "(char 0)); the log is damaged beyond a torn last line. Move the session folder aside or restore "
        "it from a backup, then retry; or start a new session."
    )
    assert info.value.data == {"sessionId": "sess_x", "path": "/d/log.jsonl", "line": 2}


def test_scan_refuses_newer_version() -> None:
    meta = b'{"v":3,"seq":1,"at":"x","kind":"meta","agentdVersion":"0.4.0"}\n'
    with pytest.raises(UnsupportedSessionVersion) as info:
        scan_log(meta, "sess_x", "p")
    assert info.value.message == "sess_x was written by agentd 0.4.0 (log v3); upgrade agentd to open it."
    assert info.value.data == {"sessionId": "sess_x", "logVersion": 3, "supportedVersion": 1, "line": 1}
    old = b'{"v":1,"seq":1,"at":"x","kind":"meta","agentdVersion":"0.1.0"}\n'
    with pytest.raises(UnsupportedSessionVersion) as info:
        scan_log(old + b'{"v":2,"seq":2,"at":"x","kind":"message"}', "sess_y", "p")  # unterminated last line
    assert info.value.message == "sess_y was written by a newer agentd (log v2); upgrade agentd to open it."
    assert info.value.data["line"] == 2
