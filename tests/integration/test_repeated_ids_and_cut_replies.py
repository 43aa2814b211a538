"""Issue 9 H1 (case C16): a reply that repeats a tool_use id; issue 9 H3: a reply cut off at max_tokens with
one complete and one cut tool_use. The loop, replay, the Anthropic and OpenAI-compatible providers, and the
Hypothesis property of the acceptance: random replies with repeated ids never produce a request the
validator rejects."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentd.clock import ManualClock
from agentd.config import load_settings
from agentd.core.factory import create_session, open_session
from agentd.core.replies import cut_notice, repeat_text
from agentd.core.validate import validate_request
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.base import ModelRequest
from agentd.providers.openai_compat import ChatAccumulator, OpenAICompatProvider
from agentd.providers.scripted import ScriptedProvider
from agentd.testing.emulator import Emulator
from agentd.testing.emulator import validate_request as emu_validate
from tests.integration.conftest import answers_of, text

READ_A = {"name": "read_file", "input": {"path": "a.txt"}}
READ_B = {"name": "read_file", "input": {"path": "b.txt"}}
WRITE_T = {"name": "write_file", "input": {"path": "t.txt", "content": "x"}}


def _use(spec: dict[str, Any], tid: str | None = None) -> dict[str, Any]:
    return {"tool_use": {**spec, **({"id": tid} if tid else {})}}


def _prompt(t: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t}]


def _plain(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def _audit(data_dir: Path, sid: str) -> list[dict[str, Any]]:
    path = data_dir / "sessions" / sid / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _ok(body: dict[str, Any]) -> bool:
    return validate_request(body) is None and emu_validate(body) is None


async def test_a_repeated_id_runs_the_first_call_and_refuses_the_repeat(
    make_harness, workspace: Path, data_dir: Path
) -> None:
    """H1 / C16: the first call with an id runs; the repeat gets a fresh id, one audit record and an
    `is_error` result; the next request is valid for both validators."""
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    h = make_harness(answers_of([_use(READ_A, "dup"), _use(READ_B, "dup")], [text("done")]))
    assert await h.session.prompt(_prompt("read both")) == "end_turn"
    second = h.requests[1]
    assert _ok(second)
    assert [b["id"] for b in second["messages"][1]["content"]] == ["dup", "dup_dup1"]
    results = _plain(second["messages"][2]["content"])
    assert results[1] == {
        "type": "tool_result",
        "tool_use_id": "dup_dup1",
        "content": repeat_text("dup"),
        "is_error": True,
    }
    assert results[0]["tool_use_id"] == "dup" and "alpha" in results[0]["content"]
    audit = _audit(data_dir, h.session.id)
    assert [(r["toolUseId"], r["decision"], r["decidedBy"]) for r in audit] == [
        ("dup", "allow", "rule"),
        ("dup_dup1", "deny", "invalid_input"),
    ]
    finals = [
        u for u in h.updates if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    assert [(u["toolCallId"], u["status"]) for u in finals] == [("dup", "completed"), ("dup_dup1", "failed")]


async def test_an_id_of_the_history_reused_by_a_later_reply_runs_under_a_fresh_id(
    make_harness, workspace: Path
) -> None:
    """H1 / C16: an id the history already holds (a server that numbers calls per reply, or scripted ids
    restarting after a resume) is no repeat: that call runs, under a fresh id."""
    (workspace / "a.txt").write_text("alpha\n")
    h = make_harness(answers_of([_use(READ_A, "x")], [text("one")], [_use(READ_A, "x")], [text("two")]))
    assert await h.session.prompt(_prompt("first")) == "end_turn"
    assert await h.session.prompt(_prompt("second")) == "end_turn"
    last = h.requests[3]
    assert _ok(last)
    result = _plain(last["messages"][-1]["content"])[0]
    assert (result["tool_use_id"], result.get("is_error"), "alpha" in result["content"]) == (
        "x_dup1",
        None,
        True,
    )


def _block(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


def _raw_line(seq: int, kind: str, **payload: Any) -> str:
    record = {"v": 1, "seq": seq, "at": "2026-01-01T00:00:00Z", "kind": kind, **payload}
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


async def test_replay_repairs_a_log_that_already_holds_repeated_ids(make_harness, data_dir: Path) -> None:
    """H1 / C16: a log written before the fix (two tool_uses and two results sharing one id, plus a later
    reply reusing it) opens, is repaired in memory the same way on every resume (the log is not changed),
    and the next request is valid."""
    h = make_harness()
    sid = h.session.id
    h.session.close()
    log = data_dir / "sessions" / sid / "log.jsonl"
    use = {"type": "tool_use", "id": "t", "name": "read_file", "input": {"path": "a.txt"}}
    lines = [
        _raw_line(2, "prompt", messageId="msg_1", content=[_block("go")]),
        _raw_line(3, "message", messageId="msg_1", message={"role": "user", "content": [_block("go")]}),
        _raw_line(4, "message", messageId="msg_2", message={"role": "assistant", "content": [use, use]}),
        *(
            _raw_line(
                5 + k,
                "message",
                messageId=f"msg_{3 + k}",
                message={
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": f"r{k}"}],
                },
            )
            for k in range(3)
        ),
        _raw_line(8, "message", messageId="msg_6", message={"role": "assistant", "content": [use]}),
    ]
    with log.open("a") as f:
        f.write("".join(lines))
    before = log.read_bytes()
    rebuilt = []
    for _ in range(2):
        h2 = make_harness(resume=sid)
        rebuilt.append(h2.session.p.context.messages)
        h2.session.close()
    assert rebuilt[0] == rebuilt[1] and log.read_bytes() == before
    history = rebuilt[0]
    assert [b["id"] for b in history[1]["content"]] == ["t", "t_dup1"]
    assert [(b["tool_use_id"], b["content"]) for b in history[2]["content"]] == [
        ("t", "r0"),
        ("t_dup1", "r1"),
    ]
    assert history[3]["content"][0]["id"] == "t_dup2"
    h3 = make_harness(answers_of([text("fine")]), resume=sid)
    assert await h3.session.prompt(_prompt("continue")) == "end_turn"
    assert _ok(h3.requests[0])


async def test_anthropic_provider_end_to_end_with_a_repeated_id(
    make_harness, emulator: Emulator, workspace: Path
) -> None:
    """H1 / C16 through the real SDK: the emulator (which refuses repeated ids like the service) accepts
    every request of a turn whose first reply repeated an id."""
    (workspace / "a.txt").write_text("alpha\n")
    same = [
        {"type": "tool_use", "id": "toolu_same", **READ_A},
        {"type": "tool_use", "id": "toolu_same", **READ_A},
    ]
    emulator.script({"answers": [{"reply": same}, {"reply": [{"type": "text", "text": "done"}]}]})
    provider = AnthropicProvider("emu-sonnet", "sk-test", emulator.url, ManualClock())
    try:
        h = make_harness(provider=provider)
        assert await h.session.prompt(_prompt("read")) == "end_turn"
    finally:
        await provider.aclose()
    assert [e["status"] for e in emulator.journal] == [200, 200]


async def test_openai_provider_never_returns_a_repeated_id(openai_emulator: Emulator) -> None:
    """H1 / C16, OpenAI-compatible: ids a server repeats within a reply or from the request's history are
    replaced by generated ones, so the next request (checked by the emulator) is valid."""
    history_use = {"type": "tool_use", "id": "call_0", "name": "read_file", "input": {"path": "z"}}
    messages = [
        {"role": "user", "content": [text("go")]},
        {"role": "assistant", "content": [history_use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": "z"}, text("more")],
        },
    ]
    calls = [{"type": "tool_use", "id": "call_0", **READ_A}, {"type": "tool_use", "id": "call_0", **READ_B}]
    openai_emulator.script({"answers": [{"reply": calls}, {"reply": [{"type": "text", "text": "ok"}]}]})
    provider = OpenAICompatProvider("emu-gpt", "sk-test", openai_emulator.url + "/v1", ManualClock())
    try:
        req = ModelRequest(model="emu-gpt", system=[], tools=[], messages=messages, max_tokens=512)
        response = await provider.stream(req, lambda _e: None)
        ids = [b["id"] for b in response.content if b["type"] == "tool_use"]
        assert len(set(ids)) == 2 and "call_0" not in ids
        results = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
        follow = [
            *messages,
            {"role": "assistant", "content": response.content},
            {"role": "user", "content": results},
        ]
        await provider.stream(ModelRequest("emu-gpt", [], [], follow, 512), lambda _e: None)
    finally:
        await provider.aclose()
    assert [e["status"] for e in openai_emulator.journal] == [200, 200]


def test_chat_accumulator_renames_a_repeated_id_within_the_reply() -> None:
    """H1 / C16: two calls (told apart by `index`) that share an id become two tool_uses with distinct ids."""
    acc = ChatAccumulator(["read_file"], used_ids={"c0_old"})
    for index, cid in ((0, "c1"), (1, "c1"), (2, "c0_old")):
        call = {"index": index, "id": cid, "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
        acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    response, _ = acc.finish()
    ids = [b["id"] for b in response.content]
    assert ids[0] == "c1" and len(set(ids)) == 3 and "c0_old" not in ids


async def test_a_cut_call_beside_a_complete_one_is_reported_in_the_next_request(
    make_harness, workspace: Path
) -> None:
    """H3: the complete call runs; the cut one never runs and the next request tells the model, after the
    tool_results, which call was cut off. A resume rebuilds the same history."""
    (workspace / "a.txt").write_text("alpha\n")
    h = make_harness(
        answers_of({"reply": [_use(READ_A), _use(WRITE_T)], "truncate_tool_json": True}, [text("ok")])
    )
    assert await h.session.prompt(_prompt("read and write")) == "end_turn"
    assert not (workspace / "t.txt").exists()
    second = h.requests[1]
    assert _ok(second)
    last_user = _plain(second["messages"][-1]["content"])
    assert [b["type"] for b in last_user] == ["tool_result", "text"]
    assert last_user[1] == {"type": "text", "text": cut_notice(["write_file"])}
    live = h.session.p.context.messages
    h.session.close()
    assert make_harness(resume=h.session.id).session.p.context.messages == live


async def test_a_reply_whose_only_call_was_cut_is_reported_with_the_next_prompt(make_harness) -> None:
    """H3: a turn that ends at max_tokens on a cut call owes the model a note; it goes with the next prompt,
    also after a resume (restored from the log), and only once."""
    h = make_harness(
        answers_of(
            {
                "reply": [text("partial"), _use(WRITE_T)],
                "stop_reason": "max_tokens",
                "truncate_tool_json": True,
            }
        )
    )
    assert await h.session.prompt(_prompt("write it")) == "max_tokens"
    sid = h.session.id
    h.session.close()
    h2 = make_harness(answers_of([text("ok")], [text("again")]), resume=sid)
    assert await h2.session.prompt(_prompt("go on")) == "end_turn"
    assert _plain(h2.requests[0]["messages"][-1]["content"]) == [
        {"type": "text", "text": cut_notice(["write_file"])},
        {"type": "text", "text": "go on"},
    ]
    assert await h2.session.prompt(_prompt("more")) == "end_turn"
    assert json.dumps(h2.requests[1]).count("hit max_tokens") == 1
    assert all(_ok(r) for r in h2.requests)


# ---- the property of the acceptance ------------------------------------------------------------------------

_IDS = st.sampled_from(["a", "b", "a_dup1", "a.b:0", "a_b_0", None])  # "a.b:0": outside the pattern (break9)
_CALL = st.builds(
    lambda spec, tid: _use(spec, tid),
    st.sampled_from(
        [
            READ_A,
            READ_B,
            {"name": "todo_write", "input": {"todos": []}},
            {"name": "nope", "input": {}},
        ]
    ),
    _IDS,
)
_REPLY = st.fixed_dictionaries(
    {"reply": st.lists(st.one_of(_CALL, st.just(text("thinking"))), min_size=1, max_size=4)},
    optional={"truncate_tool_json": st.booleans()},
)


async def _run_turns(root: Path, turns: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each turn's replies (ending with a text reply), every turn in a freshly opened session (scripted ids
    restart, so they collide with the history); returns every request sent."""
    workspace, data = root / "ws", root / "data"
    workspace.mkdir()
    data.mkdir(mode=0o700)
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    cfg = load_settings(workspace, cli={"provider": "scripted"})
    requests: list[dict[str, Any]] = []
    sid = None
    for replies in turns:
        provider = ScriptedProvider(answers_of(*replies, [text("end")]), clock=ManualClock())
        kwargs: dict[str, Any] = dict(settings=cfg, provider=provider, data_dir=DataDir(data),
                                      approver=QueueApprover(), clock=ManualClock(), lines=lambda _l: None)  # fmt: skip
        session = open_session(session_id=sid, **kwargs) if sid else create_session(cwd=workspace, **kwargs)
        sid = session.id
        try:
            await session.prompt(_prompt("go"))
        finally:
            session.close()
        requests += provider.requests
    return requests


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_REPLY, min_size=1, max_size=3), min_size=1, max_size=2))
def test_random_replies_with_repeated_ids_never_produce_an_invalid_request(
    turns: list[list[dict[str, Any]]],
) -> None:
    """H1 / C16 property: random replies with repeated ids (within a reply, across replies and across
    resumes), and ids outside the API's pattern (H1 break9; inputs that are not objects are in
    test_break9_hostile_replies: the scripted provider refuses them), some cut off at max_tokens, never
    produce a request either validator rejects."""
    with tempfile.TemporaryDirectory() as tmp:
        requests = asyncio.run(_run_turns(Path(tmp), turns))
    assert requests and [r for r in requests if not _ok(r)] == []
