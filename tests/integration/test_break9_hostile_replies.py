"""break9: attacks on the issue 9 fixes from outside, with hostile replies from the emulators.

H1 (break9) as a class: besides a repeated id, the Messages API refuses in every later request a tool_use id
outside `^[a-zA-Z0-9_-]+$` (an OpenAI-compatible server's `functions.read_file:0`, an empty or missing id)
and a tool_use input that is not an object; a complete call that shares its id with a call cut off at
max_tokens (H3) must still run; a reply cancelled mid-stream is stored under the same rules as a finished one
(H19); a workspace file name that is not UTF-8 never ends a turn (H19)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.core.replies import NOT_AN_OBJECT, cut_notice
from agentd.core.validate import validate_request
from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.openai_compat import OpenAICompatProvider
from agentd.testing.emulator import Emulator
from agentd.testing.emulator import validate_request as emu_validate
from tests.integration.conftest import answers_of, text
from tests.lsp.harness import wait_until

READ_A = {"name": "read_file", "input": {"path": "a.txt"}}


def _prompt(t: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t}]


def _ok(body: dict[str, Any]) -> bool:
    return validate_request(body) is None and emu_validate(body) is None


def _body(content: list[dict[str, Any]], result_id: str) -> dict[str, Any]:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": result_id, "content": "ok"}]},
    ]
    return {"model": "emu-sonnet", "max_tokens": 100, "messages": messages}


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"type": "tool_use", "id": "functions.read_file:0", **READ_A}, "tool_use.id"),
        ({"type": "tool_use", "id": "", **READ_A}, "tool_use.id"),
        ({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": [1]}, "tool_use.input"),
    ],
)
def test_both_validators_refuse_what_the_service_refuses_in_a_tool_use(
    block: dict[str, Any], field: str
) -> None:
    """H1 (break9): agentd's validator and the emulator refuse a tool_use id outside the service's pattern and
    an input that is not an object, as the service does (so a stored reply like that is a dead session)."""
    body = _body([block], str(block["id"]))
    assert field in (validate_request(body) or "")
    problem = emu_validate(body)
    assert problem is not None and field in problem.message


ODD_CALLS = [
    {"type": "tool_use", "id": "functions.read_file:0", **READ_A},
    {"type": "tool_use", "id": "", **READ_A},
    {"type": "tool_use", "id": "toolu_list", "name": "read_file", "input": [1, 2]},
    {"type": "tool_use", "id": "toolu_str", "name": "read_file", "input": "a.txt"},
]


@pytest.mark.parametrize("call", ODD_CALLS, ids=["colon-id", "empty-id", "list-input", "string-input"])
async def test_an_odd_tool_use_never_kills_the_session_anthropic(
    make_harness, emulator: Emulator, workspace: Path, call: dict[str, Any]
) -> None:
    """H1 (break9), Anthropic through the real SDK: a reply whose tool_use has an id outside the pattern
    (runs under a valid id) or an input that is not an object (answered with invalid_arguments, stored
    with `{}`) is followed by requests the emulator accepts, in this turn, the next one and after a resume."""
    (workspace / "a.txt").write_text("alpha\n")
    emulator.script({"answers": [{"reply": [call]}, {"reply": ["done"]}, {"reply": ["again"]}]})
    provider = AnthropicProvider("emu-sonnet", "sk-test", emulator.url, ManualClock())
    try:
        h = make_harness(provider=provider)
        assert await h.session.prompt(_prompt("read")) == "end_turn"
        sid = h.session.id
        h.session.close()
        h2 = make_harness(provider=provider, resume=sid)
        assert await h2.session.prompt(_prompt("again")) == "end_turn"
    finally:
        await provider.aclose()
    assert [e["status"] for e in emulator.journal] == [200, 200, 200]
    result = h2.session.p.context.messages[2]["content"][0]
    if isinstance(call["input"], dict):
        assert "alpha" in result["content"] and not result.get("is_error")
    else:
        assert (result["content"], result["is_error"]) == (NOT_AN_OBJECT, True)


async def test_an_odd_tool_call_id_never_kills_the_session_openai(
    make_harness, openai_emulator: Emulator, workspace: Path
) -> None:
    """H1 (break9), OpenAI-compatible: a server that numbers calls `functions.read_file:0` (as some local
    models do) gets its calls run; the stored session stays valid for the Messages API too (a session can
    be resumed with another provider)."""
    (workspace / "a.txt").write_text("alpha\n")
    call = {"type": "tool_use", "id": "functions.read_file:0", **READ_A}
    openai_emulator.script({"answers": [{"reply": [call]}, {"reply": ["done"]}]})
    provider = OpenAICompatProvider("emu-gpt", "sk-test", openai_emulator.url + "/v1", ManualClock())
    try:
        h = make_harness(provider=provider)
        assert await h.session.prompt(_prompt("read")) == "end_turn"
    finally:
        await provider.aclose()
    chats = [e["status"] for e in openai_emulator.journal if e.get("path") == "/v1/chat/completions"]
    assert chats == [200, 200]
    messages = h.session.p.context.messages
    assert _ok({"model": "emu-sonnet", "max_tokens": 10, "messages": messages[:3]})
    assert "alpha" in messages[2]["content"][0]["content"]


def _raw_line(seq: int, kind: str, **payload: Any) -> str:
    record = {"v": 1, "seq": seq, "at": "2026-01-01T00:00:00Z", "kind": kind, **payload}
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


async def test_replay_repairs_a_log_with_an_odd_id_and_a_list_input(make_harness, data_dir: Path) -> None:
    """H1 (break9): a log written before this fix (a tool_use id with `.` and `:`, another whose input is a
    list, their results under the original ids) opens, is repaired in memory, and the next request is
    valid for both validators; the log is not changed."""
    h = make_harness()
    sid = h.session.id
    h.session.close()
    log = data_dir / "sessions" / sid / "log.jsonl"
    uses = [
        {"type": "tool_use", "id": "functions.read_file:0", **READ_A},
        {"type": "tool_use", "id": "toolu_list", "name": "read_file", "input": [1]},
    ]
    results = [
        {"type": "tool_result", "tool_use_id": "functions.read_file:0", "content": "alpha"},
        {"type": "tool_result", "tool_use_id": "toolu_list", "content": NOT_AN_OBJECT, "is_error": True},
    ]
    go = [{"type": "text", "text": "go"}]
    lines = [
        _raw_line(2, "prompt", messageId="msg_1", content=go),
        _raw_line(3, "message", messageId="msg_1", message={"role": "user", "content": go}),
        _raw_line(4, "message", messageId="msg_2", message={"role": "assistant", "content": uses}),
        _raw_line(5, "message", messageId="msg_3", message={"role": "user", "content": results}),
    ]
    with log.open("a") as f:
        f.write("".join(lines))
    before = log.read_bytes()
    h2 = make_harness(answers_of([text("fine")]), resume=sid)
    history = h2.session.p.context.messages
    assert [b["id"] for b in history[1]["content"]] == ["functions_read_file_0", "toolu_list"]
    assert history[1]["content"][1]["input"] == {}
    assert [b["tool_use_id"] for b in history[2]["content"]] == ["functions_read_file_0", "toolu_list"]
    assert log.read_bytes() == before
    assert await h2.session.prompt(_prompt("continue")) == "end_turn"
    assert _ok(h2.requests[0])


async def test_a_complete_call_sharing_its_id_with_a_cut_one_still_runs(
    make_harness, workspace: Path
) -> None:
    """H1 + H3 (break9): a reply cut off at max_tokens whose complete call and cut call share one id: the
    complete call runs (it used to vanish with the cut one), and the model is told which call was cut."""
    (workspace / "a.txt").write_text("alpha\n")
    write = {"name": "write_file", "input": {"path": "t.txt", "content": "x"}}
    h = make_harness(
        answers_of(
            {"reply": [{"tool_use": {**READ_A, "id": "same"}}, {"tool_use": {**write, "id": "same"}}],
             "truncate_tool_json": True},
            [text("ok")],
        )
    )  # fmt: skip
    assert await h.session.prompt(_prompt("read and write")) == "end_turn"
    second = h.requests[1]
    assert _ok(second) and not (workspace / "t.txt").exists()
    assert [b["id"] for b in second["messages"][1]["content"]] == ["same"]
    last_user = second["messages"][-1]["content"]
    assert "alpha" in last_user[0]["content"] and last_user[1]["text"] == cut_notice(["write_file"])


async def test_a_cancelled_reply_is_stored_under_the_same_rules(
    make_harness, emulator: Emulator, workspace: Path
) -> None:
    """H19 + H1 (break9): a reply cancelled mid-stream after a finished tool_use with a lone surrogate in its
    input and an odd id: what is kept of it is stored (U+FFFD, a valid id), the log is written, and the
    next prompt's request is accepted."""
    call = {"type": "tool_use", "id": "call.1", "name": "read_file", "input": {"path": "a\udcff.txt"}}
    emulator.script(
        {"answers": [{"reply": [call, {"type": "text", "text": "and more text"}], "hold_after_events": 8,
                      "gate": "mid"}, {"reply": ["fine"]}]}
    )  # fmt: skip
    provider = AnthropicProvider("emu-sonnet", "sk-test", emulator.url, ManualClock())
    try:
        h = make_harness(provider=provider)
        turn = asyncio.ensure_future(h.session.prompt(_prompt("read")))
        assert await emulator.wait_reached_async("mid", timeout=30)
        await wait_until(
            lambda: any(u["sessionUpdate"] == "agent_message_chunk" for u in h.updates), "a text chunk"
        )
        h.session.cancel()  # the tool_use block (before the text) has been read
        assert await asyncio.wait_for(turn, 30) == "cancelled"
        emulator.gate("mid").open()
        stored = h.session.p.context.messages[1]["content"][0]
        assert stored["id"] == "call_1" and stored["input"] == {"path": "a\ufffd.txt"}
        assert await h.session.prompt(_prompt("go on")) == "end_turn"
        sid = h.session.id
        h.session.close()
        assert (
            make_harness(provider=provider, resume=sid).session.p.context.messages[1]["content"][0] == stored
        )
    finally:
        await provider.aclose()
    assert [e["status"] for e in emulator.journal][-1] == 200


async def test_a_file_name_that_is_not_utf8_never_ends_the_turn(make_harness, workspace: Path) -> None:
    """H19 (break9): a workspace file or folder whose name is not UTF-8 (`\\xff.txt`, an old Latin-1 name, or
    one a checkout planted) ended the turn with a UnicodeEncodeError when list_dir, glob or grep reported
    it: the text was made valid, but the listing beside it (`rawOutput`) was not, and the `tool_call`
    record could not be written. Every tool result and record is written, with U+FFFD for the bytes, and
    the session resumes."""
    root = os.fsencode(workspace)
    os.mkdir(root + b"/d\xfe")
    (Path(os.fsdecode(root + b"/\xff.txt"))).write_bytes(b"needle \xff\n")
    (Path(os.fsdecode(root + b"/d\xfe/n\xe9.py"))).write_bytes(b"needle two\n")
    calls = [
        {"tool_use": {"name": "list_dir", "input": {"path": "."}}},
        {"tool_use": {"name": "glob", "input": {"pattern": "**/*"}}},
        {"tool_use": {"name": "grep", "input": {"pattern": "needle"}}},
        {"tool_use": {"name": "grep", "input": {"pattern": "needle", "output": "files"}}},
    ]
    h = make_harness(answers_of(calls, [text("done")]))
    assert await h.session.prompt(_prompt("look")) == "end_turn"
    results = h.session.p.context.messages[2]["content"]
    assert [r.get("is_error") for r in results] == [None] * 4
    assert all("\ufffd.txt" in r["content"] for r in results)
    json.dumps(h.updates, ensure_ascii=False).encode("utf-8")  # every update can be sent
    sid = h.session.id
    h.session.close()
    assert make_harness(resume=sid).session.p.context.messages[2]["content"] == results
