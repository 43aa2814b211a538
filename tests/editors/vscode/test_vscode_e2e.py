"""The agentd extension in a real VS Code workbench (code-server) on a real project, idna 3.10 (TESTING.md
§1.6, §1.8): a prompt typed into the chat view, the TODO tree filled live, the approvals answered in
the chat panel with the proposed edit open in the diff editor beside it, the edit landing in the open buffer and on disk, the
package's own tests run by the agent, then Resume Session restoring the plan, and after the daemon is
killed the extension restarts it, reopens the session and the conversation continues with a request
the emulator accepts. Screenshots go to docs/images/."""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

from tests.editors.vscode.conftest import Editor
from tests.editors.vscode.harness import Workbench, poll, screenshot

PROMPT = "Fix the IDNAError docstring and run the tests."
OLD = '"""Base exception for all IDNA-encoding related problems"""'
NEW = '"""Base exception for all IDNA-encoding related problems."""'
TEST_CMD = "python3 -m unittest discover -s tests -t ."
PLAN = ["Read README.rst", "Fix the IDNAError docstring", "Run the test suite"]
FINAL = "Done: the docstring of `IDNAError` now ends with a full stop, and the whole suite passes."
AFTER_RESTART = "Nothing else is pending; the plan is complete."


def todos(*statuses: str) -> dict[str, Any]:
    return {"tool_use": {"name": "todo_write", "input": {"todos": [
        {"content": c, "status": s} for c, s in zip(PLAN, statuses, strict=True)]}}}  # fmt: skip


def scenario() -> dict[str, Any]:
    return {"answers": [
        {"reply": [{"text": "I'll plan this first."}, todos("in_progress", "pending", "pending")],
         "stop_reason": "tool_use"},
        {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "README.rst"}}}], "stop_reason": "tool_use"},
        {"reply": [{"text": "The docstring of `IDNAError` lacks a full stop."},
                   {"tool_use": {"name": "edit_file", "input": {"path": "idna/core.py", "old_string": OLD,
                                                                 "new_string": NEW}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"tool_use": {"name": "run_command", "input": {"command": TEST_CMD}}}], "stop_reason": "tool_use"},
        {"reply": [todos("done", "done", "done")], "stop_reason": "tool_use"},
        {"reply": [{"text": FINAL}], "stop_reason": "end_turn"},
        {"reply": [{"text": AFTER_RESTART}], "stop_reason": "end_turn"},
    ]}  # fmt: skip


def test_real_project_turn_approvals_resume_and_restart(editor: Editor) -> None:
    t0 = time.monotonic()
    editor.emulator.script(scenario())
    wb = Workbench(editor.page)
    wb.wait_loaded()
    wb.open_agent_view()
    wb.widen_sidebar()
    poll(lambda: editor.log.events("session"), 20, "the extension to open a session")
    session_id = editor.log.events("session")[-1]["sessionId"]
    wb.quick_open("core.py")  # open: the edit goes through workspace/applyEdit into this buffer

    wb.send_prompt(PROMPT)
    wb.expect(wb.todo("Run the test suite", "pending")).to_be_visible(timeout=20_000)

    # The edit: asked in the chat panel, with the proposed change open in the diff editor beside it.
    edit_question = "Allow agentd to edit idna/core.py?"
    wb.expect(wb.approval(edit_question)).to_be_visible(timeout=20_000)
    wb.expect(
        editor.page.get_by_role("tab", name=re.compile(r"core\.py \(current ↔ proposed by agentd\)"))
    ).to_be_visible()
    screenshot(editor.page, "vscode-approval")
    wb.answer(edit_question, "Allow once")
    # "always" for a command is its prefix (PROTOCOL.md §6.10), shown as agentd names it
    wb.answer(
        f"Allow agentd to run “{TEST_CMD}”?", "Always allow `python3 -m unittest` commands in this session"
    )

    wb.expect(wb.chat.get_by_text("now ends with a full stop")).to_be_visible(timeout=20_000)
    for item in PLAN:
        wb.expect(wb.todo(item, "done")).to_be_visible()
    wb.expect(wb.editor_text()).to_contain_text("related problems.")
    wb.expect(wb.status_item(r"^agentd: .*cache \d+%.*\$")).to_be_visible()
    screenshot(editor.page, "vscode-chat")
    turn_s = time.monotonic() - t0

    assert [(e["toolCallId"], e["optionId"]) for e in editor.log.events("approval")] == [
        ("toolu_emu_3_1", "allow_once"), ("toolu_emu_4_1", "allow_always_prefix")]  # fmt: skip
    core = editor.workspace / "idna" / "core.py"
    edits = [(e["label"], e["applied"], e["saved"]) for e in editor.log.events("applyEdit")]
    evidence = editor.server.client_log(r"textDocument/did|workspace/applyEdit|Edit idna")
    assert edits == [("agentd: Edit idna/core.py", True, [str(core)])], evidence
    assert core.read_text(encoding="utf-8").count(NEW) == 1  # saved after apply
    run = [
        u for u in editor.log.updates(session_id, "tool_call_update") if u["toolCallId"] == "toolu_emu_4_1"
    ]
    assert (run[-1]["status"], run[-1]["rawOutput"]["exitCode"]) == ("completed", 0)
    assert [e["stopReason"] for e in editor.log.events("prompt_result")] == ["end_turn"]

    # Resume Session restores the plan in a fresh view.
    wb.run_command("agentd: New Session")
    wb.expect(editor.page.get_by_text("No plan yet.")).to_be_visible(timeout=10_000)
    wb.run_command("agentd: Resume Session")
    pick = editor.page.get_by_role("option", name=re.compile(re.escape(PROMPT)))
    wb.expect(pick).to_be_visible(timeout=10_000)
    screenshot(editor.page, "vscode-resume")
    pick.click()
    for item in PLAN:
        wb.expect(wb.todo(item, "done")).to_be_visible(timeout=10_000)
    wb.expect(wb.chat.get_by_role("region", name="You").get_by_text(PROMPT)).to_be_visible()
    wb.expect(wb.chat.get_by_role("region", name="Tool call: Edit idna/core.py, completed")).to_be_visible()
    screenshot(editor.page, "vscode-resumed")
    loads = [e for e in editor.log.events("session") if e["op"] == "load"]
    assert [e["sessionId"] for e in loads] == [session_id]

    # kill -9 the daemon: the client restarts it, the extension reloads the session, the chat goes on.
    pid = editor.log.server_pids()[-1]
    os.kill(pid, signal.SIGKILL)
    poll(lambda: len(editor.log.server_pids()) > 1, 20, "the extension to restart agentd")
    poll(lambda: len([e for e in editor.log.events("session") if e["op"] == "load"]) > 1, 20,
         "the session to be reloaded on the new agentd")  # fmt: skip
    wb.expect(wb.todo("Run the test suite", "done")).to_be_visible(timeout=10_000)
    wb.send_prompt("Anything else?")
    wb.expect(wb.chat.get_by_text(AFTER_RESTART)).to_be_visible(timeout=20_000)
    assert [e["stopReason"] for e in editor.log.events("prompt_result")] == ["end_turn", "end_turn"]
    assert len(editor.emulator.journal) == 7
    print(f"\nvscode e2e: install {editor.server.timings['install_s']:.1f} s, start "
          f"{editor.server.timings['start_s']:.1f} s, first turn {turn_s:.1f} s, all {time.monotonic() - t0:.1f} s")  # fmt: skip


def test_deny_then_cancel_a_running_command(editor: Editor) -> None:
    editor.emulator.script({"answers": [
        {"reply": [{"text": "Writing the notes."},
                   {"tool_use": {"name": "write_file", "input": {"path": "NOTES.txt", "content": "notes\n"}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"tool_use": {"name": "run_command", "input": {"command": "sleep 30"}}}], "stop_reason": "tool_use"},
    ]})  # fmt: skip
    wb = Workbench(editor.page)
    wb.wait_loaded()
    wb.open_agent_view()
    poll(lambda: editor.log.events("session"), 20, "the extension to open a session")

    wb.send_prompt("Write some notes, then wait a while.")
    wb.answer("Allow agentd to write NOTES.txt?", "Reject")
    wb.expect(wb.chat.get_by_role("region", name="Tool call: Write NOTES.txt, denied")).to_be_visible(
        timeout=10_000
    )
    wb.answer("Allow agentd to run “sleep 30”?", "Allow once")
    wb.expect(wb.chat.get_by_role("region", name="Tool call: Run sleep 30, in progress")).to_be_visible(
        timeout=10_000
    )
    wb.chat.get_by_role("button", name="Cancel").click()
    wb.expect(wb.chat.get_by_text("Turn cancelled.")).to_be_visible(timeout=10_000)
    wb.expect(wb.chat.get_by_role("region", name="Tool call: Run sleep 30, cancelled")).to_be_visible()

    assert not (editor.workspace / "NOTES.txt").exists()
    assert [e["optionId"] for e in editor.log.events("approval")] == ["reject_once", "allow_once"]
    assert [e["stopReason"] for e in editor.log.events("prompt_result")] == ["cancelled"]
