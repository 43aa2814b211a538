"""TodoTracker and todo_write (CONTRACTS.md §2; seed 000's questions 1, 2, 3 and 7)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentd.audit import AuditLog
from agentd.core.todos import (
    REMINDER_TEXT,
    TodoItem,
    TodoTracker,
    TodoWriteInput,
    apply_reminder,
)
from agentd.permissions.approver import QueueApprover
from agentd.permissions.gate import Decision, Gate
from agentd.tools.base import Preview, ToolContext, ToolOutput, validate_input
from agentd.tools.todo import TodoWrite


def todos(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s} for c, s in pairs]}


def read_round() -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "read_file", "input": {}}],
    }


# -- seed question 1: whole replacement -------------------------------------------------------------


def test_q1_three_items_then_one_leaves_one() -> None:
    tracker = TodoTracker()
    assert tracker.write(todos(("a", "pending"), ("b", "pending"), ("c", "pending")))[0] is True
    ok, text = tracker.write(todos(("b", "in_progress")))
    assert (ok, text) == (True, '{"todos":[{"content":"b","status":"in_progress"}]}')
    assert tracker.snapshot == (TodoItem(content="b", status="in_progress"),)


def test_empty_list_clears_everything() -> None:
    tracker = TodoTracker()
    tracker.write(todos(("a", "done")))
    assert tracker.write({"todos": []}) == (True, '{"todos":[]}')
    assert (tracker.snapshot, tracker.plan_entries(), tracker.carry_over_text()) == ((), [], None)


# -- seed question 2: byte-stable snapshot ----------------------------------------------------------


def test_q2_snapshot_bytes_escape_non_ascii() -> None:
    tracker = TodoTracker()
    ok, text = tracker.write(todos(("编写 README", "done")))
    expected = '{"todos":[{"content":"\\u7f16\\u5199 README","status":"done"}]}'
    assert (ok, text, tracker.snapshot_json()) == (True, expected, expected)
    assert text.isascii()
    assert json.loads(text) == {"todos": [{"content": "编写 README", "status": "done"}]}


def test_snapshot_key_order_and_stripping() -> None:
    tracker = TodoTracker()
    ok, text = tracker.write({"todos": [{"status": "pending", "content": "  Fix the parser bug \n"}]})
    assert (ok, text) == (True, '{"todos":[{"content":"Fix the parser bug","status":"pending"}]}')


def test_snapshot_before_any_write() -> None:
    tracker = TodoTracker()
    assert (tracker.snapshot, tracker.written, tracker.snapshot_json()) == ((), False, '{"todos":[]}')


def test_snapshot_is_immutable() -> None:
    tracker = TodoTracker()
    tracker.write(todos(("a", "done")))
    snap = tracker.snapshot
    assert isinstance(snap, tuple)
    with pytest.raises(ValidationError):
        snap[0].content = "changed"  # type: ignore[misc]
    assert tracker.snapshot_json() == '{"todos":[{"content":"a","status":"done"}]}'


# -- seed question 3: no singleton ------------------------------------------------------------------


def test_q3_a_shared_tracker_leaks_reminders_between_sessions() -> None:
    shared = TodoTracker()  # what `tracker = TodoTracker()` at module level would do
    session_a, session_b = shared, shared
    for _ in range(3):
        session_a.end_round(todo_write_succeeded=False)
    request_b = [{"role": "user", "content": [{"type": "text", "text": "hi from B"}]}]
    assert session_b.before_model(request_b) == apply_reminder(request_b)  # B is reminded by A's rounds
    session_a.write(todos(("A's task", "pending")))
    assert session_b.snapshot_json() == '{"todos":[{"content":"A\'s task","status":"pending"}]}'


def test_q3_separate_trackers_are_independent() -> None:
    session_a, session_b = TodoTracker(), TodoTracker()
    for _ in range(3):
        session_a.end_round(todo_write_succeeded=False)
    request_b = [{"role": "user", "content": [{"type": "text", "text": "hi from B"}]}]
    assert session_b.before_model(request_b) is request_b
    assert (session_a.stale_count, session_b.stale_count) == (3, 0)
    session_a.write(todos(("A's task", "pending")))
    session_b.write(todos(("B's task", "done")))
    assert (session_a.as_dicts(), session_b.as_dicts()) == (
        [{"content": "A's task", "status": "pending"}],
        [{"content": "B's task", "status": "done"}],
    )


# -- seed question 7: no approval for todo_write, but an audit record -------------------------------


async def test_q7_todo_write_is_allowed_by_rule_without_asking_and_is_audited(tmp_path: Path) -> None:
    approver = QueueApprover()
    lines: list[str] = []
    gate = Gate(approver=approver, line_writer=lines.append)
    raw = todos(("编写 README", "pending"))
    decision = await gate.decide("todo_write", raw, Preview(summary="todo_write"), "toolu_01")
    assert decision == Decision(
        decision="allow",
        decided_by="rule",
        rule="default:todo_write=allow",
        detail="default:todo_write=allow",
    )
    assert (approver.requests, lines) == ([], ["[Permission] todo_write -> allow (rule)"])
    audit = AuditLog(tmp_path / "audit.jsonl", now=lambda: datetime(2026, 9, 1, tzinfo=UTC))
    audit.record("sess_1", "toolu_01", "todo_write", raw, decision)
    [record] = audit.records()
    assert {k: v for k, v in record.items() if k not in ("inputDigest", "prev")} == {
        "v": 1,
        "seq": 1,
        "at": "2026-09-01T00:00:00.000Z",
        "sessionId": "sess_1",
        "toolUseId": "toolu_01",
        "tool": "todo_write",
        "input": {"todos": [{"content": "编写 README", "status": "pending"}]},
        "decision": "allow",
        "decidedBy": "rule",
        "rule": "default:todo_write=allow",
    }


# -- validate first, then assign once ---------------------------------------------------------------

INVALID_CASES: list[tuple[Any, str]] = [
    (
        {"todos": [{"content": "a", "status": "started", "note": "x"}]},
        "invalid_arguments: todos.0.status: must be one of pending, in_progress, done; todos.0.note: unknown key",
    ),
    (
        {"todos": [{"content": "ok", "status": "done"}, {"content": " \t\n", "status": "pending"}]},
        "invalid_arguments: todos.1.content: must not be empty",
    ),
    ({"todos": [], "merge": True}, "invalid_arguments: merge: unknown key"),
    ({"todos": [{"content": "a", "status": "done"}] * 51}, "invalid_arguments: todos: at most 50 items"),
    (
        {"todos": [{"content": "a", "status": "done"}] * 50 + [{"content": "", "status": "x"}]},
        "invalid_arguments: todos: at most 50 items; todos.50.content: must not be empty; "
        "todos.50.status: must be one of pending, in_progress, done",
    ),
    ({"todos": "a, b"}, "invalid_arguments: todos: must be a list"),
    ([{"content": "a", "status": "done"}], "invalid_arguments: input: must be an object"),
    ({}, "invalid_arguments: todos: required"),
    ({"todos": [{"content": 7, "status": "done"}]}, "invalid_arguments: todos.0.content: must be a string"),
    ({"todos": ["a"]}, "invalid_arguments: todos.0: must be an object"),
]


def test_invalid_writes_keep_the_same_snapshot_object() -> None:
    tracker = TodoTracker()
    tracker.write(todos(("keep me", "in_progress")))
    old = tracker.snapshot
    results = [(tracker.write(raw), tracker.snapshot is old) for raw, _ in INVALID_CASES]
    assert results == [((False, text), True) for _, text in INVALID_CASES]
    assert tracker.snapshot_json() == '{"todos":[{"content":"keep me","status":"in_progress"}]}'


def test_max_items_is_the_trackers_own_limit() -> None:
    tracker = TodoTracker(max_items=2)
    old = tracker.snapshot
    three = todos(("a", "done"), ("b", "done"), ("c", "done"))
    assert tracker.write(three) == (False, "invalid_arguments: todos: at most 2 items")
    assert tracker.snapshot is old
    assert TodoTracker(max_items=3).write(three)[0] is True


# -- the tool ---------------------------------------------------------------------------------------


class SpyTodoWrite(TodoWrite):
    def __init__(self) -> None:
        self.runs = 0

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        self.runs += 1
        return await super().run(args, ctx)


def ctx_with(tracker: TodoTracker, tmp_path: Path) -> ToolContext:
    return ToolContext(root=tmp_path, state={"todos": tracker})


async def loop_like_call(tool: TodoWrite, raw: Any, ctx: ToolContext) -> ToolOutput:
    """What the loop does: validate through the tool's hook; run only valid input."""
    args, error = tool.validate(raw, ctx)
    if args is None:
        return ToolOutput(content=error or "", is_error=True)
    return await tool.run(args, ctx)


async def test_tool_invalid_input_never_runs_the_handler(tmp_path: Path) -> None:
    tracker = TodoTracker(max_items=2)
    tracker.write(todos(("keep", "pending")))
    old = tracker.snapshot
    tool, ctx = SpyTodoWrite(), ctx_with(tracker, tmp_path)
    outputs = [await loop_like_call(tool, raw, ctx) for raw, _ in INVALID_CASES[:3]]
    too_many = await loop_like_call(tool, todos(("a", "done"), ("b", "done"), ("c", "done")), ctx)
    assert [*outputs, too_many] == [
        *(ToolOutput(content=text, is_error=True) for _, text in INVALID_CASES[:3]),
        ToolOutput(content="invalid_arguments: todos: at most 2 items", is_error=True),
    ]
    assert (tool.runs, tracker.snapshot is old) == (0, True)


async def test_tool_success_returns_the_snapshot_bytes(tmp_path: Path) -> None:
    tracker = TodoTracker()
    tool, ctx = SpyTodoWrite(), ctx_with(tracker, tmp_path)
    out = await loop_like_call(tool, todos(("编写 README", "done"), ("Test", "pending")), ctx)
    snapshot = '{"todos":[{"content":"\\u7f16\\u5199 README","status":"done"},{"content":"Test","status":"pending"}]}'
    assert out == ToolOutput(content=snapshot, title="Update todos (2 items)", raw_output={"items": 2})
    assert tool.runs == 1


def test_generic_validate_input_gives_the_same_texts() -> None:
    tool = TodoWrite()
    assert [validate_input(tool, raw)[1] for raw, _ in INVALID_CASES] == [text for _, text in INVALID_CASES]
    args, error = validate_input(tool, todos(("a", "done")))
    assert (args, error) == (TodoWriteInput(todos=[TodoItem(content="a", status="done")]), None)


def test_tool_metadata_and_definition() -> None:
    tool = TodoWrite()
    definition = tool.definition()
    assert (tool.name, tool.effect, tool.kind) == ("todo_write", "write", "think")
    assert definition["input_schema"] == {
        "additionalProperties": False,
        "properties": {
            "todos": {
                "description": "The COMPLETE TODO list, in order. It replaces the previous list entirely: "
                "an item left out is deleted.",
                "items": {
                    "additionalProperties": False,
                    "properties": {
                        "content": {
                            "description": "What to do, one short line. Must not be empty.",
                            "type": "string",
                        },
                        "status": {
                            "description": "pending, in_progress or done.",
                            "enum": ["pending", "in_progress", "done"],
                            "type": "string",
                        },
                    },
                    "required": ["content", "status"],
                    "type": "object",
                },
                "type": "array",
            }
        },
        "required": ["todos"],
        "type": "object",
    }
    assert definition["description"] == (
        "Record the plan for the current task as a TODO list. The input is always the COMPLETE list: each call "
        "replaces the whole list, nothing is merged, and an item you leave out is deleted. Call it when you "
        "start a task with several steps (write the full plan), when an item starts (in_progress) or is "
        "finished (done), and whenever the plan changes. Keep one item in_progress while you work on it. "
        "Statuses: pending, in_progress, done. The result is the stored list as JSON."
    )
    assert json.dumps(tool.definition()) == json.dumps(definition)  # deterministic bytes


# -- plan, carry-over, restore ----------------------------------------------------------------------


def test_plan_entries_and_meta() -> None:
    tracker = TodoTracker()
    tracker.write(
        todos(("Fix the parser bug", "done"), ("Read CHANGELOG.md", "in_progress"), ("Add entry", "pending"))
    )
    assert tracker.plan_entries() == [
        {"content": "Fix the parser bug", "priority": "medium", "status": "completed"},
        {"content": "Read CHANGELOG.md", "priority": "medium", "status": "in_progress"},
        {"content": "Add entry", "priority": "medium", "status": "pending"},
    ]
    assert tracker.plan_meta() == {"planId": "main", "snapshot": tracker.snapshot_json()}


def test_carry_over_text() -> None:
    tracker = TodoTracker()
    assert tracker.carry_over_text() is None
    tracker.write(todos(("编写 README", "done")))
    assert tracker.carry_over_text() == (
        '\n\nCurrent TODO list (todo_write snapshot):\n{"todos":[{"content":"\\u7f16\\u5199 README","status":"done"}]}'
    )


def test_restore_sets_snapshot_and_counter() -> None:
    tracker = TodoTracker()
    tracker.restore([{"content": "a", "status": "done"}, TodoItem(content="b", status="pending")], counter=2)
    assert (tracker.snapshot_json(), tracker.stale_count, tracker.written) == (
        '{"todos":[{"content":"a","status":"done"},{"content":"b","status":"pending"}]}',
        2,
        True,
    )
    tracker.end_round(todo_write_succeeded=False)
    assert tracker.before_model([{"role": "user", "content": "x"}])[-1]["content"][-1] == {
        "type": "text",
        "text": REMINDER_TEXT,
    }
