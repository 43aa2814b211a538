"""The Neovim bugs of issue 14, one test each (a real Neovim 0.11 against the real daemon and the emulator,
`drivers/steps.lua`), plus `:AgentdRestart` and the visual-range prompt that shows what it attached."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim, scrub

NOTES = "alpha\nbeta\ngamma\n"
END1 = "── end_turn · 1 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──"
END2 = "── end_turn · 2 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──"
NO_INSERT = {"input": {"start_insert": False}}


def _text(t: str, **extra: Any) -> dict[str, Any]:
    return {"reply": [{"text": t}], "stop_reason": "end_turn", **extra}


def _plan(*items: str) -> dict[str, Any]:
    todos = [{"content": c, "status": "pending"} for c in items]
    return {
        "reply": [{"text": "Planning."}, {"tool_use": {"name": "todo_write", "input": {"todos": todos}}}],
        "stop_reason": "tool_use",
    }


def _sessions(nvim: Nvim) -> list[dict[str, Any]]:
    """Every stored session's meta.json."""
    return [json.loads(p.read_text()) for p in sorted(nvim.data_dir.glob("sessions/*/meta.json"))]


def test_resuming_a_session_that_agentdnew_closed_holds_it_again(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: resuming a session that `:AgentdNew` closed left the winbar `closed` and lost context and cost
    (the session stayed marked detached, so the next prompt went nowhere)."""
    ws = make_workspace({"notes.txt": NOTES})
    emulator.script({"answers": [_text("One."), _text("Two.")]})
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_PICKS={"agentd.session": "^first ("},
        AGENTD_STEPS=[
            {"edit": "notes.txt"},
            {"cmd": "Agentd first"},
            {"wait": "turn"},
            {"cmd": "AgentdNew"},
            {"wait": "session", "n": 2},
            {"cmd": "AgentdSessions"},
            {"wait": "session", "n": 3},
            {"wait": "idle"},
            {"snap": "resumed"},
            {"cmd": "Agentd second"},
            {"wait": "turn", "n": 2},
            {"snap": "after"},
        ],
    )
    got = scrub(out["snaps"], {str(ws): "<ws>"})
    assert [e.get("action") for e in out["events"] if e["event"] == "AgentdSession"] == ["new", "new", "load"]
    assert got["resumed"]["chat"]["winbar"] == "idle · ctx <used>/<size> · $<cost>"  # not `closed`
    assert got["after"]["chat"]["lines"] == ["> first", "", "One.", "", "> second", "", "Two.", END1]
    assert [t["stopReason"] for t in (e for e in out["events"] if e["event"] == "AgentdTurnEnd")] == [
        "end_turn",
        "end_turn",
    ]


def test_agentdchat_after_closing_the_chat_keeps_two_columns(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: `:AgentdChat` after closing the chat left three columns (the plan window stayed as a column of
    its own and the chat opened a new one beside it)."""
    ws = make_workspace({"notes.txt": NOTES})
    emulator.script({"answers": [_plan("Read notes"), _text("Planned.")]})
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_OPTS=NO_INSERT,
        AGENTD_STEPS=[
            {"edit": "notes.txt"},
            {"cmd": "Agentd plan it"},
            {"wait": "turn"},
            {"snap": "open"},
            {"cmd": "AgentdChat"},
            {"snap": "closed"},
            {"cmd": "AgentdChat"},
            {"snap": "reopened"},
            # closing the chat window itself (`:close`), then :AgentdChat
            {"lua": "vim.api.nvim_set_current_win(require('agentd.chat').win(nil)); vim.cmd('close')"},
            {"wait": "lua", "expr": "return #vim.api.nvim_tabpage_list_wins(0) == 2"},  # the input follows
            {"snap": "chat_closed_by_hand"},
            {"cmd": "AgentdChat"},
            {"snap": "reopened_again"},
        ],
    )
    snaps = scrub(out["snaps"], {str(ws): "<ws>"})
    column = ["<ws>/notes.txt", "agentd://plan", "agentd://chat", "agentd://input"]
    assert (snaps["open"]["layout"], snaps["open"]["columns"]) == (column, 2)
    assert (snaps["closed"]["layout"], snaps["closed"]["columns"]) == (["<ws>/notes.txt"], 1)
    assert (snaps["reopened"]["layout"], snaps["reopened"]["columns"]) == (column, 2)
    assert snaps["reopened"]["plan"]["lines"] == ["[ ] Read notes"]
    assert snaps["reopened"]["current"] == "agentd://input"
    assert (snaps["chat_closed_by_hand"]["layout"], snaps["chat_closed_by_hand"]["columns"]) == (
        ["<ws>/notes.txt", "agentd://plan"],
        2,
    )
    assert (snaps["reopened_again"]["layout"], snaps["reopened_again"]["columns"]) == (column, 2)


def test_agentd_stderr_is_logged_by_level_not_as_error(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: every stderr line of agentd was logged as `[ERROR]` in lsp.log (its INFO log lines and the
    accounting lines too)."""
    ws = make_workspace({"notes.txt": NOTES})
    emulator.script({"answers": [_text("One.")]})
    nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_CMD=[sys.executable, "-m", "agentd", "-vv"],  # -vv: INFO and DEBUG log lines on stderr
        AGENTD_STEPS=[{"edit": "notes.txt"}, {"cmd": "Agentd hello"}, {"wait": "turn"}],
    )
    log = nvim.lsp_log.splitlines()
    stderr = [line for line in log if '"stderr"' in line]
    assert [line for line in log if line.startswith("[ERROR]")] == []
    assert any(line.startswith("[INFO]") and " INFO " in line for line in stderr), stderr[:5]
    assert not any(" DEBUG " in line for line in stderr)  # DEBUG lines are below lsp.log's INFO level
    # the accounting line arrives once, as window/logMessage (INFO), not as an stderr ERROR
    turn_lines = [line for line in log if "[turn · in=" in line]
    assert len(turn_lines) == 1 and turn_lines[0].startswith("[INFO]"), turn_lines


def test_markdown_highlighting_leaves_underscores_in_words_alone(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: markdown highlighting painted the `_` in `cache_read` red (Vim's markdownError on an
    underscore inside a word) in the chat's end-of-turn line."""
    ws = make_workspace({"notes.txt": NOTES})
    emulator.script({"answers": [_text("Use snake_case names.")]})
    probe = (
        "local b = vim.api.nvim_win_get_buf(require('agentd.chat').win(nil)); local found = {}\n"
        "for i, l in ipairs(vim.api.nvim_buf_get_lines(b, 0, -1, false)) do\n"
        "  local col = l:find('_', 1, true)\n"
        "  if col then vim.api.nvim_buf_call(b, function()\n"
        "    found[#found + 1] = vim.fn.synIDattr(vim.fn.synID(i, col, 1), 'name') end) end\n"
        "end\nreturn found"
    )
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_STEPS=[
            {"lua": "vim.cmd('syntax on')"},
            {"edit": "notes.txt"},
            {"cmd": "Agentd hello"},
            {"wait": "turn"},
            {
                "lua": "return vim.bo[vim.api.nvim_win_get_buf(require('agentd.chat').win(nil))].syntax",
                "as": "syn",
            },
            {"lua": probe, "as": "groups"},
        ],
    )
    assert out["values"]["syn"] == "markdown"
    assert len(out["values"]["groups"]) == 2  # `snake_case` and `cache_read`
    assert "markdownError" not in out["values"]["groups"]


def test_agentdnew_then_agentd_does_not_load_the_previous_session(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: `:AgentdNew` immediately followed by `:Agentd …` also loaded and locked the previous session
    (the prompt's own session resolution raced the new session)."""
    ws = make_workspace({"notes.txt": NOTES})
    emulator.script({"answers": [_text("One."), _text("Two.")]})
    steps: list[dict[str, Any]] = [{"edit": "notes.txt"}, {"cmd": "Agentd first"}, {"wait": "turn"}]
    nvim.run("steps", AGENTD_WS=str(ws), AGENTD_STEPS=steps)
    locked = (
        "local c = vim.lsp.get_clients({ name = 'agentd' })[1]\n"
        "local r = c:request_sync('agentd/session/list', { cwd = vim.fn.getcwd() }, 5000)\n"
        "local out = {}\n"
        "for _, s in ipairs(r.result.sessions) do\n"
        "  local holder = s._meta.agentd.lockedBy\n"
        "  out[s.title or '(untitled)'] = holder ~= nil and holder ~= vim.NIL\n"
        "end\nreturn out"
    )
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_STEPS=[
            {"edit": "notes.txt"},
            {"cmd": "AgentdNew"},
            {"cmd": "Agentd second"},  # at once: the daemon is not even started yet
            {"wait": "turn"},
            {"wait": "idle"},
            {"lua": locked, "as": "locked"},
            {"snap": "end"},
        ],
    )
    assert [e.get("action") for e in out["events"] if e["event"] == "AgentdSession"] == ["new"]
    assert out["values"]["locked"] == {"first": False, "second": True}
    assert scrub(out["snaps"]["end"]["chat"]["lines"]) == ["> second", "", "Two.", END1]


def test_winbar_fits_the_default_width(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: the winbar was cut at the default width (the chat is 40 % of 80 columns: 32 cells, and
    `agentd · Waiting for approval: Edit CHANGELOG.md · ctx …` ran off its end)."""
    ws = make_workspace({"notes.txt": NOTES})
    edit = {"path": "notes.txt", "old_string": "beta", "new_string": "BETA"}
    emulator.script(
        {
            "answers": [
                {"reply": [{"tool_use": {"name": "edit_file", "input": edit}}], "stop_reason": "tool_use"},
                _text("Done."),
            ]
        }
    )
    widths = (
        "local s = { state = 'running', status = 'Waiting for approval: Edit src/some/long/path/module.py',\n"
        "  mode = 'acceptEdits', usage = { used = 123456, size = 200000, cost = { amount = 1.2345 } },\n"
        "  title = 'Refactor the parser so that empty input gives an empty list' }\n"
        "local bad = {}\n"
        "for w = 8, 140 do\n"
        "  local bar = require('agentd.chat').winbar(s, w):gsub('%%%%', '%%')\n"
        "  if vim.fn.strdisplaywidth(bar) > w then bad[#bad + 1] = w end\n"
        "end\n"
        "return { bad = bad, [1] = require('agentd.chat').winbar(s, 32), [2] = require('agentd.chat').winbar(s, 140) }"
    )
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_PICKS={"agentd.approval": "Allow once"},
        AGENTD_STEPS=[
            {"edit": "notes.txt"},
            {"cmd": "Agentd Upper-case the second line, please."},
            {"wait": "turn"},
            {"snap": "default"},
            {"lua": "vim.api.nvim_win_set_width(require('agentd.chat').win(nil), 90)"},
            {"snap": "wide"},  # the winbar is drawn for the window's width at the time
            {"lua": widths, "as": "widths"},
        ],
    )
    approval = out["selects"][0]["chat_winbar"]
    assert approval == "approval: Edit notes.txt"
    default = scrub(out["snaps"]["default"]["chat"])
    assert (default["winbar"], default["width"]) == ("end_turn · ctx <share>% · $<cost>", 32)
    wide = scrub(out["snaps"]["wide"]["chat"])
    assert wide["winbar"] == "end_turn · ctx <used>/<size> · $<cost> · Upper-case the second line, please."
    values = out["values"]["widths"]
    assert values["bad"] == []
    assert values["1"] == "approval: Edit src/some/long/pa…"
    assert values["2"] == (
        "Waiting for approval: Edit src/some/long/path/module.py · mode acceptEdits · ctx 123.5k/200k · "
        "$1.2345 · Refactor the parser so that empty…"
    )


def test_plan_window_after_agentdnew_keeps_its_title(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: the empty plan window after `:AgentdNew` was titled with a raw `agentd://plan/…` name."""
    ws = make_workspace({"notes.txt": NOTES})
    emulator.script({"answers": [_plan("Read notes"), _text("Planned.")]})
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_STEPS=[
            {"edit": "notes.txt"},
            {"cmd": "Agentd plan it"},
            {"wait": "turn"},
            {"snap": "before"},
            {"cmd": "AgentdNew"},
            {"wait": "session", "n": 2},
            {"wait": "idle"},
            {"snap": "after"},
        ],
    )
    before, after = out["snaps"]["before"]["plan"], out["snaps"]["after"]["plan"]
    assert (before["lines"], before["winbar"], before["statusline"]) == (
        ["[ ] Read notes"],
        "agentd plan · 0/1 done",
        " agentd plan",
    )
    assert (after["lines"], after["winbar"], after["statusline"]) == (
        ["(no todos)"],
        "agentd plan · 0/0 done",
        " agentd plan",
    )


def test_session_times_read_as_times_not_iso_strings(nvim_bin: str, tmp_path: Path) -> None:
    """Bug: session times in `:AgentdSessions` were raw ISO strings (`2026-08-30T17:02:11Z`)."""
    now = 1_788_000_000  # 2026-08-29 10:40:00 UTC
    cases = {
        "2026-08-29T10:39:50Z": "just now",
        "2026-08-29T10:35:00Z": "5 min ago",
        "2026-08-29T07:40:00Z": "3 h ago",
        "2026-08-29T01:05:00Z": "today 01:05",
        "2026-08-28T17:02:11Z": "yesterday 17:02",
        "2026-08-01T09:00:00.123Z": "2026-08-01 09:00",
        "garbage": "garbage",
    }
    lua = (
        f"local util = require('agentd.util'); local out = {{}}\n"
        f"for _, iso in ipairs(vim.json.decode({json.dumps(json.dumps(list(cases)))})) do\n"
        f"  out[#out + 1] = util.when(iso, {now})\nend\n"
        "local item = { sessionId = 's', title = 'Fix it', updatedAt = os.date('!%Y-%m-%dT%H:%M:%SZ'),\n"
        "  _meta = { agentd = { turns = 2 } } }\n"
        "return { when = out, item = require('agentd.client').format_session_item(item, nil) }"
    )
    out = Nvim(nvim_bin, tmp_path).run("steps", TZ="UTC", AGENTD_STEPS=[{"lua": lua, "as": "v"}])
    assert out["values"]["v"]["when"] == list(cases.values())
    assert out["values"]["v"]["item"] == "Fix it (just now, 2 turns)"


def test_diff_headers_are_workspace_relative(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """Bug: diff headers used absolute paths (`--- /home/me/src/shop/CHANGELOG.md`); now `a/`, `b/` and
    the path in the workspace, `/dev/null` for a new file, in the approval window and the select's
    details alike."""
    ws = make_workspace({"src/app.py": "x = 1\n"})
    edit = {"path": "src/app.py", "old_string": "x = 1", "new_string": "x = 2"}
    new = {"path": "src/new.py", "content": "y = 1\n"}
    emulator.script(
        {
            "answers": [
                {"reply": [{"tool_use": {"name": "edit_file", "input": edit}}], "stop_reason": "tool_use"},
                {"reply": [{"tool_use": {"name": "write_file", "input": new}}], "stop_reason": "tool_use"},
                _text("Done."),
            ]
        }
    )
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_APPROVAL_UI="diff",
        AGENTD_PICKS={"agentd.approval": "Reject"},
        AGENTD_STEPS=[
            {"edit": "src/app.py"},
            {"cmd": "Agentd Bump x and add new.py."},
            {"wait": "approval"},
            {"snap": "edit"},
            {"keys": "a"},
            {"wait": "approval"},
            {"keys": "s"},  # the select fallback shows the details in its own window
            {"wait": "select"},
            {"wait": "turn"},
        ],
    )
    lines = out["snaps"]["edit"]["approval"]["lines"]
    assert lines[lines.index("--- a/src/app.py") : lines.index("--- a/src/app.py") + 3] == [
        "--- a/src/app.py",
        "+++ b/src/app.py",
        "@@ -1 +1 @@",
    ]
    details = out["selects"][0]["details"]
    assert details[details.index("--- /dev/null") : details.index("--- /dev/null") + 4] == [
        "--- /dev/null",
        "+++ b/src/new.py",
        "@@ -0,0 +1 @@",
        "+y = 1",
    ]
    assert not any(str(ws) in line for line in lines + details if line.startswith(("---", "+++")))


def test_visual_range_prompt_shows_what_it_attached(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    """A visual-range prompt shows what it attached: `:'<,'>Agentd` without a prompt attaches the lines to
    the next prompt of the input area (its winbar says so), the chat shows `@ notes.txt:2-3` under the
    prompt, and the model gets the lines under a URI that names them (`#L2-L3`); a resume shows it too."""
    ws = make_workspace({"notes.txt": NOTES})
    emulator.script({"answers": [_text("They are Greek letters."), _text("Still Greek.")]})
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_OPTS=NO_INSERT,
        AGENTD_PICKS={"agentd.session": "#1"},
        AGENTD_STEPS=[
            {"edit": "notes.txt"},
            {"cmd": "2,3Agentd"},
            {"wait": "input"},
            {"snap": "attached"},
            {"keys": "iWhat are these?<Esc><CR>"},
            {"wait": "turn"},
            {"snap": "sent"},
            {"lua": "vim.api.nvim_set_current_win(vim.fn.win_getid(1))"},
            {"cmd": "1Agentd And this one?"},
            {"wait": "turn", "n": 2},
            {"cmd": "AgentdRestart"},
            {"wait": "exit"},
            {"wait": "session", "n": 2},
            {"wait": "idle"},
            {"snap": "restarted"},
        ],
    )
    snaps = scrub(out["snaps"], {str(ws): "<ws>"})
    assert snaps["attached"]["input"]["winbar"] == "@ notes.txt:2-3 · <CR> sends"
    chat = ["> What are these?", "  @ notes.txt:2-3", "", "They are Greek letters.", END1]
    assert snaps["sent"]["chat"]["lines"] == chat
    assert snaps["sent"]["input"]["winbar"] == "<CR> sends · <C-c> cancels"
    second = ["", "> And this one?", "  @ notes.txt:1", "", "Still Greek.", END1]
    # :AgentdRestart: a new daemon, the session loaded again with its history and attachments
    assert [e.get("action") for e in out["events"] if e["event"] == "AgentdSession"] == ["new", "load"]
    assert snaps["restarted"]["chat"]["lines"] == chat[:-1] + second[:-1]
    assert re.match(r"idle · ctx", snaps["restarted"]["chat"]["winbar"])
    first_request = json.dumps(emulator.journal[0]["body"])
    assert "notes.txt#L2-L3" in first_request and "beta" in first_request
    assert [s["title"] for s in _sessions(nvim)] == ["What are these?"]
