"""The resume index's scan (agentd.persistence.logindex, issue 16): the light scan that skips payloads counts
exactly what a parse of every record counts; streamed decoding gives every record once, in order."""

from __future__ import annotations

import os
from pathlib import Path

from agentd.persistence.logindex import Tally, iter_decoded, scan_tail
from agentd.persistence.paths import DataDir
from agentd.persistence.store import SessionStore, read_records

SID = "sess_01index"


def _log(tmp_path: Path) -> DataDir:
    dd = DataDir(tmp_path / "data")
    s = SessionStore.create(dd, SID, {"cwd": str(tmp_path), "provider": "scripted", "model": "m"})
    use = lambda i, **k: {"type": "tool_use", "id": i, "name": "x", "input": {}, **k}  # noqa: E731
    tricky = {"type": "text", "text": '"type":"tool_use","id":"fake" and a \\ backslash'}
    for n in range(3):
        s.append("checkpoint", {"id": str(n + 1), "before": "prompt", "prompt": n + 1})
        s.append_many([("prompt", {"messageId": f"p{n}", "content": [{"type": "text", "text": "hi"}]}),
                       ("message", {"messageId": f"p{n}", "message": {"role": "user", "content": [tricky]}})])  # fmt: skip
        s.append(
            "usage",
            {"usage": {"inputTokens": 3, "outputTokens": 4, "cacheReadInputTokens": None}, "model": "m"},
        )
        content = [
            tricky,
            use(f"t{n}"),
            use(f'q"{n}'),
            {"id": f"r{n}", "type": "tool_use", "name": "y", "input": {}},
        ]
        s.append("message", {"messageId": f"a{n}", "message": {"role": "assistant", "content": content}})
        s.append("message", {"messageId": f"u{n}", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{n}", "content": '{"type":"tool_use","id":"no"}'}]}})  # fmt: skip
        s.append("usage", {"usage": {"inputTokens": 1}, "model": "m2", "inherited": n == 1})
        s.append("todos", {"todos": [{"content": "a", "status": "pending"}]})
        s.append(
            "compaction", {"replaced": 2, "summary": {"role": "user", "content": []}, "kept": [], "stale": 0}
        )
    s.close()
    return dd


def test_the_light_scan_counts_what_a_full_parse_counts(tmp_path: Path) -> None:
    dd = _log(tmp_path)
    fd = os.open(dd.log_path(SID), os.O_RDONLY)
    try:
        light = Tally()
        scan = scan_tail(fd, 0, os.fstat(fd).st_size, light, 0, (SID, "log"))
        full, offset = Tally(), 0
        for _, rec in iter_decoded(fd, 0, os.fstat(fd).st_size):
            line_len = len(os.pread(fd, 1 << 20, offset).split(b"\n", 1)[0]) + 1
            full.observe(rec, offset, line_len)
            offset += line_len
    finally:
        os.close(fd)
    assert light.tool_use_ids == full.tool_use_ids == {f"{p}{n}" for p in ("t", 'q"', "r") for n in range(3)}
    assert (light.counts(), light.sparse) == (full.counts(), full.sparse)
    assert light.counts()["usage"]["m"] == {"n": 3, "unknownRead": 3, "inputTokens": 9, "outputTokens": 12}
    assert light.counts()["usage"]["m2"]["n"] == 2  # the inherited one is not counted
    assert [e.seq for e in scan.entries] == [
        r["seq"] for r in read_records(dd, SID)[0] if r["kind"] == "compaction"
    ]
    assert light.turn == full.turn == scan.entries[-1].counts["turn"] > 0  # the turn starts at its checkpoint
    with SessionStore.open(dd, SID) as s:
        assert [rec for _, rec in s.iter_records(0)] == read_records(dd, SID)[0]
