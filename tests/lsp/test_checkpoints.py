"""`agentd/session/checkpoints`, `agentd/session/rewind` and `agentd/session/fork` over LSP (PROTOCOL.md
§6.12-§6.14, §7.2 `checkpoint`; issue 13): a real daemon, the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import AGENTD_CAP, daemon_env

CHECKPOINTS_CAP = {**AGENTD_CAP, "checkpoints": True}


def command(tid: str, cmd: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "run_command", "input": {"command": cmd}}


async def test_checkpoints_rewind_and_fork_over_lsp(
    emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    """A prompt's checkpoint reaches the client with the prompt's messageId (the editors' "Restore
    checkpoint"); a dry run names what would change; the rewind restores the files and drops the turn from
    the conversation; a fork at the end holds it; a bad target is InvalidParams saying what to do."""
    (workspace / "keep.txt").write_text("original\n")
    emulator.script({"answers": [
        {"reply": [command("c1", "printf made > made.txt && printf changed > keep.txt")]},
        {"reply": [{"type": "text", "text": "done"}]},
    ]})  # fmt: skip
    d = await daemons("vscode", daemon_env(data_dir, emulator.url), [workspace], agentd_cap=CHECKPOINTS_CAP)
    sid = await d.new(workspace)
    assert await d.prompt(sid, "change the files") == "end_turn"
    live = d.rec.of(sid, "checkpoint")
    assert [(u["checkpointId"], u["before"]) for u in live] == [
        ("1", "prompt"), ("1.1", "run_command"), ("1.end", "turn_end")]  # fmt: skip
    prompt_id = d.rec.of(sid, "checkpoint")[0]["messageId"]
    listed = await d.request("agentd/session/checkpoints", {"sessionId": sid})
    first = listed["checkpoints"][0]
    assert (first["id"], first["messageId"], first["active"], first["text"]) == (
        "1", prompt_id, True, "change the files")  # fmt: skip

    fork = await d.request("agentd/session/fork", {"sessionId": sid})
    assert fork["forkedFrom"] == sid and fork["messages"] == 4

    dry = await d.request("agentd/session/rewind", {"sessionId": sid, "to": 1, "dryRun": True})
    assert dry["done"] is False and dry["files"]["removed"] == ["made.txt"]
    assert (workspace / "made.txt").exists()
    done = await d.request("agentd/session/rewind", {"sessionId": sid, "to": "1"})
    assert done["done"] is True and done["conversation"]["messagesAfter"] == 0
    assert not (workspace / "made.txt").exists() and (workspace / "keep.txt").read_text() == "original\n"
    assert done["checkpoint"] == "r1"

    bad = await d.error("agentd/session/rewind", {"sessionId": sid, "to": "1.1"})
    assert bad["code"] == -32602 and "--files-only" in bad["message"]
    again = await d.request("agentd/session/checkpoints", {"sessionId": sid})
    assert [r["to"] for r in again["rewinds"]] == ["1"] and not again["checkpoints"][0]["active"]
    await d.request("agentd/session/load", {"sessionId": fork["sessionId"], "cwd": str(workspace)})
    replayed = d.rec.of(fork["sessionId"], "user_message_chunk")
    assert [u["content"]["text"] for u in replayed] == ["change the files"]
