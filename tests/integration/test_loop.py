"""The agent loop in-process (CONTRACTS.md §2-§5; seed 000's questions that need a loop; cases C04, C13)."""

from __future__ import annotations

import json
from pathlib import Path

from agentd.core.todos import REMINDER_TEXT
from agentd.permissions.approver import QueueApprover
from agentd.testing.emulator import validate_request as emu_validate
from tests.integration.conftest import answers_of, read_file, text, todo


def _prompt(t: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t}]


def _has_reminder(body: dict) -> bool:
    return REMINDER_TEXT in json.dumps(body, ensure_ascii=False)


def _last_user_blocks(body: dict) -> list[dict]:
    """The final user message's blocks, without the moving breakpoint's `cache_control`."""
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in body["messages"][-1]["content"]]


async def test_reminder_first_appears_in_request_4_and_is_never_stored(
    make_harness, workspace: Path, data_dir: Path
):
    (workspace / "a.txt").write_text("a\n")
    h = make_harness(
        answers_of([read_file("a.txt")], [read_file("a.txt")], [read_file("a.txt")], [text("ok")])
    )
    assert await h.session.prompt(_prompt("read it")) == "end_turn"
    assert [_has_reminder(r) for r in h.requests] == [False, False, False, True]
    last = _last_user_blocks(h.requests[3])[-1]
    assert last == {"type": "text", "text": REMINDER_TEXT}
    assert "cache_control" not in last and all(m["role"] != "system" for m in h.requests[3]["messages"])
    assert REMINDER_TEXT not in json.dumps(h.session.p.context.messages)
    log = (data_dir / "sessions" / h.session.id / "log.jsonl").read_text()
    assert REMINDER_TEXT not in log
    assert [emu_validate(r) for r in h.requests] == [None] * 4


async def test_three_tool_calls_in_one_assistant_message_count_once(make_harness, workspace: Path):
    (workspace / "a.txt").write_text("a\n")
    three = [read_file("a.txt"), read_file("a.txt"), read_file("a.txt")]
    h = make_harness(answers_of(three, three, [text("ok")]))
    await h.session.prompt(_prompt("go"))
    assert (h.session.p.todos.stale_count, [_has_reminder(r) for r in h.requests]) == (
        2,
        [False, False, False],
    )


async def test_successful_todo_write_resets_even_with_other_tools_in_the_same_message(
    make_harness, workspace: Path
):
    """C04: reset on every successful todo_write, also one made beside other tools; never remind right after."""
    (workspace / "a.txt").write_text("a\n")
    h = make_harness(
        answers_of(
            [read_file("a.txt")],
            [read_file("a.txt")],
            [read_file("a.txt"), todo(("x", "in_progress"))],
            [read_file("a.txt")],
            [text("ok")],
        )
    )
    await h.session.prompt(_prompt("go"))
    assert [_has_reminder(r) for r in h.requests] == [False] * 5


async def test_failed_todo_write_does_not_count_as_an_update(make_harness, workspace: Path):
    (workspace / "a.txt").write_text("a\n")
    bad = {"tool_use": {"name": "todo_write", "input": {"todos": [{"content": "x", "status": "bogus"}]}}}
    h = make_harness(answers_of([read_file("a.txt")], [read_file("a.txt")], [bad], [text("ok")]))
    await h.session.prompt(_prompt("go"))
    assert [_has_reminder(r) for r in h.requests] == [False, False, False, True]
    result = _last_user_blocks(h.requests[3])[0]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_scr_3_1",
        "is_error": True,
        "content": "invalid_arguments: todos.0.status: must be one of pending, in_progress, done",
    }


async def test_stale_rounds_zero_disables_the_reminder(make_harness, workspace: Path):
    (workspace / "a.txt").write_text("a\n")
    h = make_harness(answers_of(*([read_file("a.txt")] for _ in range(5)), [text("ok")]), settings=None, **{})
    h.session.p.todos.stale_rounds = 0
    await h.session.prompt(_prompt("go"))
    assert [_has_reminder(r) for r in h.requests] == [False] * 6


async def test_two_sessions_stay_independent(make_harness, workspace: Path):
    """Seed 000: a module-level tracker would let A's stale rounds remind B. agentd's sessions share nothing."""
    (workspace / "a.txt").write_text("a\n")
    a = make_harness(
        answers_of(
            [todo(("A task", "pending"))],
            [read_file("a.txt")],
            [read_file("a.txt")],
            [read_file("a.txt")],
            [text("a done")],
        )
    )
    b = make_harness(answers_of([todo(("B task", "done"))], [text("b done")]))
    await a.session.prompt(_prompt("a"))
    await b.session.prompt(_prompt("b"))
    assert [_has_reminder(r) for r in a.requests] == [False, False, False, False, True]
    assert [_has_reminder(r) for r in b.requests] == [False, False]
    assert (a.session.p.todos.snapshot_json(), b.session.p.todos.snapshot_json()) == (
        '{"todos":[{"content":"A task","status":"pending"}]}',
        '{"todos":[{"content":"B task","status":"done"}]}',
    )
    assert a.session.p.todos is not b.session.p.todos and a.session.p.context is not b.session.p.context


async def test_todo_write_needs_no_approval_but_is_audited(make_harness, data_dir: Path):
    approver = QueueApprover()
    h = make_harness(answers_of([todo(("\u7f16\u5199 README", "done"))], [text("ok")]), approver=approver)
    await h.session.prompt(_prompt("plan"))
    assert approver.requests == []
    audit = [
        json.loads(x) for x in (data_dir / "sessions" / h.session.id / "audit.jsonl").read_text().splitlines()
    ]
    assert [(r["tool"], r["decision"], r["decidedBy"]) for r in audit] == [("todo_write", "allow", "rule")]
    result = _last_user_blocks(h.requests[1])[0]["content"]
    assert result == '{"todos":[{"content":"\\u7f16\\u5199 README","status":"done"}]}'
    assert h.lines[2] == "[Tool] Update todos (1 item) -> completed"  # the plan update shows the list
    plans = [u for u in h.updates if u["sessionUpdate"] == "plan"]
    assert plans == [
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "\u7f16\u5199 README", "priority": "medium", "status": "completed"}],
            "_meta": {"agentd": {"planId": "main", "snapshot": result}},
        }
    ]


async def test_system_and_tools_bytes_identical_across_every_request(make_harness, workspace: Path):
    (workspace / "a.txt").write_text("a\n")
    h = make_harness(
        answers_of(
            [todo(("x", "pending"))],
            [read_file("a.txt")],
            [read_file("a.txt")],
            [read_file("a.txt")],
            [text("ok")],
        )
    )
    await h.session.prompt(_prompt("one"))
    h.provider.scenario["answers"].append({"reply": [text("two")]})  # type: ignore[attr-defined]
    await h.session.prompt(_prompt("two"))
    plain = lambda blocks: [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]  # noqa: E731
    # cache_control is not part of the cache key: its TTL is the `cache.ttl` policy's (agentd.core.breakpoints)
    dumps = {(json.dumps(plain(r["system"])), json.dumps(plain(r["tools"]))) for r in h.requests}
    assert (len(h.requests), len(dumps)) == (6, 1)


async def test_write_asks_and_a_rejection_reaches_the_model(make_harness, workspace: Path, data_dir: Path):
    write = {"tool_use": {"name": "write_file", "input": {"path": "new.txt", "content": "hi"}}}
    approver = QueueApprover.of("reject_once")
    h = make_harness(answers_of([write], [text("ok")]), approver=approver)
    await h.session.prompt(_prompt("write"))
    assert [r.tool_name for r in approver.requests] == ["write_file"]
    assert not (workspace / "new.txt").exists()
    assert _last_user_blocks(h.requests[1])[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_scr_1_1",
        "is_error": True,
        "content": "The user rejected this call; it was not run.",
    }
    assert "[Permission] write_file -> deny (user)" in h.lines


async def test_unknown_tool_and_refused_path_are_denied_before_the_gate(make_harness, data_dir: Path):
    bogus = {"tool_use": {"name": "delete_everything", "input": {}}}
    escape = read_file("../outside.txt")
    h = make_harness(answers_of([bogus, escape], [text("ok")]))
    await h.session.prompt(_prompt("x"))
    results = _last_user_blocks(h.requests[1])
    root = h.session.p.tool_ctx.root
    assert [r["content"] for r in results] == [
        'unknown tool "delete_everything"; available tools: todo_write, read_file, list_dir, grep, glob, '
        "write_file, edit_file, run_command",
        f"Refused: ../outside.txt is outside the workspace ({root}) or reached through a symbolic link; "
        "the call was not run.",
    ]
    audit = [
        json.loads(x) for x in (data_dir / "sessions" / h.session.id / "audit.jsonl").read_text().splitlines()
    ]
    assert [(r["decidedBy"], r.get("outcome")) for r in audit] == [
        ("unknown_tool", None),
        ("invalid_input", "refused_outside_workspace"),
    ]


async def test_empty_end_turn_is_never_stored(make_harness):
    """C13: an empty assistant reply after a tool result is not stored; the next request is valid."""
    h = make_harness(
        answers_of([todo(("x", "pending"))], {"reply": [], "empty_end_turn": True}, [text("fine")])
    )
    assert await h.session.prompt(_prompt("a")) == "end_turn"
    assert await h.session.prompt(_prompt("b")) == "end_turn"
    assert [emu_validate(r) for r in h.requests] == [None, None, None]
    assert _last_user_blocks(h.requests[2])[-1] == {"type": "text", "text": "b"}


async def test_truncated_tool_use_never_runs(make_harness, workspace: Path):
    write = {"tool_use": {"name": "write_file", "input": {"path": "t.txt", "content": "x"}}}
    h = make_harness(
        answers_of(
            {"reply": [text("partial"), write], "stop_reason": "max_tokens", "truncate_tool_json": True}
        )
    )
    assert await h.session.prompt(_prompt("a")) == "max_tokens"
    assert not (workspace / "t.txt").exists()
    assert h.session.p.context.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "partial"}],
    }


async def test_a_retry_retracts_the_partial_reply_once(make_harness):
    """CONTRACTS §6: the new reply streams under a new messageId whose first chunk retracts the old one."""
    h = make_harness(
        answers_of(
            {"reply": [text("a partial reply that will be dropped")], "stream_error_after_events": 4},
            [text("the final reply")],
        )
    )
    assert await h.session.prompt(_prompt("hi")) == "end_turn"
    chunks = [u for u in h.updates if u["sessionUpdate"] == "agent_message_chunk"]
    ids = [c["messageId"] for c in chunks]
    first_new = ids.index(ids[-1])
    retracts = [c.get("_meta", {}).get("agentd", {}).get("retracts") for c in chunks]
    assert (len(set(ids)), retracts[first_new], retracts[:first_new] + retracts[first_new + 1 :]) == (
        2,
        ids[0],
        [None] * (len(chunks) - 1),
    )
    assert "".join(c["content"]["text"] for c in chunks[first_new:]) == "the final reply"
    # PROTOCOL.md §7.2: the editor hears of the retry when it happens, before the new reply streams
    kinds = [u["sessionUpdate"] for u in h.updates]
    retries = [u for u in h.updates if u["sessionUpdate"] == "retry"]
    assert [(r["attempt"], r["message"].startswith("Scripted provider")) for r in retries] == [(1, True)]
    assert kinds.index("retry") < kinds.index("agent_message_chunk", kinds.index("retry"))
    assert h.session.p.context.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "the final reply"}],
    }


async def test_the_title_is_the_first_line_of_the_prompt_not_every_block(make_harness):
    """PROTOCOL.md §7.2: the title is the first line of the first prompt, whitespace collapsed, cut to 80
    characters; a prompt with an attached selection (a second block) used to put the file's URI and text in
    the title (issue 14: a visual-range prompt in Neovim)."""
    h = make_harness(answers_of([text("ok")]))
    prompt = [
        {"type": "text", "text": "  What   are these?\nSecond line of the question."},
        {"type": "text", "text": "file:///p/notes.txt#L2-L3\n```\nbeta\ngamma\n```"},
    ]
    assert await h.session.prompt(prompt) == "end_turn"
    assert h.session.title == "What are these?"
