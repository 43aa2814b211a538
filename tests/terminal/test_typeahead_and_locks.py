"""The terminal client as found by using it (issue 14 Part 1, T7-T8): `/resume` of a session another process
holds, or of one that does not exist, says so and keeps the session open now (it was closed first, leaving
none, T7); a line typed while the client starts or during a turn and ended with Enter is sent as soon as
the input is up (the terminal turned its Enter into a newline, so it sat in the input unsent, T8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.terminal.test_chat import step
from tests.terminal.test_keys_and_commands import _text_of


def test_resume_of_a_held_session_keeps_this_one_and_typed_ahead_lines_are_sent(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    emulator.script([
        {"reply": [{"text": "Answer one."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "Answer two."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "Still the same session."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "A slow answer."}], "stop_reason": "end_turn", "hold_after_events": 3, "gate": "slow"},
        {"reply": [{"text": "Typed ahead, sent."}], "stop_reason": "end_turn"},
    ])  # fmt: skip
    first = terminals(["--new"], term_env, workspace)
    step(first, "first open", "❯", "new session")
    first.line("One.")
    step(first, "first answer", "Answer one.", "Answer one.")
    (held,) = [p.name for p in (Path(term_env["AGENTD_DATA_DIR"]) / "sessions").iterdir()]

    t = terminals(["--new"], term_env, workspace)
    t.wait_for("new session")  # the header, maybe before the input is up: typed ahead, it is sent (T8)
    t.line("/mode acceptEdits")
    step(t, "second open", "[mode · acceptEdits]", "❯ /mode acceptEdits")
    t.line("Two.")
    step(t, "second answer", "Answer two.", "Answer two.")
    t.line(f"/resume {held}")
    step(t, "held", f"is open in agentd pid {first.child.pid}", "then retry")
    t.line("/resume sess_nope")
    shown = step(t, "unknown", "sess_nope is not in the data dir", "agentd sessions list")
    assert "no session open" not in shown and "kept · continue it" not in shown, "T7: this session stays"
    t.line("Still here?")
    step(t, "still", "Still the same session.", "Still the same session.")
    sent = [_text_of(m) for m in emulator.journal[-1]["body"]["messages"] if m["role"] == "user"]
    assert sent[0].startswith("Two.") and sent[-1].startswith("Still here?")

    t.line("Take your time.")
    assert emulator.wait_reached("slow", timeout=30)
    t.type("And then this.")
    t.key("enter")  # typed during the turn: it waits, then is sent as typed (T8)
    emulator.gate("slow").open()
    step(t, "typed ahead", "Typed ahead, sent.", "A slow answer.", "❯ And then this.")
    assert _text_of(emulator.journal[-1]["body"]["messages"][-1]).startswith("And then this.")

    t.key("ctrl-d")
    first.key("ctrl-d")
    assert (t.exit_code(), first.exit_code()) == (0, 0)
    assert t.garbage() == [] and first.garbage() == []
