"""The whole job on a real project from Neovim (TESTING.md §1.8): idna 3.10 from `.ci/fetch-real-project.sh`.

One turn plans with todo_write, reads README.rst, edits the open idna/core.py (approved in the editor),
runs the package's own tests with run_command (approved), completes the plan and ends. Then the daemon is
killed with SIGKILL (pid from the session's lock file); the next `:Agentd` restarts it, reloads the session
and continues, and the emulator accepts that request with the history intact.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import REPO, Nvim, missing, scrub

PROJECT = REPO / ".cache" / "real-project" / "idna-3.10"
TESTS = "python -m unittest discover -s tests -t ."
PROMPTS = [
    "Make the 'Label too long' error say what the limit is, and check that the tests still pass.",
    "Also mention the change in HISTORY.rst.",
]
TITLE = PROMPTS[0][:77] + "..."  # the session title: the first prompt's first line, cut to 80 characters
OLD = 'raise IDNAError("Label too long")'
NEW = 'raise IDNAError("Label too long (the limit is 63 octets)")'


def _todos(*statuses: str) -> dict[str, Any]:
    items = ["Read README.rst", "Improve the 'Label too long' message", "Run the package's tests"]
    return {"todos": [{"content": c, "status": s} for c, s in zip(items, statuses, strict=True)]}


def _use(name: str, **inp: Any) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": inp}}


SCENARIO = {
    "answers": [
        {"reply": [{"text": "I'll plan first."}, _use("todo_write", **_todos("in_progress", "pending", "pending"))],
         "stop_reason": "tool_use"},
        {"reply": [_use("read_file", path="README.rst")], "stop_reason": "tool_use"},
        {"reply": [_use("todo_write", **_todos("done", "in_progress", "pending"))], "stop_reason": "tool_use"},
        {"reply": [{"text": "Naming the limit."},
                   _use("edit_file", path="idna/core.py", old_string=OLD, new_string=NEW, replace_all=True)],
         "stop_reason": "tool_use"},
        {"reply": [_use("todo_write", **_todos("done", "done", "in_progress"))], "stop_reason": "tool_use"},
        {"reply": [_use("run_command", command=TESTS)], "stop_reason": "tool_use"},
        {"reply": [_use("todo_write", **_todos("done", "done", "done"))], "stop_reason": "tool_use"},
        {"reply": [{"text": "Done: the message names the limit and the tests pass."}], "stop_reason": "end_turn"},
        {"expect": {"last_user_text": PROMPTS[1]},
         "reply": [{"text": "HISTORY.rst is next."}], "stop_reason": "end_turn"},
    ]
}  # fmt: skip
PLAN_DONE = {
    "lines": [
        "[x] Read README.rst",
        "[x] Improve the 'Label too long' message",
        "[x] Run the package's tests",
    ],
    "winbar": "agentd plan · 3/3 done",
}
HISTORY = [
    "I'll plan first.",
    "  ✓ Update todos (3 items)",
    "  ✓ Read README.rst",
    "  ✓ Update todos (3 items)",
    "Naming the limit.",
    "  ✓ Edit idna/core.py (+2 -2)",
    "  ✓ Update todos (3 items)",
    f"  ✓ Run `{TESTS}` (exit 0)",
    "  ✓ Update todos (3 items)",
    "Done: the message names the limit and the tests pass.",
]


def _strip_cache_control(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_cache_control(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_strip_cache_control(v) for v in obj]
    return obj


def _tool_result_text(body: dict[str, Any], tool_use_id: str) -> str:
    for msg in body["messages"]:
        for block in msg["content"] if isinstance(msg["content"], list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                content = block.get("content")
                if isinstance(content, str):
                    return content
                return "".join(c.get("text", "") for c in content or [])
    return ""


def test_whole_job_on_idna_then_kill_and_resume(nvim: Nvim, emulator: Emulator, tmp_path: Path) -> None:
    if not (PROJECT / ".complete").exists():
        missing(f"{PROJECT} is missing: run `bash .ci/fetch-real-project.sh`")
    ws = tmp_path / "idna"
    shutil.copytree(PROJECT, ws, ignore=shutil.ignore_patterns("__pycache__", ".complete"))
    emulator.script(SCENARIO)
    out = nvim.run(
        "real_project",
        AGENTD_WS=str(ws),
        AGENTD_FILE="idna/core.py",
        AGENTD_PROMPTS=PROMPTS,
        AGENTD_PICKS={"agentd.approval": ["Allow once", "Allow once"]},
    )
    got = scrub({k: v for k, v in out.items() if k != "_seconds"}, {str(ws): "<ws>"})
    selects = got.pop("selects")
    assert [(s["prompt"], s["picked"]) for s in selects] == [
        ("agentd: Edit idna/core.py (+2 -2 lines). Allow?", "Allow once"),
        (f"agentd: Run `{TESTS}` in <ws>. Allow?", "Allow once"),
    ]
    assert selects[1]["details"] == [f"agentd asks: Run `{TESTS}`", "Run a shell command in <ws>", "",
                                     f"$ {TESTS}", "(cwd <ws>)"]  # fmt: skip
    plan_lines = [p["window"]["lines"] for p in got.pop("plans")]
    assert plan_lines == [
        ["[~] Read README.rst", "[ ] Improve the 'Label too long' message", "[ ] Run the package's tests"],
        ["[x] Read README.rst", "[~] Improve the 'Label too long' message", "[ ] Run the package's tests"],
        ["[x] Read README.rst", "[x] Improve the 'Label too long' message", "[~] Run the package's tests"],
        PLAN_DONE["lines"],
        # the reload after the crash replays every plan, then the closing one
        ["[~] Read README.rst", "[ ] Improve the 'Label too long' message", "[ ] Run the package's tests"],
        ["[x] Read README.rst", "[~] Improve the 'Label too long' message", "[ ] Run the package's tests"],
        ["[x] Read README.rst", "[x] Improve the 'Label too long' message", "[~] Run the package's tests"],
        PLAN_DONE["lines"],
        PLAN_DONE["lines"],
    ]
    assert got == {
        "events": [
            {"event": "AgentdSession", "action": "new", "sessionId": "<sid>"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdApproval", "sessionId": "<sid>", "toolCallId": "toolu_emu_4_1"},
            {"event": "AgentdApproval", "sessionId": "<sid>", "toolCallId": "toolu_emu_6_1"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 9},
            {"event": "AgentdSession", "action": "load", "sessionId": "<sid>"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
            {"event": "AgentdExit", "client_id": 2, "code": 0, "signal": 0},
        ],
        "turn1": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
        "plan1": PLAN_DONE,
        "chat1": {
            "lines": [
                "> " + PROMPTS[0],
                "",
                *HISTORY,
                "── end_turn · 8 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
            ],
            "winbar": "end_turn · ctx <share>% · $<cost>",
        },
        "buffer_matches_disk": True,
        "modified": False,
        "session": "<sid>",
        "lock_pid_is_daemon": True,
        "old_client_stopped": True,
        "chat_after_kill": {
            "lines": [
                "> " + PROMPTS[0],
                "",
                *HISTORY,
                "── end_turn · 8 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
            ],
            "winbar": "agentd exited (code 0, signal 9)",
        },
        "turn2": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
        "replayed_plans": 5,
        "plan2": PLAN_DONE,
        "chat2": {
            "lines": [
                "> " + PROMPTS[0],
                "",
                *HISTORY,
                "",
                "> " + PROMPTS[1],
                "",
                "HISTORY.rst is next.",
                "── end_turn · 1 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
            ],
            "winbar": "end_turn · ctx <share>% · $<cost>",
        },
        "session2": "<sid>",
        "new_client": True,
    }
    core = (ws / "idna" / "core.py").read_text(encoding="utf-8")
    assert (core.count(NEW), core.count(OLD)) == (2, 0)
    journal = emulator.journal
    assert [e["status"] for e in journal] == [200] * 9
    test_output = _tool_result_text(journal[6]["body"], "toolu_emu_6_1")
    assert ("Ran 6256 tests" in test_output, "OK (skipped=485)" in test_output) == (True, True), test_output
    before, after = (_strip_cache_control(journal[i]["body"]["messages"]) for i in (7, 8))
    assert after[: len(before)] == before  # the resumed request carries the whole history, unchanged
