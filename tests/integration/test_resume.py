"""Resume, repair and cancellation in-process (CONTRACTS.md §9; cases C01, C09, C10)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core.session import INTERRUPTED_AFTER, INTERRUPTED_BEFORE
from agentd.errors import SessionLocked
from agentd.permissions.approver import QueueApprover
from agentd.providers.scripted import ScriptedProvider
from tests.integration.conftest import answers_of, read_file, text, todo


def _prompt(t: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t}]


def _plain(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def _log(data_dir: Path, sid: str) -> bytes:
    return (data_dir / "sessions" / sid / "log.jsonl").read_bytes()


async def _until(h: Any, pred: Any, what: str, timeout: float = 10.0) -> None:
    ev = asyncio.Event()
    inner = h.session.sink

    def sink(u: dict[str, Any]) -> None:
        inner(u)
        if pred(u):
            ev.set()

    h.session.sink = sink
    try:
        await asyncio.wait_for(ev.wait(), timeout)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


async def test_cancel_during_run_command_then_resume_gives_a_valid_request(make_harness, data_dir: Path):
    """C01: cancel while a long command runs; the resumed session answers the open tool_use first."""
    run = {"tool_use": {"name": "run_command", "input": {"command": "sleep 30"}}}
    h = make_harness(
        answers_of([todo(("wait", "in_progress")), run]), approver=QueueApprover.of("allow_once")
    )
    task = asyncio.ensure_future(h.session.prompt(_prompt("wait")))
    await _until(
        h,
        lambda u: u.get("status") == "in_progress" and u.get("toolCallId") == "toolu_scr_1_2",
        "run_command in progress",
    )
    h.session.cancel()
    assert await asyncio.wait_for(task, 5) == "cancelled"
    sid = h.session.id
    failed = [u for u in h.updates if u.get("status") == "failed"]
    assert failed == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "toolu_scr_1_2",
            "status": "failed",
            "_meta": {
                "agentd": {"decision": "deny", "decidedBy": "cancel", "durationMs": 0, "cancelled": True}
            },
        }
    ]
    h.session.close()

    h2 = make_harness(answers_of([text("resumed")]), resume=sid)
    assert await h2.session.prompt(_prompt("continue")) == "end_turn"
    first = h2.requests[0]["messages"][-1]["content"]
    assert _plain(first) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_scr_1_1",
            "content": '{"todos":[{"content":"wait","status":"in_progress"}]}',
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_scr_1_2",
            "content": INTERRUPTED_AFTER,
            "is_error": True,
        },
        {"type": "text", "text": "continue"},
    ]
    assert h2.session.p.todos.snapshot_json() == '{"todos":[{"content":"wait","status":"in_progress"}]}'


async def test_open_tool_use_without_tool_started_gets_the_before_text(make_harness, data_dir: Path):
    """C09: the approval was pending at the crash: 'interrupted before completion', never asked again."""
    write = {"tool_use": {"name": "write_file", "input": {"path": "x.txt", "content": "x"}}}
    approver = QueueApprover()  # never answers
    h = make_harness(answers_of([write]), approver=approver)
    task = asyncio.ensure_future(h.session.prompt(_prompt("write")))
    await asyncio.wait_for(approver.asked.wait(), 5)
    h.session.cancel()
    assert await asyncio.wait_for(task, 5) == "cancelled"
    sid = h.session.id
    h.session.close()
    approver2 = QueueApprover()
    h2 = make_harness(answers_of([text("ok")]), resume=sid, approver=approver2)
    await h2.session.prompt(_prompt("go on"))
    assert _plain(h2.requests[0]["messages"][-1]["content"])[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_scr_1_1",
        "content": INTERRUPTED_BEFORE,
        "is_error": True,
    }
    assert approver2.requests == []
    audit = [json.loads(x) for x in (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()]
    assert [(r["toolUseId"], r["decidedBy"]) for r in audit] == [("toolu_scr_1_1", "cancel")]


async def test_resuming_20_times_leaves_the_log_byte_identical(make_harness, data_dir: Path):
    write = {"tool_use": {"name": "write_file", "input": {"path": "x.txt", "content": "x"}}}
    approver = QueueApprover()
    h = make_harness(answers_of([todo(("a", "pending"))], [write]), approver=approver)
    task = asyncio.ensure_future(h.session.prompt(_prompt("go")))
    await asyncio.wait_for(approver.asked.wait(), 5)
    h.session.cancel()
    await asyncio.wait_for(task, 5)
    sid = h.session.id
    h.session.close()
    before = _log(data_dir, sid)
    for _ in range(20):
        make_harness(resume=sid).session.close()
    assert _log(data_dir, sid) == before


async def test_second_opener_is_refused_with_the_holders_pid(make_harness):
    import os

    h = make_harness(answers_of([text("hi")]))
    await h.session.prompt(_prompt("hi"))
    with pytest.raises(SessionLocked) as err:
        make_harness(resume=h.session.id)
    assert (err.value.data["pid"], err.value.data["sameProcess"]) == (os.getpid(), True)


async def test_resume_rebuilds_byte_identical_tools_system_and_history(make_harness, workspace: Path):
    """C10: what was sent is what is replayed, so the first request after a resume repeats the prefix."""
    (workspace / "a.txt").write_text("alpha\n")
    h = make_harness(answers_of([todo(("read", "in_progress")), read_file("a.txt")], [text("read it")]))
    await h.session.prompt([{"type": "text", "text": "one"}, {"type": "text", "text": "two blocks"}])
    sent = h.requests[-1]
    sid = h.session.id
    h.session.close()
    h2 = make_harness(answers_of([text("again")]), resume=sid)
    await h2.session.prompt(_prompt("next"))
    again = h2.requests[0]
    n = len(sent["messages"])
    strip = lambda ms: [{**m, "content": _plain(m["content"])} for m in ms]  # noqa: E731
    # byte-identical but for cache_control, which is not part of the cache key (its TTL is the policy's)
    assert (json.dumps(_plain(again["tools"])), json.dumps(_plain(again["system"]))) == (
        json.dumps(_plain(sent["tools"])),
        json.dumps(_plain(sent["system"])),
    )
    assert strip(again["messages"][:n]) == strip(sent["messages"])
    assert again["messages"][0]["content"][:2] == [
        {"type": "text", "text": "one"},
        {"type": "text", "text": "two blocks"},
    ]


async def test_compression_state_survives_a_resume(make_harness, workspace: Path, data_dir: Path):
    (workspace / "a.txt").write_text("x" * 4000)
    replies = [[read_file("a.txt")] for _ in range(6)] + [[text("done")]]
    h = make_harness(answers_of(*replies), **{})
    h.session.p.settings.context.compress_threshold_tokens = 2500
    h.session.p.settings.context.keep_recent_messages = 4
    await h.session.prompt(_prompt("read a lot"))
    assert any(line.startswith("[compressed history · ") for line in h.lines)
    active = h.session.p.context.messages
    sid = h.session.id
    h.session.close()
    h2 = make_harness(resume=sid)
    assert h2.session.p.context.messages == active
    log = [json.loads(x) for x in _log(data_dir, sid).splitlines()]
    originals = [r for r in log if r["kind"] == "message"]
    assert (len(originals) > len(active), any(r["kind"] == "compaction" for r in log)) == (True, True)


async def test_large_tool_output_goes_to_a_blob_and_replays(make_harness, workspace: Path, data_dir: Path):
    """C07: the model sees a truncated view with the size stated; the whole output is kept in a blob that the
    log references; the log stays small and the model's view is restored on resume."""
    (workspace / "big.txt").write_text("y" * 300_000)
    h = make_harness(answers_of([read_file("big.txt")], [text("big")]))
    await h.session.prompt(_prompt("read big"))
    sid = h.session.id
    active = h.session.p.context.messages
    h.session.close()
    log = [json.loads(x) for x in _log(data_dir, sid).splitlines()]
    (call,) = [r for r in log if r["kind"] == "tool_call"]
    blob = (data_dir / "sessions" / sid / "blobs" / call["outputBlob"]).read_text()
    seen = active[2]["content"][0]["content"]
    assert (len(_log(data_dir, sid)) < 100_000, blob.count("y") > 250_000, len(seen.encode()) < 40_000) == (
        True,
    ) * 3
    assert "bytes omitted ...]" in seen
    h2 = make_harness(resume=sid)
    assert h2.session.p.context.messages == active


async def test_scripted_provider_validates_like_the_service(make_harness):
    p = ScriptedProvider(answers_of([text("x")]))
    h = make_harness(provider=p)
    assert await h.session.prompt(_prompt("hi")) == "end_turn"
    assert len(p.requests) == 1


async def test_token_totals_and_cost_survive_a_resume(make_harness):
    """The usage records replay into the same totals, cost included (1h/5m split kept)."""
    h = make_harness(answers_of([todo(("a", "pending"))], [text("ok")]))
    await h.session.prompt(_prompt("go"))
    before = h.session.totals.to_json()
    sid = h.session.id
    h.session.close()
    assert make_harness(resume=sid).session.totals.to_json() == before


def test_usage_round_trips_through_its_record_form():
    from agentd.providers.base import Usage

    u = Usage(
        input_tokens=3,
        output_tokens=9,
        cache_creation_input_tokens=30,
        cache_read_input_tokens=100,
        cache_creation_1h=20,
        cache_creation_5m=10,
    )
    assert (Usage.from_json(u.to_json()), Usage.from_json(Usage(input_tokens=1).to_json())) == (
        u,
        Usage(input_tokens=1),
    )


async def test_context_size_is_exact_after_a_resume(make_harness, workspace: Path):
    """The last response's usage gives the exact size again after a resume (not a fresh estimate)."""
    (workspace / "a.txt").write_text("alpha\n" * 50)
    h = make_harness(answers_of([read_file("a.txt")], [text("read")]))
    await h.session.prompt(_prompt("go"))
    live = h.session.p.context.estimated_tokens()
    sid = h.session.id
    h.session.close()
    assert make_harness(resume=sid).session.p.context.estimated_tokens() == live


async def test_a_failed_append_leaves_memory_equal_to_the_log(make_harness, monkeypatch):
    """Review finding: a full disk while storing the reply left the tool_use in memory only; the next
    prompt then persisted a result for a tool_use the log never had, and the session could not be loaded."""
    from agentd.errors import StorageError

    h = make_harness(answers_of([todo(("a", "pending"))], [text("ok")]))
    real = h.session.persist_message

    def full_disk(message, message_id, **kw):
        if message.get("role") == "assistant":
            raise StorageError("Cannot write the session log in the data dir (disk full?).")
        return real(message, message_id, **kw)

    monkeypatch.setattr(h.session, "persist_message", full_disk)
    with pytest.raises(StorageError):
        await h.session.prompt(_prompt("go"))
    # the model's reply was never stored, so the failed turn's prompt is withdrawn (issue 17 part 4)
    assert h.session.p.context.messages == []
    sid = h.session.id
    h.session.close()
    assert make_harness(resume=sid).session.p.context.messages == []


async def test_a_tool_use_cut_off_by_a_crash_is_audited_when_resumed(
    make_harness, monkeypatch, data_dir: Path
):
    """Every tool_use gets exactly one audit record, also one that a crash cut off before its decision."""
    from agentd import failpoints

    monkeypatch.setattr(failpoints, "_counts", {})
    monkeypatch.setenv("AGENTD_FAILPOINTS", "loop.after_tool_use_persisted=raise")
    write = {"tool_use": {"name": "write_file", "input": {"path": "x.txt", "content": "x"}}}
    h = make_harness(answers_of([write]))
    with pytest.raises(failpoints.FailpointError):
        await h.session.prompt(_prompt("write"))
    monkeypatch.delenv("AGENTD_FAILPOINTS")
    sid = h.session.id
    h.session.close()
    await make_harness(answers_of([text("ok")]), resume=sid).session.prompt(_prompt("again"))
    audit = [json.loads(x) for x in (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()]
    assert [(r["toolUseId"], r["decidedBy"]) for r in audit] == [("toolu_scr_1_1", "cancel")]
