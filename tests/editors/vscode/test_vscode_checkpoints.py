"""Issue 13, VS Code: "Restore checkpoint" on a user message puts the files and the conversation back to
before it (the chat reloads without the abandoned turn), and "Fork from here" opens a new session that
continues on its own (docs/checkpoints.md)."""

from __future__ import annotations

from typing import Any

from tests.editors.vscode.conftest import Editor
from tests.editors.vscode.harness import Workbench, poll


def _run(command: str) -> dict[str, Any]:
    return {
        "reply": [{"tool_use": {"name": "run_command", "input": {"command": command}}}],
        "stop_reason": "tool_use",
    }


def _text(text: str) -> dict[str, Any]:
    return {"reply": [{"text": text}], "stop_reason": "end_turn"}


def test_restore_checkpoint_then_fork_from_here(editor: Editor) -> None:
    editor.emulator.script(
        {
            "answers": [
                _run("printf 'first\\n' > NOTES.txt"),
                _text("Wrote the first note."),
                _run("printf 'second\\n' >> NOTES.txt && rm idna/py.typed"),
                _text("Added the second note."),
                _text("The fork goes its own way."),
            ]
        }
    )
    notes, typed = editor.workspace / "NOTES.txt", editor.workspace / "idna" / "py.typed"
    assert typed.exists() and not notes.exists()
    wb = Workbench(editor.page)
    wb.wait_loaded()
    wb.open_agent_view()
    wb.widen_sidebar(460)
    poll(lambda: editor.log.events("session"), 20, "the extension to open a session")
    original = editor.log.events("session")[-1]["sessionId"]

    wb.send_prompt("Write the first note.")
    wb.answer("Allow agentd to run", "Allow once")
    wb.expect(wb.chat.get_by_text("Wrote the first note.")).to_be_visible(timeout=20_000)
    wb.send_prompt("Add a second note and drop py.typed.")
    wb.answer("Allow agentd to run", "Allow once")
    wb.expect(wb.chat.get_by_text("Added the second note.")).to_be_visible(timeout=20_000)
    assert notes.read_text() == "first\nsecond\n" and not typed.exists()

    # "Restore checkpoint" on the second message: back to before it, files and conversation
    second = wb.chat.get_by_role("region", name="You").filter(has_text="Add a second note")
    second.get_by_role("button", name="Restore checkpoint").click()
    dialog = wb.modal_dialogs().filter(has_text="Restore checkpoint 2?")
    wb.expect(dialog).to_be_visible(timeout=10_000)
    dialog.get_by_role("button", name="Files and conversation").click()
    wb.expect(wb.chat.get_by_text("Added the second note.")).to_be_hidden(timeout=20_000)
    wb.expect(wb.chat.get_by_text("Restored checkpoint 2:")).to_be_visible(timeout=10_000)
    wb.expect(wb.chat.get_by_text("Wrote the first note.")).to_be_visible()
    assert notes.read_text() == "first\n" and typed.exists()
    rewind = editor.log.events("rewind")[-1]["result"]
    assert rewind["to"] == "2" and rewind["conversation"]["abandonedPrompts"] == [2]

    # "Fork from here" on the first message: a new session without it, which goes on alone
    first = wb.chat.get_by_role("region", name="You").filter(has_text="Write the first note.")
    first.get_by_role("button", name="Fork from here").click()
    poll(lambda: editor.log.events("fork"), 20, "the fork")
    fork = editor.log.events("fork")[-1]["result"]
    assert fork["forkedFrom"] == original and fork["at"] == "1"
    poll(lambda: editor.log.events("session")[-1]["sessionId"] == fork["sessionId"], 20, "the fork to open")
    wb.expect(wb.chat.get_by_text("Wrote the first note.")).to_be_hidden(timeout=10_000)
    wb.send_prompt("Go another way.")
    wb.expect(wb.chat.get_by_text("The fork goes its own way.")).to_be_visible(timeout=20_000)
    sent = str(editor.emulator.journal[-1]["body"]["messages"])
    assert "Go another way." in sent and "first note" not in sent and "second note" not in sent
