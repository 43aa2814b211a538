"""Fixes of what a new user found in `agentd run`, `agentd doctor` and `make test` (new-user R2-R7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_the_session_home_may_hold_read_only_folders() -> None:
    """new-user R5 (the probe the next test runs in a pytest of its own): a test leaves a read-only folder
    in the session's HOME, as sandbox tests do; the end of the run still removes it."""
    locked = Path(os.environ["HOME"]) / "r5-locked"
    (locked / "inner").mkdir(parents=True, exist_ok=True)
    (locked / "inner" / "f").write_text("x")
    (locked / "inner").chmod(0o500)
    locked.chmod(0o500)
    assert locked.stat().st_mode & 0o777 == 0o500


def test_a_pytest_run_removes_its_own_session_tmp_dir(tmp_path: Path) -> None:
    """new-user R5: every pytest run left an `agentd-tests-*` folder in the system tmp dir (1,621 on one
    machine); a run now removes its own, read-only folders in it too, and leaves another run's alone."""
    other = tmp_path / "agentd-tests-another-run"  # a concurrent run's folder: in use, not ours
    other.mkdir()
    probe = f"{Path(__file__).relative_to(ROOT)}::test_the_session_home_may_hold_read_only_folders"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", probe]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "audit sweep" in done.stdout  # the suite's conftest ran
    left = sorted(p.name for p in tmp_path.glob("agentd-tests-*"))
    assert left == ["agentd-tests-another-run"], done.stdout[-2000:]


async def test_a_long_command_says_it_is_still_running(capsys: Any) -> None:
    """new-user R3: `--yes` with `sleep 20` gave 20 s of silence; `[Running] <title>` opens and
    `· still running after N s` repeats every `progress_every_s` until the command ends, then stops."""
    from agentd.terminal import Printer, TurnReport
    from tests.lsp.harness import wait_until

    printer = Printer(TurnReport(), progress_every_s=0.05)
    printer.update(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run `sleep 20`", "kind": "execute"}
    )
    printer.update({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"})
    seen: list[str] = []

    def lines() -> list[str]:
        seen.extend(capsys.readouterr().err.splitlines())
        return seen

    await wait_until(lambda: len(lines()) >= 3, "two progress lines")
    assert seen[:3] == [
        "[Running] Run `sleep 20`",
        "[Running] Run `sleep 20` · still running after 0.05 s",
        "[Running] Run `sleep 20` · still running after 0.1 s",
    ]
    done = {"type": "content", "content": {"type": "text", "text": "woke\n[exit code 0]"}}
    printer.update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": [done]}
    )
    assert printer.running == {}  # no more progress lines once it ended
    assert lines()[-3:] == ["[Output]", "  | woke", "  | [exit code 0]"]


def test_exit_9_counts_actions_and_names_them_rightly() -> None:
    """new-user R7: exit 9 (PROTOCOL.md §3.1) is for a turn whose every action was refused for lack of a
    terminal; a refused read-only call is none, and a call of kind `other` is an action, not a write."""
    from agentd.terminal import TurnReport

    def report(*refused: tuple[str, str], started: int = 0) -> TurnReport:
        names, kinds = [n for n, _ in refused], [k for _, k in refused]
        return TurnReport(no_terminal=names, no_terminal_kinds=kinds, actions_started=started)

    def said(r: TurnReport) -> str:
        return r.no_terminal_hint().split(", so ")[1].split(" refused")[0]

    writes = report(("write_file", "edit"), ("mcp__w__forecast", "read"))
    assert writes.actions_all_refused_for_no_terminal and said(writes) == "every write of this turn was"
    action = report(("mcp__w__subscribe", "other"))
    assert action.actions_all_refused_for_no_terminal and said(action) == "every action of this turn was"
    read = report(("mcp__w__forecast", "read"), ("mcp__w__forecast", "read"))
    assert not read.actions_all_refused_for_no_terminal
    assert said(read) == "2 read-only tool calls of this turn were"
    assert not report(("write_file", "edit"), started=1).actions_all_refused_for_no_terminal
