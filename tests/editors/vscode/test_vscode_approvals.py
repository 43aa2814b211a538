"""Issue 14, VS Code: approvals in the chat panel beside a diff the user can scroll, not a modal over it.
The edit is allowed with the keyboard from the diff editor after scrolling it to the end, a write is denied
with the panel's button, a command is allowed with a key inside the panel; the panel shows exactly the
options agentd sent; the command runs with the login shell's PATH first (inside code-server `python` was not
found: the editor's own PATH lacked what the shell's start-up adds); a long command title wraps instead of widening the panel; a retry is shown."""

from __future__ import annotations

from typing import Any

from tests.editors.vscode.conftest import Editor
from tests.editors.vscode.harness import Workbench, poll

OLD = '"""Base exception for all IDNA-encoding related problems"""'
NEW = '"""Base exception for all IDNA-encoding related problems."""'
# The command prints the PATH it runs with: the login shell's entries come first (the stand-in login shell
# adds a bin dir the editor's own PATH lacks). A long line: its card title must wrap inside the panel.
COMMAND = (
    "printf 'PATH=%s\\n' \"$PATH\" && python3 -c 'print(42)'  # "
    + "a long comment that makes the title wide " * 4
)


def _tool(name: str, **args: Any) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": name, "input": args}}], "stop_reason": "tool_use"}


def test_in_panel_approval_with_its_diff_allow_and_deny(editor: Editor) -> None:
    editor.emulator.script(
        {
            "answers": [
                {"fault": {"http": 529, "headers": {"retry-after-ms": "3000"}}},
                _tool("edit_file", path="idna/core.py", old_string=OLD, new_string=NEW),
                _tool("write_file", path="NOTES.txt", content="notes\n"),
                _tool("run_command", command=COMMAND),
                {"reply": [{"text": "Done."}], "stop_reason": "end_turn"},
            ]
        }
    )
    wb = Workbench(editor.page)
    wb.wait_loaded()
    wb.open_agent_view()
    wb.widen_sidebar(460)
    poll(lambda: editor.log.events("session"), 20, "the extension to open a session")
    prompt = "Fix the docstring, write notes, and check python."
    wb.send_prompt(prompt)

    # a retry is shown while it waits
    wb.expect(wb.chat.get_by_text("Retrying in 3 s (attempt 1 failed:")).to_be_visible(timeout=20_000)

    # the edit: the card in the panel, the diff in the editor beside it, no modal dialog
    question = "Allow agentd to edit idna/core.py?"
    card = wb.approval(question)
    wb.expect(card).to_be_visible(timeout=20_000)
    diff_tab = editor.page.get_by_role("tab", name="core.py (current ↔ proposed by agentd)")
    wb.expect(diff_tab).to_be_visible(timeout=10_000)
    assert wb.modal_dialogs().count() == 0
    asked = editor.log.events("approval_asked")[0]
    shown = card.get_by_role("button").filter(has_not_text="Show diff").all()
    assert [b.get_attribute("aria-label") for b in shown] == [o["name"] for o in asked["options"]]
    assert [o["optionId"] for o in asked["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    wb.expect(card).to_contain_text("+1 −1 lines in idna/core.py")

    # scroll the proposed change to its end (the panel does not cover it), then allow from the keyboard
    modified = editor.page.locator(".monaco-diff-editor .editor.modified").first
    lines = modified.locator(".view-lines:not(.line-delete)")
    wb.expect(lines).to_contain_text("class IDNAError", timeout=10_000)
    lines.locator(".view-line").first.click()
    wb.expect(modified.locator(".monaco-editor.focused")).to_have_count(1, timeout=10_000)
    editor.page.keyboard.press("Control+End")
    last = (editor.workspace / "idna" / "core.py").read_text(encoding="utf-8").rstrip("\n").splitlines()[-1]
    wb.expect(lines).to_contain_text(last.strip()[:30], timeout=10_000)
    editor.page.keyboard.press("Control+Enter")
    wb.expect(card).to_be_hidden(timeout=10_000)
    wb.expect(diff_tab).to_be_hidden(timeout=10_000)

    # the write: denied with the panel's button
    wb.answer("Allow agentd to write NOTES.txt?", "Reject")

    # the command: its line in the card; allowed with Ctrl+Enter inside the panel
    cmd_card = wb.approval("Allow agentd to run")
    wb.expect(cmd_card).to_contain_text(f"$ {COMMAND}", timeout=20_000)
    cmd_card.get_by_role("button", name="Allow once", exact=True).focus()
    editor.page.keyboard.press("Control+Enter")
    wb.expect(wb.chat.get_by_text("Done.")).to_be_visible(timeout=20_000)

    answers = [(e["toolCallId"], e["optionId"], e["via"]) for e in editor.log.events("approval")]
    assert answers == [
        ("toolu_emu_2_1", "allow_once", "command"),
        ("toolu_emu_3_1", "reject_once", "button"),
        ("toolu_emu_4_1", "allow_once", "key"),
    ]
    core = (editor.workspace / "idna" / "core.py").read_text(encoding="utf-8")
    assert NEW in core and OLD not in core
    assert not (editor.workspace / "NOTES.txt").exists()
    session = editor.log.events("session")[-1]["sessionId"]
    done = [
        u
        for u in editor.log.updates(session, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    ]
    run = next(u for u in done if u["toolCallId"] == "toolu_emu_4_1")
    assert run["status"] == "completed" and run["rawOutput"]["exitCode"] == 0
    output = run["content"][0]["content"]["text"]
    assert output.startswith("PATH=") and output.split("=", 1)[1].split(":")[0].endswith("login-bin"), output
    assert "42" in output
    shell = editor.log.events("shell_path")[-1]
    assert shell["error"] is None and shell["path"].split(":")[0].endswith("login-bin")

    # the session's title is shown whole above the conversation, and a long command title wraps: the
    # conversation never scrolls sideways
    wb.expect(wb.chat.get_by_label("Session title")).to_have_text(prompt)
    overflow = editor.page.frame_locator("iframe.webview").frame_locator("#active-frame").locator("#log")
    assert overflow.evaluate("n => n.scrollWidth <= n.clientWidth + 1")
    assert [e["stopReason"] for e in editor.log.events("prompt_result")] == ["end_turn"]
