"""`:AgentdRewind` (with its picker) and `:AgentdFork` in a real Neovim against a real daemon (issue 13;
docs/checkpoints.md): files and conversation go back to before prompt 2, the file the user changed is kept
after they say so, the chat shows the rewound conversation, and the fork continues on its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim


def command(cmd: str) -> dict[str, object]:
    return {"tool_use": {"name": "run_command", "input": {"command": cmd}}}


SCENARIO = {
    "answers": [
        {"reply": [command("printf two > a.txt")], "stop_reason": "tool_use"},
        {"reply": [{"text": "turn one"}], "stop_reason": "end_turn"},
        {"reply": [command("printf three > a.txt && printf new > made.txt")], "stop_reason": "tool_use"},
        {"reply": [{"text": "turn two"}], "stop_reason": "end_turn"},
        {"reply": [{"text": "the fork goes on"}], "stop_reason": "end_turn"},
    ]
}
PICKS = {
    "agentd.approval": ["Allow once", "Allow once"],
    "agentd.checkpoint": "^2  second",
    "agentd.rewind": "Files and conversation",
    "agentd.overwrite": "Keep my changes",
}


def test_rewind_with_the_picker_then_fork(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"a.txt": "one", "keep.txt": "mine"})
    emulator.script(SCENARIO)
    out = nvim.run("checkpoints", AGENTD_WS=str(ws), AGENTD_PICKS=PICKS)
    assert out["commands"] == {"rewind": True, "fork": True}
    assert out["before_rewind"] == {"a": "three", "made": "new", "keep": "mine"}
    picked = {s["kind"]: s["picked"] for s in out["selects"] if s["kind"] != "agentd.approval"}
    assert picked["agentd.checkpoint"].startswith("2  second (") and picked["agentd.rewind"] == (
        "Files and conversation") and picked["agentd.overwrite"] == "Keep my changes"  # fmt: skip
    items = next(s["items"] for s in out["selects"] if s["kind"] == "agentd.checkpoint")
    assert [i.split("  ")[0] for i in items] == ["2", "1"]  # newest first
    # back to before prompt 2; keep.txt stays the user's
    assert out["after_rewind"] == {"a": "two", "made": None, "keep": "the user was here\n"}
    assert out["rewind"]["files"]["kept"] == [{"path": "keep.txt", "reason": "changed_by_user"}]
    assert out["rewind"]["conversation"]["abandonedPrompts"] == [2]
    chat = "\n".join(out["chat_after_rewind"])
    assert "> first" in chat and "turn one" in chat and "second" not in chat
    fork = out["fork"]
    assert fork["result"]["forkedFrom"] == out["session"] and fork["session"] != out["session"]
    assert out["active_after_fork"] == fork["session"]
    fork_chat = "\n".join(out["chat_fork"])
    assert "> first" in fork_chat and "> third" in fork_chat and "the fork goes on" in fork_chat
    last = emulator.journal[-1]["body"]["messages"]
    assert "third" in str(last) and "second" not in str(last) and "turn two" not in str(last)
