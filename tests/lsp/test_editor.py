"""The editor as the agent's hands (PROTOCOL.md §8): `read_file` sees an unsaved buffer, and `write_file` on
an open file goes through `workspace/applyEdit` (`documentChanges` with the version for VS Code, `changes`
for Neovim); a refused edit gives the model the "did not apply" text and nothing is written to disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env

DISK, BUFFER, NEW = "disk line\n", "buffer line\n", "new text\n"


def scenario(write_result: str, is_error: bool) -> dict[str, Any]:
    return {"answers": [
        {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "notes.md"}}}], "stop_reason": "tool_use"},
        {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": NEW}}}],
         "stop_reason": "tool_use",
         "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": False, "content": "     1\tbuffer line"}},
        {"reply": [{"text": "Done."}], "stop_reason": "end_turn",
         "expect": {"tool_result_for": "toolu_emu_2_1", "is_error": is_error, "content": write_result}},
    ]}  # fmt: skip


@pytest.mark.parametrize("applied", [True, False])
async def test_unsaved_buffer_read_and_write_through_apply_edit(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any, applied: bool
) -> None:
    note = workspace / "notes.md"
    note.write_text(DISK, encoding="utf-8")
    result = ("Wrote 9 bytes to notes.md." if applied else
              "The editor did not apply the edit to notes.md (the user typed meanwhile); read the file again and retry.")  # fmt: skip
    emulator.script(scenario(result, not applied))
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    uri = note.resolve().as_uri()
    d.client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=BUFFER)))  # fmt: skip

    def apply(params: types.ApplyWorkspaceEditParams) -> dict[str, Any]:
        if not applied:
            return {"applied": False, "failureReason": "the user typed meanwhile"}
        d.client.text_document_did_change(types.DidChangeTextDocumentParams(  # as an editor does
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=NEW)]))  # fmt: skip
        return {"applied": True}

    d.rec.apply_answer = apply
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Rewrite the notes.") == "end_turn"

    read = [u for u in d.rec.of(sid, "tool_call_update") if u["toolCallId"] == "toolu_emu_1_1"][-1]
    assert (read["rawOutput"], read["content"][0]["content"]["text"]) == (
        {"lines": 1, "bytes": 12, "source": "buffer"}, "     1\tbuffer line")  # fmt: skip
    edit = {
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}},
        "newText": NEW,
    }
    if client_name == "vscode":  # declares workspaceEdit.documentChanges
        change: dict[str, Any] = {
            "documentChanges": [{"textDocument": {"uri": uri, "version": 1}, "edits": [edit]}]
        }
    else:
        change = {"changes": {uri: [edit]}}
    sent = [d.client.protocol._converter.unstructure(p) for p in d.rec.apply_edits]
    assert sent == [{"label": "agentd: Write notes.md", "edit": change}]
    assert note.read_text(encoding="utf-8") == DISK  # the open file is never written behind the editor's back
    final = [u for u in d.rec.of(sid, "tool_call_update") if u["toolCallId"] == "toolu_emu_2_1"][-1]
    if applied:
        assert (final["status"], final["rawOutput"]) == ("completed", {"bytes": 9, "appliedVia": "editor"})
    else:
        assert (final["status"], final["content"]) == (
            "failed", [{"type": "content", "content": {"type": "text", "text": result}}])  # fmt: skip


async def test_grep_searches_unsaved_buffers(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    """Issue 11: in the daemon, `grep` searches a file open with unsaved changes as the buffer holds it
    (`didOpen` then an incremental `didChange`), and the file on disk is left alone."""
    src = workspace / "src" / "app.py"
    src.parent.mkdir()
    src.write_text("def old_name():\n    pass\n", encoding="utf-8")
    (workspace / "other.py").write_text("old_name()\n", encoding="utf-8")
    expected = "other.py:1:old_name()\nsrc/app.py:2:    return old_name_typed"
    emulator.script({"answers": [
        {"reply": [{"tool_use": {"name": "grep", "input": {"pattern": "old_name"}}}], "stop_reason": "tool_use"},
        {"reply": [{"text": "Found."}], "stop_reason": "end_turn",
         "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": False, "content": expected}},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    uri = src.resolve().as_uri()
    d.client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                             text="def old_name():\n    pass\n")))  # fmt: skip
    d.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=4), end=types.Position(line=1, character=8)),
            text="new_name():\n    return old_name_typed")]))  # fmt: skip
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Where is old_name used?") == "end_turn"
    final = [u for u in d.rec.of(sid, "tool_call_update") if u["toolCallId"] == "toolu_emu_1_1"][-1]
    assert (final["status"], final["content"][0]["content"]["text"]) == ("completed", expected)
    assert src.read_text(encoding="utf-8") == "def old_name():\n    pass\n"
