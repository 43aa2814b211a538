"""Issue 12 §2 over LSP: for `run_command`, "always" offers the command's prefix (PROTOCOL.md §6.10):
the request carries `allow_always_prefix` with the rule under `_meta.agentd`; picking it allows the next
command with that prefix without asking, never another command or a compound line that adds one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env


def run(command: str) -> dict[str, Any]:
    return {
        "reply": [{"tool_use": {"name": "run_command", "input": {"command": command}}}],
        "stop_reason": "tool_use",
    }


SCENARIO = {"answers": [
    run("ls -la"),
    run("ls -R ."),
    run("ls -a && echo hi"),
    {"reply": [{"text": "Done."}], "stop_reason": "end_turn"},
]}  # fmt: skip


async def test_the_prefix_option_grants_that_prefix_only(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script(SCENARIO)
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    answers = iter(
        [
            {"outcome": {"outcome": "selected", "optionId": "allow_always_prefix"}},
            {"outcome": {"outcome": "selected", "optionId": "reject_once"}},
        ]
    )
    d.rec.permission_answer = lambda _p: next(answers)
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Run them.") == "end_turn"
    first, compound = d.rec.permissions  # `ls -R .` was not asked
    assert [o["optionId"] for o in first["options"]] == [
        "allow_once", "allow_always_prefix", "reject_once", "reject_always"]  # fmt: skip
    assert first["options"][1]["_meta"] == {"agentd": {"rule": "run_command(ls)", "prefix": "ls"}}
    assert first["options"][1]["name"] == "Always allow `ls` commands in this session"
    assert compound["toolCall"]["rawInput"]["command"] == "ls -a && echo hi"
    assert "allow_always_prefix" not in [o["optionId"] for o in compound["options"]]
    finals = [u for u in d.rec.of(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert [u["_meta"]["agentd"]["decidedBy"] for u in finals] == ["user", "grant", "user"]
