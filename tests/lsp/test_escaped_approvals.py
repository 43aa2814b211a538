"""H20 over LSP: an approval shows what will run. Bidi controls and invisible characters in a command reach
neither the `requestPermission` texts (title, command line, description) nor the `showMessageRequest`
fallback (message and logged details) as they are: they are escaped (`\\u202e`); `rawInput` stays exact
for the client, which escapes what it shows of it (tests/editors/nvim/test_escapes.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env

# Looks like `echo safe # txt.sh` in a bidi-aware view; runs `rm -rf` on the disguised path.
COMMAND = "echo safe\u2067 # \u202ehs.txt\u2069\u200b; rm -rf ./build"
SHOWN = "echo safe\\u2067 # \\u202ehs.txt\\u2069\\u200b; rm -rf ./build"
SCENARIO = {"answers": [
    {"reply": [{"tool_use": {"name": "run_command", "input": {"command": COMMAND}}}], "stop_reason": "tool_use"},
    {"reply": [{"text": "Not run."}], "stop_reason": "end_turn"},
]}  # fmt: skip
REJECT = {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


async def test_request_permission_texts_escape_the_command(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    """H20: title, `_meta.agentd.title` and the `$ command` text are escaped; `rawInput` is exact."""
    emulator.script(SCENARIO)
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    d.rec.permission_answer = lambda _p: REJECT
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Clean up.") == "end_turn"
    (params,) = d.rec.permissions
    call = params["toolCall"]
    assert call["title"] == params["_meta"]["agentd"]["title"] == f"Run `{SHOWN}`"
    assert call["content"][0]["content"]["text"] == f"$ {SHOWN}\n(cwd {workspace.resolve()})"
    assert call["rawInput"]["command"] == COMMAND
    update = d.rec.of(sid, "tool_call")[0]
    assert update["title"] == f"Run `{SHOWN}`"  # the transcript's title too


async def test_the_show_message_request_fallback_escapes_the_command(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    """H20: the generic client's question and the logged details show the escapes, never the controls."""
    emulator.script(SCENARIO)
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace], agentd_cap=None)
    d.rec.message_answer = lambda _p: {"title": "Deny"}
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Clean up.") == "end_turn"
    (asked,) = d.rec.message_requests
    assert asked["message"] == (
        f"agentd ({workspace.name}): run_command wants to run `{SHOWN}` in {workspace.resolve()}. Allow?"
    )
    (details,) = [m.message for m in d.client.log_messages if m.type == 3]
    assert SHOWN in details and "\u202e" not in details and "\u200b" not in details
