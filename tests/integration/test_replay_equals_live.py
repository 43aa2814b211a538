"""Issue 10 Part 1: a `session/load` replay shows what the live turns showed. The core builds each update once
(agentd.protocol.updates with the values of agentd.core.events) for a live turn and for
`Session.replay_updates()`; this test replays a recorded session and compares its updates with the ones the
live turns emitted, through the adapter-neutral fold of tests/replay_fold.py."""

from __future__ import annotations

from pathlib import Path

from agentd.permissions.approver import QueueApprover
from tests.integration.conftest import answers_of, read_file, text, todo
from tests.replay_fold import live_conversation, replay_conversation

WRITE = {"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": "# Notes\n"}}}
EDIT = {
    "tool_use": {"name": "edit_file", "input": {"path": "a.txt", "old_string": "alpha", "new_string": "beta"}}
}
UNKNOWN = {"tool_use": {"name": "no_such_tool", "input": {}}}


def _prompt(t: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t}]


async def test_replay_of_a_recorded_session_equals_what_its_live_turns_emitted(
    make_harness, workspace: Path
) -> None:
    """Two turns with text, a plan, reads, an approved write, a rejected edit, an unknown tool and a mode
    change: the replayed conversation equals the live one item by item, the session info and usage agree."""
    (workspace / "a.txt").write_text("alpha\n")
    scenario = answers_of(
        [text("Planning the work."), todo(("Read a.txt", "in_progress"), ("Write notes", "pending"))],
        [read_file("a.txt")],
        [text("Writing notes."), WRITE, EDIT],
        [UNKNOWN, todo(("Read a.txt", "done"), ("Write notes", "done"))],
        [text("All done.")],
        [text("Second turn: nothing left.")],
    )
    h = make_harness(scenario, approver=QueueApprover.of("allow_once", "reject_once"))
    assert await h.session.prompt(_prompt("Take notes on a.txt")) == "end_turn"
    h.session.set_mode("acceptEdits")
    assert await h.session.prompt(_prompt("Anything else?")) == "end_turn"
    live = list(h.updates)

    for replayed in (h.session.replay_updates(), _reopened(make_harness, h)):
        assert replay_conversation(replayed) == live_conversation(live)
        info = [u for u in live if u["sessionUpdate"] == "session_info_update"]
        assert info == [replayed[0]] and replayed[1] == {
            "sessionUpdate": "current_mode_update",
            "currentModeId": "acceptEdits",
        }
        last_usage = [u for u in live if u["sessionUpdate"] == "usage_update"][-1]
        assert {k: replayed[-1].get(k) for k in ("size", "cost")} == {
            k: last_usage.get(k) for k in ("size", "cost")
        }
    folded = live_conversation(live)
    assert [(c["toolCallId"], c["status"], c["_meta"]["agentd"]["decidedBy"]) for c in folded if c["sessionUpdate"] == "tool_call"] == [
        ("toolu_scr_1_1", "completed", "rule"),
        ("toolu_scr_2_1", "completed", "rule"),
        ("toolu_scr_3_1", "completed", "user"),
        ("toolu_scr_3_2", "failed", "user"),
        ("toolu_scr_4_1", "failed", "unknown_tool"),
        ("toolu_scr_4_2", "completed", "rule"),
    ]  # fmt: skip


def _reopened(make_harness, h) -> list[dict]:
    sid = h.session.id
    h.session.close()
    return make_harness(resume=sid).session.replay_updates()
