"""Stale-round counting and the reminder (CONTRACTS.md §3; seed 000's questions 4, 5 and 6; B4)."""

from __future__ import annotations

import copy
from typing import Any

from agentd.core.hooks import Hooks
from agentd.core.todos import REMINDER_TEXT, TodoTracker, apply_reminder

REMINDER_BLOCK = {"type": "text", "text": REMINDER_TEXT}


def tool_use(name: str, i: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def history_request(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "Summarize README.md"}]},
        assistant(tool_use("read_file", n)),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "..."}]},
    ]


def test_reminder_text_is_fixed() -> None:
    assert REMINDER_TEXT == (
        "Keep the TODO list current. Call todo_write with the complete task snapshot when the plan changes."
    )


# -- seed question 4: rounds are counted per assistant message --------------------------------------


def test_q4_three_tool_calls_in_one_assistant_message_count_once() -> None:
    tracker = TodoTracker()
    reply = assistant(
        {"type": "text", "text": "Reading three files."},
        tool_use("read_file", 1),
        tool_use("read_file", 2),
        tool_use("list_dir", 3),
    )
    tracker.observe_reply(reply, todo_write_succeeded=False)
    assert tracker.stale_count == 1


def test_text_only_reply_is_not_a_round() -> None:
    tracker = TodoTracker()
    tracker.end_round(todo_write_succeeded=False)
    tracker.observe_reply(assistant({"type": "text", "text": "Done."}), todo_write_succeeded=False)
    assert tracker.stale_count == 1


def test_successful_todo_write_resets_failed_one_counts() -> None:
    tracker = TodoTracker()
    tracker.end_round(False)
    tracker.end_round(False)
    counts = [tracker.stale_count]
    tracker.end_round(todo_write_succeeded=True)
    counts.append(tracker.stale_count)
    tracker.end_round(todo_write_succeeded=False)  # e.g. a todo_write that failed validation
    counts.append(tracker.stale_count)
    assert counts == [2, 0, 1]


# -- seed question 5: the reminder first appears in request 4 ---------------------------------------


def test_q5_reminder_is_due_before_request_4_not_3() -> None:
    tracker = TodoTracker()
    timeline: list[tuple[int, bool, int]] = []  # (request, reminded, counter after the reply)
    for request in (1, 2, 3):
        due = tracker.reminder_due_and_reset()
        tracker.observe_reply(assistant(tool_use("read_file", request)), todo_write_succeeded=False)
        timeline.append((request, due, tracker.stale_count))
    due_4 = tracker.reminder_due_and_reset()
    assert timeline == [(1, False, 1), (2, False, 2), (3, False, 3)]
    assert (due_4, tracker.stale_count) == (True, 0)
    assert tracker.reminder_due_and_reset() is False  # added to that request only


def test_reminder_right_after_todo_write_is_not_due() -> None:
    tracker = TodoTracker()
    for _ in range(5):
        tracker.end_round(False)
    tracker.end_round(todo_write_succeeded=True)
    assert (tracker.reminder_due_and_reset(), tracker.stale_count) == (False, 0)


def test_stale_rounds_configurable_and_zero_disables() -> None:
    two, off = TodoTracker(stale_rounds=2), TodoTracker(stale_rounds=0)
    for tracker in (two, off):
        for _ in range(2):
            tracker.end_round(False)
    assert [two.reminder_due_and_reset(), off.reminder_due_and_reset()] == [True, False]
    for _ in range(10):
        off.end_round(False)
    assert (off.reminder_due_and_reset(), off.stale_count) == (False, 12)


def test_replay_recomputes_the_counter() -> None:
    live, replayed = TodoTracker(), TodoTracker()
    replies = [
        (assistant(tool_use("read_file", 1)), False),
        (assistant(tool_use("todo_write", 2)), True),
        (assistant(tool_use("read_file", 3)), False),
        (assistant(tool_use("read_file", 4)), False),
        (assistant(tool_use("read_file", 5)), False),
        (assistant(tool_use("read_file", 6)), False),  # the reminder was due before this request
        (assistant({"type": "text", "text": "ok"}), False),
    ]
    for message, fresh in replies:
        live.reminder_due_and_reset()
        live.observe_reply(message, fresh)
        replayed.replay_reply(message, fresh)
    assert (live.stale_count, replayed.stale_count) == (1, 1)


# -- seed question 6: the reminder is never in the history ------------------------------------------


def test_q6_reminder_goes_into_a_copy_only() -> None:
    history = history_request(1)
    before = copy.deepcopy(history)
    request = apply_reminder(history)
    assert history == before  # the stored history never sees it
    assert request == [
        history[0],
        history[1],
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "..."}, REMINDER_BLOCK],
        },
    ]
    assert request is not history and request[-1] is not history[-1]
    assert request[-1]["content"] is not history[-1]["content"]
    assert REMINDER_TEXT not in repr(history)


def test_reminder_goes_after_a_cache_breakpoint_block() -> None:
    last = {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}
    history = [{"role": "user", "content": [last]}]
    assert apply_reminder(history) == [{"role": "user", "content": [last, REMINDER_BLOCK]}]
    assert history == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}],
        }
    ]


def test_reminder_on_string_content_and_final_user_message_only() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "first"},
        assistant({"type": "text", "text": "hi"}),
        {"role": "user", "content": "second"},
    ]
    assert apply_reminder(history) == [
        {"role": "user", "content": "first"},
        assistant({"type": "text", "text": "hi"}),
        {"role": "user", "content": [{"type": "text", "text": "second"}, REMINDER_BLOCK]},
    ]
    assert history[-1] == {"role": "user", "content": "second"}


async def test_before_model_hook_adds_reminder_once_and_logs() -> None:
    tracker = TodoTracker()
    lines: list[str] = []
    hooks = Hooks(line_writer=lines.append)
    hooks.add_before_model("todo_reminder", tracker.before_model)
    history = history_request(1)
    sent: list[bool] = []
    for _ in range(5):
        request = hooks.before_model(history)
        sent.append(any(REMINDER_BLOCK in m["content"] for m in request if isinstance(m["content"], list)))
        tracker.end_round(todo_write_succeeded=False)
        assert request is history or request[:-1] == history[:-1]
    assert sent == [False, False, False, True, False]
    assert lines == ["[Hook] before_model todo_reminder: changed the request (3 messages)"]
    assert REMINDER_TEXT not in repr(history)
