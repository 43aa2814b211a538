"""Issue 9, one module at a time: config warnings (H13), the retry policy for a refused local endpoint (H11),
the terminal's two streams (H15), the log file (H21) and the command line's global options (H8)."""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path

import pytest

from agentd import config
from agentd.clock import ManualClock
from agentd.config import load_settings, user_config_path
from agentd.errors import ConfigError, ProviderError
from agentd.log import setup_logging
from agentd.providers.base import ModelResponse, run_with_retries

# New names of this issue are imported inside the tests, so on the old code each test fails on its own.

# ---- H13: unknown tool names and keys --------------------------------------------------------------


@pytest.fixture
def user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTD_CONFIG_DIR", str(tmp_path / "cfg"))
    path = user_config_path()
    path.parent.mkdir(parents=True)
    return path


def test_a_rule_naming_no_tool_is_a_warning_with_did_you_mean(user_file: Path, tmp_path: Path) -> None:
    """H13: a rule for a tool that does not exist (`writefile`) was accepted silently and blocked nothing.
    It is a warning naming the file, the rule and the close tool name, in every layer; the rule is kept
    (it matches nothing); `mcp__SERVER__TOOL` names are accepted."""
    user_file.write_text(
        '[[permissions.rules]]\ntool = "writefile"\naction = "deny"\n'
        '[[permissions.rules]]\ntool = "mcp__github__create_issue"\naction = "ask"\n'
    )
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").write_text(
        '[[permissions.rules]]\ntool = "write_file"\naction = "allow"\n'  # dropped (workspace), index 0
        '[[permissions.rules]]\ntool = "run_comand"\naction = "deny"\n'
    )
    warnings: list[str] = []
    options = {"permissions": {"rules": [{"tool": "Read_File", "action": "deny"}]}}
    load_settings(ws, editor_options=options, warnings=warnings)
    tools = ", ".join(config.known_tool_names())
    unknown = [w for w in warnings if "no tool is named" in w]
    assert unknown == [
        f"{user_file}: permissions.rules[0]: no tool is named 'writefile' (did you mean 'write_file'? tools: "
        f"{tools}, or mcp__SERVER__TOOL); this rule matches nothing",
        f"{ws / '.agentd' / 'config.toml'}: permissions.rules[1]: no tool is named 'run_comand' (did you mean "
        f"'run_command'? tools: {tools}, or mcp__SERVER__TOOL); this rule matches nothing",
        f"initializationOptions: permissions.rules[0]: no tool is named 'Read_File' (did you mean 'read_file'? "
        f"tools: {tools}, or mcp__SERVER__TOOL); this rule matches nothing",
    ]
    assert [r.tool for r in load_settings(ws).permissions.rules] == [  # kept: a warning, not an error
        "writefile",
        "mcp__github__create_issue",
        "run_comand",
    ]


def test_known_tool_names_come_from_the_registry() -> None:
    """H13: the names rules may use are the registry's (new tools appear without a second list)."""
    from agentd.config import known_tool_names, tool_name_problem
    from agentd.tools.registry import default_tools

    assert known_tool_names() == ["todo_write", *(t.name for t in default_tools())]
    assert [tool_name_problem(n) for n in ("edit_file", "mcp__s__t", "mcp__s-1__t.x")] == [None, None, None]
    assert tool_name_problem("mcp__only") is not None and tool_name_problem("") is not None


def test_unknown_config_keys_are_warnings_not_errors(user_file: Path) -> None:
    """H13: an unknown key in a config file stopped agentd (exit 2) with no hint. It is ignored with a
    warning and a "did you mean", also inside sections and rule entries; a bad value is still an error."""
    user_file.write_text(
        'modle = "x"\nmax_output_tokens = 100\n[tools]\nread_max_byte = 5\n'
        '[[permissions.rules]]\ntool = "edit_file"\naction = "deny"\ncomment = "no"\n[colour]\nx = 1\n'
    )
    warnings: list[str] = []
    settings = load_settings(None, warnings=warnings)
    assert warnings == [
        f"{user_file}: unknown key 'modle' ignored (did you mean 'model'?)",
        f"{user_file}: unknown key 'tools.read_max_byte' ignored (did you mean 'tools.read_max_bytes'?)",
        f"{user_file}: unknown key 'permissions.rules[0].comment' ignored",
        f"{user_file}: unknown key 'colour' ignored",
    ]
    assert (settings.max_output_tokens, settings.permissions.rules[0].tool) == (100, "edit_file")
    user_file.write_text("max_output_tokens = 0\n")
    with pytest.raises(ConfigError):
        load_settings(None)


def test_an_unknown_key_inside_an_mcp_server_is_a_warning_too(user_file: Path) -> None:
    """New-user trial: a typo inside `[mcp.servers.NAME]` stopped agentd (exit 2, pydantic's "Extra inputs are
    not permitted") while the same typo at the top was a warning. Named entries are checked as sections are."""
    user_file.write_text('[mcp.servers.git]\ncommand = "mcp-server-git"\ntimout_s = 5\n')
    warnings: list[str] = []
    settings = load_settings(None, warnings=warnings)
    assert warnings == [
        f"{user_file}: unknown key 'mcp.servers.git.timout_s' ignored (did you mean 'mcp.servers.git.timeout_s'?)"
    ]
    assert settings.mcp.servers["git"].command == "mcp-server-git"


# ---- H11: a refused connection on this machine -----------------------------------------------------


async def test_a_refused_local_connection_gets_one_retry() -> None:
    """H11: a refused connection to 127.0.0.1 was retried for about 47 s. An error that caps its attempts
    (`max_attempts`, set for a refused loopback connection) is retried once, then raised, not retryable."""
    clock = ManualClock()
    calls: list[int] = []

    async def attempt(n: int) -> ModelResponse:
        calls.append(n)
        raise ProviderError("refused at http://127.0.0.1:9", provider="openai", reason="unavailable",
                            retryable=True, max_attempts=2)  # fmt: skip

    with pytest.raises(ProviderError) as info:
        await run_with_retries(attempt, clock=clock, max_total_s=60)
    assert (calls, clock.sleeps) == ([1, 2], [1.0])
    assert (info.value.message, info.value.retryable) == (
        "refused at http://127.0.0.1:9 (gave up after 2 attempts)",
        False,
    )


def test_only_a_refused_connection_to_this_machine_is_capped() -> None:
    """H11: the cap is for loopback only; a remote endpoint keeps the time budget (it may come back)."""
    from agentd.providers.anthropic import connection_error

    try:
        raise OSError("wrapped") from ConnectionRefusedError(111, "refused")
    except OSError as exc:
        local = connection_error(provider="p", service="S", base_url="http://localhost:1/v1", exc=exc)
        remote = connection_error(provider="p", service="S", base_url="http://example.com/v1", exc=exc)
    assert (local.max_attempts, remote.max_attempts) == (2, None)
    assert "http://localhost:1/v1" in local.message and "refused the connection" in local.message


# ---- H15: the two streams -------------------------------------------------------------------------


def test_console_ends_the_open_text_line_when_both_streams_share_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """H15: `I'll plan this first.[turn …]` in one file. When stdout and stderr reach the same file, an
    operator line (and a log record) first ends the open text line; apart, stdout keeps the text as is."""
    from agentd.log import Console

    both = tmp_path / "both.txt"
    with both.open("w") as out, os.fdopen(os.dup(out.fileno()), "w") as err:  # as `> both 2>&1`
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        console = Console()
        console.out("I'll plan this first.")
        console.line("[turn · in=1]")
        console.out("More")
        monkeypatch.setattr("agentd.log.console", console)
        setup_logging(0)
        logging.getLogger("agentd.test").warning("careful")
        console.out(" text.\n")
        console.line("[stop · end_turn]")
    lines = both.read_text().splitlines()
    assert lines[:2] == ["I'll plan this first.", "[turn · in=1]"]
    assert lines[2] == "More" and lines[3].endswith("WARNING agentd.test: careful")
    assert lines[4:] == [" text.", "[stop · end_turn]"]
    apart_out, apart_err = tmp_path / "out.txt", tmp_path / "err.txt"
    with apart_out.open("w") as out, apart_err.open("w") as err:
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        console = Console()
        console.out("Hello")
        console.line("[turn]")
        console.out(" world")
        console.end()
    assert (apart_out.read_text(), apart_err.read_text()) == ("Hello world\n", "[turn]\n")


# ---- H21: the log file --------------------------------------------------------------------------------


def test_open_log_file_refuses_links_and_is_private(tmp_path: Path) -> None:
    """H21: a link planted at the log path is never followed (the target is untouched); a new file is 0600
    and its missing folders 0700 whatever the umask; an existing file is made 0600."""
    from agentd.log import open_log_file

    target = tmp_path / "target"
    target.write_text("keep\n")
    (tmp_path / "link.log").symlink_to(target)
    with pytest.raises(ConfigError) as info:
        open_log_file(str(tmp_path / "link.log"))
    assert "is a symbolic link" in info.value.message and target.read_text() == "keep\n"
    old = os.umask(0)
    try:
        with open_log_file(str(tmp_path / "a" / "b" / "x.log")) as f:
            f.write("line\n")
    finally:
        os.umask(old)
    modes = [stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("a", "a/b", "a/b/x.log")]
    assert modes == [0o700, 0o700, 0o600]
    loose = tmp_path / "loose.log"
    loose.write_text("")
    loose.chmod(0o666)
    open_log_file(str(loose)).close()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600


# ---- H8: the global options -----------------------------------------------------------------------------


def test_global_options_parse_in_every_place() -> None:
    """H8: -v, --data-dir and --log-file before or after the subcommand: -v counts everywhere, the value
    given last wins."""
    from agentd.cli import parse_args

    args = parse_args(["-v", "--data-dir", "A", "sessions", "-v", "--data-dir", "B", "show", "x", "-v"])
    assert (args.verbose, args.data_dir, args.log_file) == (3, "B", None)
    args = parse_args(["run", "--prompt", "p", "--log-file", "L", "-vv"])
    assert (args.verbose, args.data_dir, args.log_file) == (2, None, "L")
    args = parse_args(["--log-file", "L", "demo", "--data-dir", "D"])
    assert (args.verbose, args.data_dir, args.log_file) == (0, "D", "L")
