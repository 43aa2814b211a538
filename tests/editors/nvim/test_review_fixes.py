"""Fixes from review of the Neovim plugin: an agent edit never overwrites the user's typing (a version
mismatch fails the tool call, PROTOCOL.md §8.2); sessions keep to their own tab's windows; commands issued
before the session is resolved share one resolution; a prompt during an announced load waits for it;
long streams render incrementally; commands without a session do not create one; `doc/tags` is current."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import PLUGIN, REPO, Nvim, scrub

EDIT = {"path": "notes.txt", "old_string": "hello", "new_string": "HELLO AGENT"}
EDIT_SCENARIO = {
    "answers": [
        {
            "reply": [{"text": "Editing."}, {"tool_use": {"name": "edit_file", "input": EDIT}}],
            "stop_reason": "tool_use",
        },
        {
            "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True},
            "reply": [{"text": "It did not apply."}],
            "stop_reason": "end_turn",
        },
    ]
}


def test_edit_refused_when_the_user_typed_meanwhile(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"notes.txt": "hello\n"})
    emulator.script(EDIT_SCENARIO)
    out = nvim.run(
        "edit_race",
        AGENTD_WS=str(ws),
        AGENTD_FILE="notes.txt",
        AGENTD_PROMPT="Shout the greeting.",
        AGENTD_TOOL="toolu_emu_1_1",
        AGENTD_PICKS={"agentd.approval": "Allow once"},
    )
    got = scrub(
        {
            k: out[k]
            for k in (
                "documentChanges",
                "debounce",
                "edit_versioned",
                "apply_results",
                "tool_status",
                "buffer",
                "disk",
                "turn",
            )
        },
        {str(ws): "<ws>"},
    )
    versions = re.search(
        r"version (\d+), the edit is for version (\d+)", out["apply_results"][0]["failureReason"]
    )
    assert versions is not None and int(versions[1]) > int(versions[2])
    got["apply_results"][0]["failureReason"] = re.sub(
        r"version \d+, the edit is for version \d+",
        "version <n>, the edit is for version <m>",
        got["apply_results"][0]["failureReason"],
    )
    assert got == {
        "documentChanges": True,
        "debounce": 0,
        "edit_versioned": True,
        "apply_results": [
            {
                "applied": False,
                "failureReason": "<ws>/notes.txt changed in the editor (version <n>, the edit is for version"
                " <m>); not applied",
            }
        ],
        "tool_status": "failed",
        "buffer": ["typed by the user", "hello"],
        "disk": ["hello"],
        "turn": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
    }
    assert [e["status"] for e in emulator.journal] == [200, 200]


def _plan_answer(label: str) -> list[dict[str, object]]:
    todos = [{"content": f"PLAN-{label} item", "status": "in_progress"}]
    return [
        {
            "reply": [
                {"text": f"Planning {label}."},
                {"tool_use": {"name": "todo_write", "input": {"todos": todos}}},
            ],
            "stop_reason": "tool_use",
        },
        {"reply": [{"text": f"{label} done."}], "stop_reason": "end_turn"},
    ]


def test_two_workspaces_in_two_tabs_keep_their_own_windows(
    nvim: Nvim, emulator: Emulator, tmp_path: Path
) -> None:
    roots = []
    for name in ("ws1", "ws2"):
        ws = tmp_path / name
        (ws / ".git").mkdir(parents=True)
        (ws / "a.txt").write_text(f"{name}\n", encoding="utf-8")
        roots.append(ws)
    emulator.script({"answers": [*_plan_answer("A"), *_plan_answer("B")]})
    out = nvim.run(
        "tabs", AGENTD_WS1=str(roots[0]), AGENTD_WS2=str(roots[1]), AGENTD_PROMPTS=["plan A", "plan B"]
    )
    got = scrub(
        {k: out[k] for k in ("after_turn1", "after_turn2", "back_in_tab1")},
        {str(roots[0]): "<ws1>", str(roots[1]): "<ws2>"},
    )
    end = "── end_turn · 2 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──"
    chat_a = ["> plan A", "", "Planning A.", "  ✓ Update todos (1 item)", "A done.", end]
    chat_b = ["> plan B", "", "Planning B.", "  ✓ Update todos (1 item)", "B done.", end]
    nothing = {"layout": ["<ws1>/a.txt"], "plan": None, "chat": None}
    tab2 = {
        "layout": ["<ws2>/a.txt", "agentd://plan", "agentd://chat", "agentd://input"],
        "plan": ["[~] PLAN-B item"],
        "chat": chat_b,
    }
    assert got == {
        # ws1's turn ran while tab 2 (ws2) was current: its windows wait for a tab that shows ws1
        "after_turn1": {"tab1": nothing, "tab2": {"layout": ["<ws2>/a.txt"], "plan": None, "chat": None}},
        "after_turn2": {"tab1": nothing, "tab2": tab2},
        "back_in_tab1": {
            "tab1": {
                "layout": ["<ws1>/a.txt", "agentd://plan", "agentd://chat", "agentd://input"],
                "plan": ["[~] PLAN-A item"],
                "chat": chat_a,
            },
            "tab2": tab2,
        },
    }


def _text(t: str) -> dict[str, object]:
    return {"reply": [{"text": t}], "stop_reason": "end_turn"}


END1 = "── end_turn · 1 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──"


def test_commands_before_the_session_is_resolved_share_one_resolution(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"notes.txt": "hello\n"})
    emulator.script({"answers": [_text("Answer one."), _text("Answer two."), _text("Answer four.")]})
    paths = {str(ws): "<ws>"}
    first = nvim.run(
        "commands",
        AGENTD_WS=str(ws),
        AGENTD_FILE="notes.txt",
        AGENTD_CMDS=["Agentd first"],
        AGENTD_TURNS=1,
        AGENTD_AFTER=["AgentdSessions"],
    )
    assert scrub(first["chat"], paths)["lines"] == ["> first", "", "Answer one.", END1]
    # the editor's own session is "current", not "open in pid N" (its daemon holds the lock)
    assert [s["items"] for s in scrub(first["selects"])] == [["first (just now, 1 turn, current)"]]

    # `:Agentd`, `:AgentdTodos`, `:Agentd` at once: one load (one replay), one session; the third command
    # finds the prompt of the first running
    second = nvim.run(
        "commands",
        AGENTD_WS=str(ws),
        AGENTD_FILE="notes.txt",
        AGENTD_CMDS=["Agentd second", "AgentdTodos", "Agentd third"],
        AGENTD_TURNS=1,
    )
    got = scrub({k: second[k] for k in ("events", "messages", "sessions", "chat", "plan")}, paths)
    assert got == {
        "events": [
            {"event": "AgentdSession", "action": "load", "sessionId": "<sid>"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 0},
        ],
        "messages": ["agentd: a prompt is still running in this session; wait for it or run :AgentdCancel"],
        "sessions": 1,
        "chat": {
            "lines": ["> first", "", "Answer one.", "", "> second", "", "Answer two.", END1],
            "winbar": "end_turn · ctx <share>% · $<cost>",
        },
        "plan": {"lines": ["(no todos)"], "winbar": "agentd plan · 0/0 done"},
    }

    # `agentd --resume ID` loads the session at start; a prompt issued meanwhile waits for the load
    third = nvim.run(
        "commands",
        AGENTD_WS=str(ws),
        AGENTD_FILE="notes.txt",
        AGENTD_CMDS=["Agentd fourth"],
        AGENTD_TURNS=1,
        AGENTD_CMD=[sys.executable, "-m", "agentd", "--resume", second_sid(second)],
    )
    got = scrub({k: third[k] for k in ("events", "messages", "sessions", "chat")}, paths)
    assert got == {
        "events": [
            {"event": "AgentdSession", "action": "load", "sessionId": "<sid>"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 0},
        ],
        "messages": [],
        "sessions": 1,
        "chat": {
            "lines": [
                "> first",
                "",
                "Answer one.",
                "",
                "> second",
                "",
                "Answer two.",
                "",
                "> fourth",
                "",
                "Answer four.",
                END1,
            ],
            "winbar": "end_turn · ctx <share>% · $<cost>",
        },
    }
    assert [e["status"] for e in emulator.journal] == [200, 200, 200]


def second_sid(out: dict[str, object]) -> str:
    events = out["events"]
    assert isinstance(events, list)
    return str(events[0]["sessionId"])


def test_commands_that_need_a_session_do_not_create_one(
    nvim: Nvim, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"notes.txt": "hello\n"})
    out = nvim.run(
        "commands",
        AGENTD_WS=str(ws),
        AGENTD_FILE="notes.txt",
        AGENTD_CMDS=["AgentdTodos", "AgentdStatus", "AgentdMode readOnly"],
        AGENTD_TURNS=0,
    )
    no = "agentd: no session in this workspace yet; :Agentd {prompt} starts one"
    assert {k: out[k] for k in ("messages", "sessions", "started", "data_sessions", "events")} == {
        "messages": [no, no, no],
        "sessions": 0,
        "started": False,
        "data_sessions": False,
        "events": [],
    }


def test_long_streams_render_only_the_changed_tail(nvim_bin: str, tmp_path: Path) -> None:
    chunks = 3000
    out = Nvim(nvim_bin, tmp_path).run("stream", AGENTD_CHUNKS=str(chunks))
    lines = out["buffer_lines"]
    assert lines > chunks * 2 // 3
    # rewriting the whole buffer per chunk would write ~chunks * lines / 2 lines
    assert out["written"] < 3 * (chunks + lines), out["written"]
    assert {k: out[k] for k in ("matches", "tail", "burst_redraws", "burst_matches")} == {
        "matches": True,
        "tail": ["", "> next", "", "retried"],
        "burst_redraws": 1,
        "burst_matches": True,
    }


DOC_DIR = PLUGIN / "doc"
COMMANDS = [
    "Agentd",
    "AgentdNew",
    "AgentdSessions",
    "AgentdCancel",
    "AgentdTodos",
    "AgentdChat",
    "AgentdStatus",
    "AgentdMode",
    "AgentdRestart",
    "AgentdRewind",
    "AgentdFork",
]


def test_shipped_help_tags_are_current(nvim_bin: str, tmp_path: Path) -> None:
    doc = tmp_path / "doc"
    doc.mkdir()
    shutil.copy(DOC_DIR / "agentd.txt", doc / "agentd.txt")
    tags = sorted(set(re.findall(r"\*([^*\s]+)\*", (DOC_DIR / "agentd.txt").read_text(encoding="utf-8"))))
    out = Nvim(nvim_bin, tmp_path).run("helptags", AGENTD_DOC=str(doc), AGENTD_TAGS=tags)
    # `:help agentd` works with the plugin directory on 'runtimepath' as shipped (no :helptags needed)
    assert out["help"] == dict.fromkeys(tags, True)
    shipped = (DOC_DIR / "tags").read_text(encoding="utf-8").splitlines()
    assert shipped == out["generated"], "doc/tags is stale: run `nvim --headless -c 'helptags doc' -c q`"


def test_lazy_specs_list_every_command() -> None:
    docs = {
        "docs/neovim.md": (REPO / "docs" / "neovim.md").read_text(encoding="utf-8"),
        "doc/agentd.txt": (DOC_DIR / "agentd.txt").read_text(encoding="utf-8"),
    }
    found = {}
    for name, text in docs.items():
        for spec in re.findall(r"cmd = \{([^}]*)\}", text):
            names = re.findall(r"[\"'](\w+)[\"']", spec)
            if names and names[0] == "Agentd":
                found.setdefault(name, []).append(sorted(names))
    assert found == {"docs/neovim.md": [sorted(COMMANDS)] * 2, "doc/agentd.txt": [sorted(COMMANDS)]}
