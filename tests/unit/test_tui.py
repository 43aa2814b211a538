"""The terminal client's pure pieces (issue 14 Part 1): where a streamed Markdown block ends, the status line,
`@path` mentions, the approval keys, what counts as a slash command."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.adapters.tui.approval import choice_keys
from agentd.adapters.tui.commands import COMMANDS, is_command
from agentd.adapters.tui.mentions import mention_at, prompt_blocks
from agentd.adapters.tui.results import output_lines, output_tail, result_summary
from agentd.adapters.tui.status import cache_share, status_text, tokens_short
from agentd.adapters.tui.view import stable_end
from agentd.protocol.approvals import permission_options


@pytest.mark.parametrize(
    "text,end",
    [
        ("Hello", 0),  # the line is still being written
        ("Hello\n", 0),  # the paragraph may go on
        ("Hello\n\nWor", 7),  # a blank line ends the block
        ("a\n\nb\n\nc", 6),
        ("```py\nx = 1\n\ny = 2\n", 0),  # a blank line inside a fence ends nothing
        ("```py\nx = 1\n```\n", 16),  # the closing fence does
        ("~~~~\nx\n~~~\n\n", 0),  # a shorter fence does not close a longer one
        ("- a\n- b\n\nNext", 9),
    ],
)
def test_stable_end_is_the_end_of_the_last_finished_block(text: str, end: int) -> None:
    assert stable_end(text) == end


def test_stable_end_from_an_offset() -> None:
    text = "one\n\ntwo\n\nthr"
    assert (stable_end(text, 0), stable_end(text, 5)) == (10, 10)


def test_tokens_short() -> None:
    assert [tokens_short(n) for n in (0, 950, 1000, 12345, 200_000, 1_047_576)] == [
        "0", "950", "1k", "12.3k", "200k", "1M"]  # fmt: skip


STATUS = {
    "model": "claude-sonnet-4-6", "mode": "default",
    "context": {"usedTokens": 1200, "windowTokens": 200_000},
    "totals": {"inputTokens": 100, "cacheReadTokens": 800, "cacheWriteTokens": 100},
    "costEstimate": {"amount": 0.01234, "currency": "USD"},
}  # fmt: skip


def test_status_line_from_the_status_and_the_last_usage_update() -> None:
    assert status_text(STATUS) == "claude-sonnet-4-6 · default · ctx 1.2k/200k (1 %) · cache 80 % · $0.0123"
    usage = {"sessionUpdate": "usage_update", "used": 30_000, "size": 200_000, "cost": {"amount": 0.5}}
    assert (
        status_text(STATUS, usage)
        == "claude-sonnet-4-6 · default · ctx 30k/200k (15 %) · cache 80 % · $0.5000"
    )


def test_status_line_before_any_request_and_with_an_unknown_price() -> None:
    status = {**STATUS, "totals": {}, "costEstimate": None}
    assert status_text(status) == "claude-sonnet-4-6 · default · ctx 1.2k/200k (1 %) · cache –"
    assert cache_share({}) is None


def test_mentions_attach_workspace_files_once(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "notes.md").write_text("has ``` a fence\n")
    text = "Fix @src/app.py, see @notes.md and @src/app.py; mail me@example.org or @src"
    out = prompt_blocks(text, tmp_path, 1000)
    assert out.blocks == [
        {"type": "text", "text": text},
        {"type": "text", "text": "src/app.py\n```\nprint('hi')\n\n```"},
        {"type": "text", "text": "notes.md\n````\nhas ``` a fence\n\n````"},
        {"type": "text", "text": "[Linked folder: src; list it with list_dir if needed]"},
    ]
    assert (out.attached, out.problems) == (["src/app.py", "notes.md", "src"], [])


def test_mentions_refuse_what_leaves_the_workspace_or_is_too_big(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "secret.txt").write_text("s")
    (ws / "link").symlink_to(tmp_path / "secret.txt")
    (ws / "big.txt").write_text("x" * 50)
    (ws / "bin.dat").write_bytes(b"\xff\xfe\x00")
    out = prompt_blocks("@link @../secret.txt @big.txt @bin.dat", ws, 10)
    assert out.blocks == [{"type": "text", "text": "@link @../secret.txt @big.txt @bin.dat"}]
    assert out.problems == [
        f"@link: outside the workspace {ws}; not attached",
        f"@../secret.txt: outside the workspace {ws}; not attached",
        "@big.txt: 50 bytes, more than 10; not attached (the agent can read it)",
        "@bin.dat: not UTF-8 text; not attached",
    ]


def test_mention_being_typed() -> None:
    assert [mention_at(t) for t in ("see @sr", "@", "a@b", "see @src/ x", "plain")] == [
        "sr",
        "",
        None,
        None,
        None,
    ]


def test_approval_keys_follow_the_options_the_gate_sent() -> None:
    """Keys come from the request's options: the command-prefix option is the `a` key, a protected path's
    two options have no `a` and no `r`."""
    prefix = permission_options("run_command", "npm test")
    assert choice_keys(prefix) == {
        "1": "allow_once", "2": "allow_always_prefix", "3": "reject_once", "4": "reject_always",
        "y": "allow_once", "a": "allow_always_prefix", "n": "reject_once", "r": "reject_always",
        "escape": "reject_once",
    }  # fmt: skip
    protected = [o for o in permission_options("write_file") if o["kind"] in ("allow_once", "reject_once")]
    assert choice_keys(protected) == {"1": "allow_once", "2": "reject_once", "y": "allow_once",
                                      "n": "reject_once", "escape": "reject_once"}  # fmt: skip


def test_what_is_a_slash_command() -> None:
    assert [is_command(t) for t in ("/help", " /resume 2", "/nope", "/usr/bin/env is odd", "hi /help", "")] == [
        True, True, True, False, False, False]  # fmt: skip
    assert {"/help", "/new", "/sessions", "/resume", "/compact", "/cost", "/plan", "/mode", "/model",
            "/quit"} <= set(COMMANDS)  # fmt: skip


def test_approval_texts_are_shown_escaped() -> None:
    """H20 in the terminal client: the title, the command, its folder and the option names (a command prefix
    comes from the model) show bidi controls and control characters as escapes."""
    import io

    from rich.console import Console

    from agentd.adapters.tui.approval import KeyboardApprover
    from agentd.adapters.tui.view import View
    from agentd.permissions.approver import ApprovalRequest, offered_options
    from agentd.tools.base import Preview

    command = "ls \u202e#txt.exe\x1b[2K"
    req = ApprovalRequest(
        session_id="s", tool_use_id="t", tool_name="run_command", title=f"Run `{command}`",
        preview=Preview(summary="", command=command, cwd="/w\u200b"),
        options=tuple(permission_options("run_command", "ls \u202e")),
    )  # fmt: skip
    out = io.StringIO()
    KeyboardApprover(View(Console(file=out, width=200), lambda width=None: ""), lambda: None).show(req)
    shown = out.getvalue()
    assert "\u202e" not in shown and "\x1b" not in shown and "\u200b" not in shown
    assert "$ ls \\u202e#txt.exe\\x1b[2K" in shown and "in /w\\u200b" in shown
    assert [o["name"] for o in offered_options(req)][
        1
    ] == "Always allow `ls \\u202e` commands in this session"


def test_status_line_leaves_parts_out_to_fit_a_narrow_terminal() -> None:
    """T1: on a narrow terminal the model goes first, then the cache share, then the mode; never a cut word
    unless one part alone is too long."""
    assert status_text(STATUS, width=80) == status_text(STATUS)
    assert status_text(STATUS, width=60) == "default · ctx 1.2k/200k (1 %) · cache 80 % · $0.0123"
    assert status_text(STATUS, width=40) == "default · ctx 1.2k/200k (1 %) · $0.0123"
    assert status_text(STATUS, width=30) == "ctx 1.2k/200k (1 %) · $0.0123"
    assert status_text(STATUS, width=10) == "ctx 1.2k/…"


def _command_update(text: str, code: int) -> dict[str, object]:
    return {"sessionUpdate": "tool_call_update", "status": "completed" if code == 0 else "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": text}}],
            "rawOutput": {"exitCode": code, "bytes": len(text), "timedOut": False, "truncated": False}}  # fmt: skip


def test_a_commands_result_is_its_exit_code_output_size_and_last_lines() -> None:
    """T3: the tool line of a command says `exit N · M lines of output`; the last lines are shown."""
    update = _command_update("".join(f"{i}\n" for i in range(1, 11)) + "\n[exit code 0]", 0)
    lines = output_lines(update)
    assert lines == [str(i) for i in range(1, 11)]
    assert result_summary(update["rawOutput"], lines) == "exit 0 · 10 lines of output"
    assert output_tail(lines, 4) == (6, ["7", "8", "9", "10"])
    quiet = _command_update("[exit code 0]", 0)
    assert (output_lines(quiet), result_summary(quiet["rawOutput"], [])) == ([], "exit 0 · no output")


def test_other_tools_results_are_their_counts() -> None:
    assert result_summary({"lines": 1, "bytes": 3, "source": "disk"}) == "1 line"
    assert result_summary({"entries": 40, "truncated": True}) == "40 entries (truncated)"
    assert result_summary({"items": 3}) == ""  # a plan's title counts its items
    assert result_summary(None) == ""
    assert output_lines({"content": [{"type": "content", "content": {"type": "text", "text": "x"}}]}) == []


def test_the_models_text_reaches_the_terminal_escaped() -> None:
    """H20 (found in use): rich keeps ESC in text, so a reply could clear the screen, retitle the window or
    write the clipboard (OSC 52); the streamed Markdown, like every other text, is shown escaped."""
    import io

    from rich.console import Console

    from agentd.adapters.tui.view import Block

    out = io.StringIO()
    Console(file=out, force_terminal=True, width=100).print(
        Block("hello \x1b[2J \x1b]52;c;cHduZWQ=\x07 evil\u202e\n\n```\ncode \x1b[31mred\n```\n")
    )
    shown = out.getvalue()
    assert "\x1b[2J" not in shown and "\x1b]52" not in shown and "\x1b[31mred" not in shown
    assert "\\x1b[2J" in shown and "\\u202e" in shown and "\\x1b[31mred" in shown


def test_break14_a_cut_commands_output_is_told_by_its_size() -> None:
    """issue 14 (break14): `seq 10000` was `exit 0 · 6777 lines of output` and `… 6773 more lines`, counting
    the lines kept around the truncation marker, while the docs said the agent saw the whole output; a cut
    output is told by its size and that its middle was left out."""
    raw = {"exitCode": 0, "bytes": 48894, "timedOut": False, "truncated": True}
    assert result_summary(raw, ["1", "2"]) == "exit 0 · 48.9 kB of output, its middle left out for the agent"
    assert result_summary({**raw, "bytes": 2_500_000}, []).startswith("exit 0 · 2.5 MB of output")


def test_break14_a_mention_of_a_missing_file_is_told(tmp_path: Path) -> None:
    """issue 14 (break14): `@src/parsr.py` (a typo) was sent without the file and without a word; a mention
    that looks like a path says it names no file, a handle (`@alice`) stays quiet."""
    out = prompt_blocks("see @src/parsr.py @missing.txt and ask @alice", tmp_path, 1000)
    assert out.problems == ["@src/parsr.py: no such file in the workspace; not attached",
                            "@missing.txt: no such file in the workspace; not attached"]  # fmt: skip
    assert out.blocks == [{"type": "text", "text": "see @src/parsr.py @missing.txt and ask @alice"}]


def test_break14_modes_are_listed_in_one_order_everywhere() -> None:
    """issue 14 (break14): the modes came from a frozenset (a different order in each process's /help and
    /mode), and an unknown mode's error left `auto` out."""
    from agentd.protocol.session import MODE_IDS, MODES

    assert MODE_IDS == ("default", "acceptEdits", "readOnly", "auto") == tuple(m[0] for m in MODES)
