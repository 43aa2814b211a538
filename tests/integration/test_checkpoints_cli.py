"""`agentd sessions checkpoints | rewind | fork` as a user meets them: real subprocesses, the scripted
provider (issue 13; docs/checkpoints.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCENARIO = {
    "answers": [
        {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "b.txt", "content": "new\n"}}}]},
        {"reply": [{"tool_use": {"name": "run_command", "input": {
            "command": "sed -i s/hello/bye/ a.txt && mkdir gen && echo x > gen/x && chmod 700 a.txt"}}}]},
        {"reply": [{"text": "done"}]},
        {"reply": [{"text": "second turn"}]},
        {"reply": [{"text": "third turn"}]},
    ]
}  # fmt: skip


def agentd(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentd", *args], env=env, capture_output=True, text=True,
                          errors="replace", timeout=120, stdin=subprocess.DEVNULL,
                          start_new_session=True)  # fmt: skip


def setup(tmp_path: Path) -> tuple[Path, dict[str, str], list[str]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    os.chmod(ws / "a.txt", 0o644)
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data"), "HOME": str(home),
           "XDG_CONFIG_HOME": str(home / ".config")}  # fmt: skip
    run = ["run", "--provider", "scripted", "--scenario", str(scenario), "--yes", "--workspace", str(ws)]
    return ws, env, run


def listing(sid: str, env: dict[str, str]) -> dict[str, Any]:
    out = agentd(["sessions", "checkpoints", sid, "--json"], env)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_rewind_fork_and_checkpoints_from_the_command_line(tmp_path: Path) -> None:
    """Acceptance (CLI): a turn's files and command changes are undone (bytes and modes), a file the user
    changed afterwards is kept and named until --overwrite confirms it; `sessions show` still shows the
    abandoned branch; a fork at a prompt continues alone."""
    ws, env, run = setup(tmp_path)
    assert agentd([*run, "--prompt", "change things"], env).returncode == 0
    sid = agentd(["sessions", "list"], env).stdout.splitlines()[1].split()[0]
    assert agentd([*run, "--resume", sid, "--prompt", "and more"], env).returncode == 0
    ids = [(c["id"], c["before"]) for c in listing(sid, env)["checkpoints"]]
    assert (
        ids[:3] == [("1", "prompt"), ("1.1", "run_command"), ("1.end", "turn_end")] and ("2", "prompt") in ids
    )
    (ws / "b.txt").write_text("the user's\n")  # after the turns: the user's change

    out = agentd(["sessions", "rewind", sid, "--to", "1"], env)
    assert out.returncode == 0, out.stderr
    assert "kept     b.txt (changed by user)" in out.stdout and "--overwrite b.txt" in out.stderr
    assert (ws / "a.txt").read_text() == "hello\n" and (ws / "a.txt").stat().st_mode & 0o777 == 0o644
    assert not (ws / "gen").exists() and (ws / "b.txt").read_text() == "the user's\n"
    out = agentd(["sessions", "rewind", sid, "--to", "1", "--files-only", "--overwrite", "b.txt"], env)
    assert out.returncode == 0, out.stderr
    assert not (ws / "b.txt").exists()  # confirmed: back to before prompt 1, when it did not exist

    shown = agentd(["sessions", "show", sid], env).stdout
    assert "[User · abandoned] change things" in shown and "--- rewind r1: files and conversation" in shown
    after = listing(sid, env)
    assert [r["to"] for r in after["rewinds"]] == ["1", "1"]
    assert not any(c["active"] for c in after["checkpoints"] if c["before"] == "prompt")

    fork = agentd(["sessions", "fork", sid, "--at", "2", "--json"], env)
    assert fork.returncode == 0, fork.stderr
    forked = json.loads(fork.stdout)
    assert forked["forkedFrom"] == sid and forked["at"] == "2" and forked["messages"] > 0
    out = agentd([*run, "--resume", forked["sessionId"], "--prompt", "in the fork"], env)
    assert out.returncode == 0, out.stderr
    fork_show = agentd(["sessions", "show", forked["sessionId"]], env).stdout
    assert "change things" in fork_show and "and more" not in fork_show and "in the fork" in fork_show


def test_bad_targets_are_usage_errors(tmp_path: Path) -> None:
    """No such checkpoint, or a conversation rewind into the middle of a turn: exit 2 with what to do."""
    _ws, env, run = setup(tmp_path)
    assert agentd([*run, "--prompt", "change things"], env).returncode == 0
    sid = agentd(["sessions", "list"], env).stdout.splitlines()[1].split()[0]
    out = agentd(["sessions", "rewind", sid, "--to", "9"], env)
    assert out.returncode == 2 and "agentd sessions checkpoints" in out.stderr
    out = agentd(["sessions", "rewind", sid, "--to", "1.1"], env)
    assert out.returncode == 2 and "--files-only" in out.stderr
    assert agentd(["sessions", "rewind", "sess_nope", "--to", "1"], env).returncode == 3


def test_a_file_name_that_is_not_utf8_is_checkpointed_and_restored(tmp_path: Path) -> None:
    """issue 13 (break13): a workspace holding a file whose name is not UTF-8 made every checkpoint record
    unwritable (UnicodeEncodeError in the log): the turn ended in an internal error and `sessions rewind`
    failed the same way, so nothing the agent did could be taken back. Now the turn ends normally, the
    rewind puts the file back byte for byte, and `--json` stays valid UTF-8 (it printed the raw byte)."""
    ws, env, run = setup(tmp_path)
    odd = os.fsencode(ws) + b"/bad\xff.txt"
    with open(odd, "wb") as f:
        f.write(b"odd\n")
    scenario = {"answers": [
        {"reply": [{"tool_use": {"name": "run_command", "input": {"command": "rm -f bad*.txt"}}}]},
        {"reply": [{"text": "done"}]},
    ]}  # fmt: skip
    (tmp_path / "scenario.json").write_text(json.dumps(scenario))
    out = agentd([*run, "--allow", "run_command", "--prompt", "remove it"], env)
    assert out.returncode == 0, out.stderr
    assert not os.path.exists(odd)
    sid = agentd(["sessions", "list"], env).stdout.splitlines()[1].split()[0]
    out = agentd(["sessions", "rewind", sid, "--to", "1", "--files-only", "--json"], env)
    assert out.returncode == 0, out.stderr
    with open(odd, "rb") as f:
        assert f.read() == b"odd\n"
    assert "\ufffd" not in out.stdout  # valid UTF-8 JSON: the name is escaped, not raw bytes
    assert os.fsdecode(b"bad\xff.txt") in json.loads(out.stdout)["files"]["restored"]
