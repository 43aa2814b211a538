"""Small defects a new user met from outside (new-user nits): a real `agentd` subprocess, the scripted model
or the bundled demo, a private HOME and data dir (PROTOCOL.md §3.1; docs/checkpoints.md, docs/sessions.md)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

AGENTD = [sys.executable, "-m", "agentd"]
WRITE = {"tool_use": {"name": "write_file", "input": {"path": "a.txt", "content": "two\n"}}}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data"), "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"), "AGENTD_CONFIG_DIR": str(home / ".config" / "agentd"),
            **extra}  # fmt: skip


def _agentd(
    args: list[str], env: dict[str, str], cmd: list[str] = AGENTD
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip


def _session(tmp_path: Path, env: dict[str, str], prompts: list[str]) -> tuple[Path, str]:
    """A workspace and a session that ran `prompts` (each a turn: a write, then a text)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    answers: list[dict[str, Any]] = []
    for n, _ in enumerate(prompts):
        answers += [{"reply": [WRITE]}, {"reply": [{"text": f"turn {n + 1} done"}]}]
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"answers": answers}), encoding="utf-8")
    base = ["run", "--workspace", str(ws), "--provider", "scripted", "--scenario", str(scenario), "--yes"]
    sid = ""
    for prompt in prompts:
        out = _agentd([*base, *(["--resume", sid] if sid else []), "--prompt", prompt], env)
        assert out.returncode == 0, out.stderr
        sid = sid or re.search(r"\[session (\S+)\]", out.stderr).group(1)  # type: ignore[union-attr]
    return ws, sid


def test_a_dry_run_rewind_says_plainly_what_would_be_restored_and_dropped(tmp_path: Path) -> None:
    """new-user nit: `agentd sessions rewind ID --to N --dry-run` printed `conversation: 8 -> ? messages`,
    `undo with: ... --to now --files-only` (a checkpoint that does not exist: a dry run takes none), `(would)`
    after the counts, and the abandoned prompts as bare numbers, counting again a prompt an earlier rewind had
    left already. Now it says it changed nothing, the files it would restore and keep, the conversation's
    size after (the count the real rewind then reports), and each prompt it would drop with its text, once;
    the log is not touched."""
    env = _env(tmp_path)
    ws, sid = _session(tmp_path, env, ["first change", "second change", "third change"])
    out = _agentd(["sessions", "rewind", sid, "--to", "3", "--conversation-only"], env)  # prompt 3 abandoned
    assert out.returncode == 0, out.stderr
    (ws / "notes.md").write_text("mine\n")  # the user's file, made after the checkpoints
    log = tmp_path / "data" / "sessions" / sid / "log.jsonl"
    before = log.read_bytes()

    dry = _agentd(["sessions", "rewind", sid, "--to", "2", "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr
    text = dry.stdout
    assert text.startswith("dry run, nothing was changed; a rewind to checkpoint 2 would do this:\n")
    assert (
        "files: 0 to restore, 0 to remove, 1 to keep as they are\n  keep     notes.md (changed by user)\n"
        in text
    )
    assert "conversation: would go from 8 to 4 messages; the prompts it would drop" in text
    assert "  prompt 2: second change\n" in text and "prompt 3" not in text  # 3 was left already
    dry = _agentd(["sessions", "rewind", sid, "--to", "1", "--dry-run"], env)
    text = dry.stdout
    assert "conversation: would go from 8 to 0 messages; the prompts it would drop" in text
    assert "  prompt 1: first change\n  prompt 2: second change\n" in text and "prompt 3" not in text
    assert "?" not in text and "now" not in text and "undo" not in text and "(would)" not in text
    assert f"agentd sessions rewind {sid} --to 1 --overwrite notes.md" in dry.stderr  # the real command
    as_json = json.loads(_agentd(["sessions", "rewind", sid, "--to", "1", "--dry-run", "--json"], env).stdout)
    assert "checkpoint" not in as_json and as_json["conversation"] == {
        "messagesBefore": 8, "messagesAfter": 0, "abandonedPrompts": [1, 2]}  # fmt: skip
    assert log.read_bytes() == before and (ws / "a.txt").read_text() == "two\n"

    done = _agentd(["sessions", "rewind", sid, "--to", "1", "--json"], env)
    result = json.loads(done.stdout)
    assert result["conversation"] == as_json["conversation"] and result["checkpoint"] == "r2"
    assert (ws / "a.txt").read_text() == "one\n" and (ws / "notes.md").read_text() == "mine\n"


def test_reload_instructions_without_a_resumed_session_is_a_usage_error(tmp_path: Path) -> None:
    """new-user nit: `agentd run --reload-instructions` without `--continue`/`--resume` was silently accepted
    (a new session reads AGENTS.md anyway). It is a usage error (exit 2, PROTOCOL.md §3.1) naming the flags
    it needs, before any session is made; with `--continue` it reloads, as documented in `run --help`."""
    env = _env(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Be brief.\n")
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"answers": [{"reply": [{"text": "ok"}]}] * 2}), encoding="utf-8")
    base = [
        "run",
        "--workspace",
        str(ws),
        "--provider",
        "scripted",
        "--scenario",
        str(scenario),
        "--prompt",
        "hi",
    ]
    for extra in ([], ["--new"]):
        out = _agentd([*base, *extra, "--reload-instructions"], env)
        assert out.returncode == 2 and "add --continue or --resume ID" in out.stderr, out.stderr
    assert not (tmp_path / "data" / "sessions").exists() or not any(
        (tmp_path / "data" / "sessions").iterdir()
    )
    assert _agentd(base, env).returncode == 0
    out = _agentd([*base, "--continue", "--reload-instructions"], env)
    assert out.returncode == 0 and "[instructions reloaded · AGENTS.md" in out.stderr, out.stderr
    helped = " ".join(_agentd(["run", "--help"], env).stdout.split())
    assert "with --continue or --resume: read the AGENTS.md files again" in helped
    assert "without them a usage error (exit 2)" in helped


def test_the_demos_hints_agree_continue_then_clean_up(tmp_path: Path) -> None:
    """new-user nit: the demo's last lines said `continue it: agentd run --resume ID` and `(delete /tmp/agentd-
    demo-… when done)`: after that delete, the resume was refused (the session's workspace was gone), and
    the session stayed listed. Now continuing says it works in the edited copy, and the clean-up command
    removes the session and the copy together; both commands work as printed (run here through a shell),
    with agentd named as it was started."""
    env = _env(tmp_path, TMPDIR=str(tmp_path))
    program = Path(sys.executable).with_name("agentd")  # the venv's console script, as the README runs it
    out = _agentd(["demo"], env, cmd=[str(program)])
    assert out.returncode == 0, out.stderr
    lines = {m.group(1): m.group(2) for m in re.finditer(r"^  ([a-z ]+):\s+(.+)$", out.stderr, re.M)}
    sid = re.search(r"\[demo finished · session (\S+) is stored", out.stderr).group(1)  # type: ignore[union-attr]
    (copy,) = tmp_path.glob("agentd-demo-*/workspace")
    assert lines["the edited copy"] == str(copy) and "delete" not in out.stderr
    assert "it works in the edited copy" in lines["continue it"]
    cont = shlex.split(lines["continue it"].split("   (")[0].replace("'...'", "'one more'"))
    assert cont[0] in ("agentd", str(program)) and cont[1:4] == ["run", "--resume", sid]
    scenario = tmp_path / "more.json"
    scenario.write_text(json.dumps({"answers": [{"reply": [{"text": "ok"}]}]}), encoding="utf-8")
    more = _agentd([*cont[1:], "--provider", "scripted", "--scenario", str(scenario)], env)
    assert more.returncode == 0, more.stderr  # the copy is still there: the session carries on in it
    clean = lines["when done"].split("   (")[0]
    assert clean.endswith(f"rm -rf {copy.parent}") and f"sessions rm {sid}" in clean
    path = f"{program.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(["bash", "-c", clean], env={**env, "PATH": path}, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not copy.parent.exists() and sid not in _agentd(["sessions", "list"], env).stdout


def test_sessions_list_explains_its_turns_column(tmp_path: Path) -> None:
    """new-user nit: after a rewind, `agentd sessions list` showed more TURNS than the conversation holds
    (by design: it counts every prompt sent, those a rewind abandoned too), and nothing said so. `sessions
    list --help` and docs/sessions.md explain the column; the count is the prompts' numbering."""
    env = _env(tmp_path)
    _ws, sid = _session(tmp_path, env, ["first change", "second change"])
    assert _agentd(["sessions", "rewind", sid, "--to", "1", "--conversation-only"], env).returncode == 0
    listed = _agentd(["sessions", "list"], env).stdout.splitlines()
    assert listed[0].split()[:4] == ["ID", "UPDATED", "TURNS", "TOKENS"] and listed[1].split()[2] == "2"
    helped = " ".join(_agentd(["sessions", "list", "--help"], env).stdout.split())
    assert "TURNS counts every prompt sent to the session" in helped and "abandoned branch too" in helped
    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "sessions.md").read_text().split())
    assert "`TURNS` counts every prompt sent to the session" in docs
