"""H20 in Neovim: the plugin's approval texts show bidi controls and invisible characters as escapes, with
exactly the daemon's table and escape forms (agentd.protocol.display, agentd.text.visible), whatever the
server sent; `rawInput` and diffs are escaped where they are shown."""

from __future__ import annotations

from pathlib import Path

from agentd.protocol.display import ESCAPED_RANGES
from agentd.text import ESCAPED_SAMPLE, visible
from tests.editors.nvim.harness import Nvim

RLO, ZWSP, TAG_A = "\u202e", "\u200b", "\U000e0041"


def _params() -> dict:
    """A requestPermission as a server that escaped nothing would send it: every shown field hostile."""
    return {
        "sessionId": "sess_x",
        "toolCall": {
            "toolCallId": "toolu_1",
            "title": f"Edit src/{RLO}txt.exe",
            "kind": "edit",
            "status": "pending",
            "rawInput": {"path": f"src/{RLO}txt.exe"},
            "content": [
                {
                    "type": "diff",
                    "path": f"/ws/src/{RLO}txt.exe",
                    "oldText": "safe = True\n",
                    "newText": f"safe = False {ZWSP}# {TAG_A}\n",
                }
            ],
        },
        "options": [],
        "_meta": {"agentd": {"title": f"Edit src/{RLO}txt.exe", "description": f"Edit a file in /ws{ZWSP}"}},
    }


def test_approval_texts_escape_what_could_hide_a_command(nvim: Nvim, tmp_path: Path) -> None:
    """H20: every line of the approval window and the select prompt escapes bidi controls, zero-width and
    tag characters; the escaping is the daemon's, code point for code point."""
    out = nvim.run("escapes", AGENTD_PARAMS=_params(), AGENTD_SAMPLE=[ESCAPED_SAMPLE + "\nnext\tline é"])
    assert out["details"] == [
        "agentd asks: Edit src/\\u202etxt.exe",
        "Edit a file in /ws\\u200b",
        "",
        "--- /ws/src/\\u202etxt.exe",
        "+++ /ws/src/\\u202etxt.exe",
        "@@ -1 +1 @@",
        "-safe = True",
        "+safe = False \\u200b# \\U000e0041",
    ]
    assert out["prompt"] == "agentd: Edit src/\\u202etxt.exe (+1 -1 lines). Allow?"
    assert out["sample"] == visible(ESCAPED_SAMPLE + "\nnext\tline é")
    assert out["sample_one_line"] == visible(ESCAPED_SAMPLE + "\nnext\tline é", one_line=True)
    assert [tuple(r) for r in out["ranges"]] == list(ESCAPED_RANGES)
    assert out["invalid"] == "ok \\xff\\x80 ok"
    assert all(line.isascii() or "é" in line for line in out["details"])
