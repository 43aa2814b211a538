"""Issue 14, Neovim: the input area below the chat, the diff approval window answered from its keys (allow
and reject), the `vim.ui.select` fallback, a tool line expanded to show a command's output, a retry shown
while it waits, and a visual-range prompt that shows what it attached. A real Neovim 0.11 against the real
daemon and the Messages-API emulator (`drivers/steps.lua`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim, scrub

OLD = [f"- entry {i}" for i in range(1, 41)]
CHANGELOG = "# Changelog\n\n## 0.3.0\n" + "\n".join(OLD) + "\n"
NEW = CHANGELOG.replace("## 0.3.0\n", "## Unreleased\n- Fix the parser crash.\n\n## 0.3.0\n").replace(
    "- entry 40\n", "- entry 40\n- entry 41\n"
)
COMMAND = "printf 'ok %s\\n' one two three"


def _write() -> dict[str, Any]:
    return {"tool_use": {"name": "write_file", "input": {"path": "CHANGELOG.md", "content": NEW}}}


def _run(cmd: str) -> dict[str, Any]:
    return {"tool_use": {"name": "run_command", "input": {"command": cmd}}}


def _text(t: str) -> dict[str, Any]:
    return {"reply": [{"text": t}], "stop_reason": "end_turn"}


def _in_chat(text: str) -> str:
    """A step that puts the cursor on the chat line containing `text`."""
    return (
        "local w = require('agentd.chat').win(nil); vim.api.nvim_set_current_win(w)\n"
        "for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do\n"
        f"  if l:find({text!r}, 1, true) then vim.api.nvim_win_set_cursor(w, {{i, 0}}) return i end\n"
        "end"
    )


NO_INSERT = {"input": {"start_insert": False}}  # typed keys start in Normal mode


def test_input_area_diff_approval_keys_expanded_output_and_retry(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"CHANGELOG.md": CHANGELOG})
    emulator.script(
        {
            "answers": [
                {"fault": {"http": 529, "headers": {"retry-after-ms": "2500"}}},
                {"reply": [{"text": "Adding the entry."}, _write()], "stop_reason": "tool_use"},
                {
                    "expect": {"tool_result_for": "toolu_emu_2_1", "is_error": False},
                    "reply": [_run(COMMAND)],
                    "stop_reason": "tool_use",
                },
                {
                    "expect": {"tool_result_for": "toolu_emu_3_1", "is_error": False},
                    **_text("Done: the entry is in and the check printed three lines."),
                },
            ]
        }
    )
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_APPROVAL_UI="diff",
        AGENTD_OPTS=NO_INSERT,
        AGENTD_STEPS=[
            {"edit": "CHANGELOG.md"},
            {"cmd": "Agentd"},  # no prompt: the chat opens with the cursor in the input area
            {"wait": "input"},
            {"snap": "input"},
            {"keys": "iAdd an entry for the parser fix.<Esc>"},
            {"keys": "<CR>"},
            {"wait": "update", "kind": "retry"},
            {"snap": "retry"},
            {"wait": "approval"},
            {"snap": "edit"},
            {"keys": "G"},
            {"snap": "edit_scrolled"},
            {"keys": "a"},
            {"wait": "approval"},
            {"snap": "command"},
            {"keys": "1"},
            {"wait": "turn"},
            {"lua": _in_chat("Run `printf"), "as": "run_line"},
            {"keys": "<CR>"},
            {"snap": "expanded"},
            {"keys": "<CR>"},
            {"snap": "collapsed"},
        ],
    )
    snaps = scrub(out["snaps"], {str(ws): "<ws>"})

    # the input area: below the chat, in the chat's column, with the cursor in it
    assert snaps["input"]["layout"] == ["<ws>/CHANGELOG.md", "agentd://chat", "agentd://input"]
    assert snaps["input"]["columns"] == 2
    assert snaps["input"]["current"] == "agentd://input"
    assert snaps["input"]["input"]["winbar"] == "<CR> sends · <C-c> cancels"  # fitted to 32 columns

    # PROTOCOL.md §7.2 retry: a chat line, and the winbar while it waits; the prompt left the input area
    retry = snaps["retry"]
    assert retry["chat"]["lines"] == [
        "> Add an entry for the parser fix.",
        "",
        "[retrying in 2.5 s (attempt 1 failed: Anthropic is unavailable (HTTP 529): Overloaded)]",
    ]
    assert retry["chat"]["winbar"] == "retrying in 2.5 s · Add an entr…"  # 32 columns
    assert retry["input"]["lines"] == [""]

    # the edit: a float with a key per option of the request, then the whole coloured diff, scrollable
    edit = snaps["edit"]["approval"]
    assert edit["float"] and snaps["edit"]["current"] == "agentd://approval"
    assert edit["title"] == " agentd approval · Write CHANGELOG.md "
    assert edit["lines"] == [
        "Write CHANGELOG.md (+4 -0)",
        "Create or overwrite a file in <ws>",
        "",
        "  [a] Allow once",
        "  [A] Always allow write_file in this session",
        "  [r] Reject",
        "  [R] Always reject write_file in this session",
        "  [s] choose from a list · [q] reject · scroll as in any window",
        "",
        "--- a/CHANGELOG.md", "+++ b/CHANGELOG.md",
        "@@ -1,5 +1,8 @@", " # Changelog", " ", "+## Unreleased", "+- Fix the parser crash.", "+",
        " ## 0.3.0", " - entry 1", " - entry 2",
        "@@ -41,3 +44,4 @@", " - entry 38", " - entry 39", " - entry 40", "+- entry 41",
    ]  # fmt: skip
    diff_groups = {int(n): g for n, g in edit["groups"].items() if int(n) >= 10}
    assert diff_groups == {
        10: "AgentdDiffFile", 11: "AgentdDiffFile", 12: "AgentdDiffHunk", 15: "AgentdDiffAdd",
        16: "AgentdDiffAdd", 17: "AgentdDiffAdd", 21: "AgentdDiffHunk", 25: "AgentdDiffAdd",
    }  # fmt: skip
    assert (edit["height"], edit["topline"], edit["botline"]) == (17, 1, 17)  # 25 lines: it scrolls
    scrolled = snaps["edit_scrolled"]["approval"]
    assert (scrolled["cursor"], scrolled["botline"]) == (25, 25)
    assert snaps["edit"]["chat"]["winbar"] == "approval: Write CHANGELOG.md"

    # the command: its line and working directory, answered with a number key
    cmd = snaps["command"]["approval"]
    assert cmd["lines"][0] == f"Run `{COMMAND}`"
    # "always" for a command is its prefix (issue 12's rule, the option of PROTOCOL.md §6.10), shown as sent
    assert cmd["lines"][3:5] == ["  [a] Allow once", "  [A] Always allow `printf` commands in this session"]
    assert cmd["lines"][-2:] == [f"$ {COMMAND}", "(cwd <ws>)"]

    # after the turn: the file changed (allow once), the command ran (key 1 = the first option, allow once)
    assert (ws / "CHANGELOG.md").read_text(encoding="utf-8") == NEW
    tool = f"  ✓ Run `{COMMAND}` (exit 0)"
    done = "Done: the entry is in and the check printed three lines."
    expanded = snaps["expanded"]["chat"]["lines"]
    i = expanded.index(tool)
    assert expanded[i + 1 : i + 6] == [
        "    │ ok one",
        "    │ ok two",
        "    │ ok three",
        "    │ [exit code 0]",
        done,
    ]
    collapsed = snaps["collapsed"]["chat"]["lines"]
    assert collapsed[collapsed.index(tool) + 1] == done
    assert [e["status"] for e in emulator.journal] == [529, 200, 200, 200]


def test_reject_from_the_diff_window_and_the_select_fallback(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"CHANGELOG.md": CHANGELOG})
    emulator.script(
        {
            "answers": [
                {"reply": [_write()], "stop_reason": "tool_use"},
                {
                    "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True},
                    "reply": [_run("true")],
                    "stop_reason": "tool_use",
                },
                {"expect": {"tool_result_for": "toolu_emu_2_1", "is_error": False}, **_text("ok")},
            ]
        }
    )
    out = nvim.run(
        "steps",
        AGENTD_WS=str(ws),
        AGENTD_APPROVAL_UI="diff",
        AGENTD_PICKS={"agentd.approval": "Allow once"},
        AGENTD_STEPS=[
            {"edit": "CHANGELOG.md"},
            {"cmd": "Agentd Add an entry."},
            {"wait": "approval"},
            {"keys": "r"},
            {"wait": "approval"},
            {"keys": "s"},  # the same request in vim.ui.select (the recorder picks Allow once)
            {"wait": "select"},
            {"wait": "turn"},
            {"snap": "end"},
        ],
    )
    assert (ws / "CHANGELOG.md").read_text(encoding="utf-8") == CHANGELOG
    lines = scrub(out["snaps"]["end"]["chat"]["lines"])
    assert lines[:5] == [
        "> Add an entry.",
        "",
        "  ✗ Write CHANGELOG.md (denied)",
        "  ✓ Run `true` (exit 0)",
        "ok",
    ]
    assert [(s["kind"], s["items"], s["picked"]) for s in out["selects"]] == [
        (
            "agentd.approval",
            ["Allow once", "Always allow `true` commands in this session", "Reject",
             "Always reject run_command in this session"],
            "Allow once",
        )
    ]  # fmt: skip
    assert out["snaps"]["end"]["approval"] is None


def test_the_window_offers_the_options_the_request_carries_and_escapes_hidden_characters(
    nvim_bin: str, tmp_path: Path
) -> None:
    """Issue 14 part 4, client side: the approval window's keys come from the options agentd sends (here the
    command-prefix "always" of PROTOCOL.md §6.10 and a sixth option no client knows), never a fixed list;
    and, H20, a bidi control in the command is shown escaped, not obeyed."""
    from agentd.protocol.approvals import permission_options

    options = [*permission_options("run_command", prefix="npm test")]
    options.append({"optionId": "allow_sandboxed", "name": "Allow once in the sandbox", "kind": "allow_once"})
    params = {
        "sessionId": "sess_x",
        "toolCall": {
            "toolCallId": "toolu_1",
            "title": "Run `npm test`",
            "kind": "execute",
            "status": "pending",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "$ npm test\u202e #\n(cwd /ws)"}}
            ],
        },
        "options": options,
        "_meta": {"agentd": {"title": "Run `npm test`", "description": "Run a shell command in /ws"}},
    }
    lua = (
        f"local params = vim.json.decode({json.dumps(json.dumps(params))})\n"
        "local review = require('agentd.review')\n"
        "local keys = {}\n"
        "for _, k in ipairs(review.keymap(params.options)) do\n"
        "  keys[#keys + 1] = { k.option.optionId, table.concat(k.keys, ' ') }\n"
        "end\n"
        "return { lines = review.render(params, '/ws'), keys = keys, footer = review.footer(params.options) }"
    )
    out = Nvim(nvim_bin, tmp_path).run("steps", AGENTD_STEPS=[{"lua": lua, "as": "v"}])["values"]["v"]
    assert out["keys"] == [
        ["allow_once", "a 1"],
        ["allow_always_prefix", "A 2"],
        ["reject_once", "r 3"],
        ["reject_always", "R 4"],
        ["allow_sandboxed", "5"],
    ]
    assert out["lines"] == [
        "Run `npm test`",
        "Run a shell command in /ws",
        "",
        "  [a] Allow once",
        "  [A] Always allow `npm test` commands in this session",
        "  [r] Reject",
        "  [R] Always reject run_command in this session",
        "  [5] Allow once in the sandbox",
        "  [s] choose from a list · [q] reject · scroll as in any window",
        "",
        "$ npm test\\u202e #",
        "(cwd /ws)",
    ]
    assert out["footer"] == " a allow · A always · r reject · R never · s list · q reject "
