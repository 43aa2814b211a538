"""The command line as a user meets it from outside (issue 9: H4, H7-H12, H14, H15, H21): a real `agentd`
subprocess, the scripted model or the bundled emulator (PROTOCOL.md §3.1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

AGENTD = [sys.executable, "-m", "agentd"]
_TICK = threading.Event()  # never set: its wait() is the poll interval


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data"), **extra}


def _agentd(args: list[str], env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    kw.setdefault("capture_output", True)
    return subprocess.run(
        [*AGENTD, *args],
        env=env,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        **kw,
    )


def _tool(name: str, **inp: Any) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": inp}}


def _scenario(tmp_path: Path, *replies: list[dict[str, Any]], name: str = "scenario.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"answers": [{"reply": r} for r in replies]}), encoding="utf-8")
    return path


def _ws(tmp_path: Path, name: str = "ws") -> Path:
    ws = tmp_path / name
    ws.mkdir(exist_ok=True)
    return ws


def _run(tmp_path: Path, scenario: Path, *more: str, ws: Path | None = None, prompt: str = "go") -> list[str]:
    return [
        "run",
        "--workspace",
        str(ws or _ws(tmp_path)),
        "--provider",
        "scripted",
        "--scenario",
        str(scenario),
        "--prompt",
        prompt,
        *more,
    ]


def _session_ids(data: Path) -> list[str]:
    sessions = data / "sessions"
    return sorted(p.name for p in sessions.iterdir()) if sessions.is_dir() else []


def _one_session(tmp_path: Path) -> str:
    """A finished session (text, a plan, a read) in tmp_path's data dir; returns its id."""
    scenario = _scenario(
        tmp_path,
        [{"text": "Planning."}, _tool("todo_write", todos=[{"content": "look", "status": "in_progress"}])],
        [{"text": "Done.\n" * 50}],
        name="one.json",
    )
    out = _agentd(_run(tmp_path, scenario), _env(tmp_path))
    assert out.returncode == 0, out.stderr
    (sid,) = _session_ids(tmp_path / "data")
    return sid


# ---- H7: a closed pipe ------------------------------------------------------------------------------


def test_every_command_exits_quietly_on_a_closed_pipe(tmp_path: Path) -> None:
    """H7: `agentd sessions list | head -1` printed "internal error: BrokenPipeError ... please report it"
    and exited 1. Every command whose reader went away stops quietly with 141 (128 + SIGPIPE), like a Unix
    tool; a turn whose stdout closed is cancelled."""
    sid = _one_session(tmp_path)
    scenario = _scenario(tmp_path, [{"text": "Hello there.\n"}], [{"text": "again"}])
    commands = {
        "list": ["sessions", "list"],
        "show": ["sessions", "show", sid],
        "jsonl": ["sessions", "export", sid, "--format", "jsonl"],
        "markdown": ["sessions", "export", sid, "--format", "markdown"],
        "run": _run(tmp_path, scenario),
    }
    results = {}
    for name, args in commands.items():
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before agentd writes its first byte
        try:
            out = _agentd(
                args, _env(tmp_path), stdout=write_end, stderr=subprocess.PIPE, capture_output=False
            )
        finally:
            os.close(write_end)
        results[name] = (out.returncode, "Traceback" in out.stderr, "internal error" in out.stderr)
    assert results == {name: (141, False, False) for name in commands}


# ---- H8: global options in both places ------------------------------------------------------------


def test_global_options_work_before_and_after_the_subcommand(tmp_path: Path) -> None:
    """H8: `agentd sessions list -v` was refused: -v, --data-dir and --log-file are accepted before the
    subcommand and after it (and after `sessions list|show|...`)."""
    sid = _one_session(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "AGENTD_DATA_DIR"}
    env["AGENTD_DATA_DIR"] = str(tmp_path / "elsewhere")  # only the flag can find the session
    data = str(tmp_path / "data")
    for args in (
        ["--data-dir", data, "-v", "sessions", "list"],
        ["sessions", "--data-dir", data, "list", "-v"],
        ["sessions", "list", "-v", "--data-dir", data],
        ["-v", "sessions", "show", sid, "--data-dir", data, "-v"],
        [
            "sessions",
            "export",
            sid,
            "--format",
            "jsonl",
            "--data-dir",
            data,
            "--log-file",
            str(tmp_path / "l"),
        ],
    ):
        out = _agentd(args, env)
        assert (out.returncode, sid in out.stdout) == (0, True), (args, out.stderr)
    scenario = _scenario(tmp_path, [{"text": "ok"}])
    log_file = tmp_path / "logs" / "agentd.log"
    out = _agentd([*_run(tmp_path, scenario), "--data-dir", data, "-vv", "--log-file", str(log_file)], env)
    assert out.returncode == 0, out.stderr
    assert len(_session_ids(tmp_path / "data")) == 2
    assert " DEBUG " in log_file.read_text()  # -vv after the subcommand counts, and the log went to the file


# ---- H4: --workspace with --resume ----------------------------------------------------------------


def test_resume_with_another_workspace_is_refused(tmp_path: Path) -> None:
    """H4: `agentd run --resume ID --workspace OTHER` silently ran in the session's own folder (the warning
    could never print). It is refused with exit 2, naming both folders, and the session is untouched."""
    sid = _one_session(tmp_path)
    other = _ws(tmp_path, "other")
    log = tmp_path / "data" / "sessions" / sid / "log.jsonl"
    before = log.read_bytes()
    scenario = _scenario(tmp_path, [{"text": "never"}])
    out = _agentd(_run(tmp_path, scenario, "--resume", sid, ws=other), _env(tmp_path))
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"agentd: session {sid} works in {tmp_path / 'ws'}, not in {other}; drop --workspace to resume it "
        f"there, or start a new session in {other} (without --resume)\n"
    )
    assert log.read_bytes() == before
    same = _agentd(_run(tmp_path, scenario, "--resume", sid, ws=tmp_path / "ws"), _env(tmp_path))
    assert same.returncode == 0, same.stderr  # naming the session's own folder is fine


# ---- H9: why a tool failed; no terminal -----------------------------------------------------------


def test_failed_tools_say_why_in_one_line(tmp_path: Path) -> None:
    """H9: the terminal said only `[Tool] … -> failed`. Each failure now ends with its reason: the command's
    exit code, the missing file, the refused path."""
    scenario = _scenario(
        tmp_path,
        [
            _tool("run_command", command="echo some output; exit 3"),
            _tool("read_file", path="missing.txt"),
            _tool("read_file", path="../outside.txt"),
            _tool("edit_file", path="a.txt", old_string="nope", new_string="x"),
        ],
        [{"text": "ok"}],
    )
    ws = _ws(tmp_path)
    (ws / "a.txt").write_text("alpha\n")
    out = _agentd(_run(tmp_path, scenario, "--yes", ws=ws), _env(tmp_path))
    assert out.returncode == 0, out.stderr
    tools = [line for line in out.stderr.splitlines() if line.startswith("[Tool]")]
    assert tools[0] == "[Tool] Run `echo some output; exit 3` -> failed: exit code 3"
    assert tools[1].startswith("[Tool] Read missing.txt -> failed: ") and "missing.txt" in tools[1][30:]
    assert tools[2] == (
        f"[Tool] Read ../outside.txt -> failed: Refused: ../outside.txt is outside the workspace ({ws}) or "
        "reached through a symbolic link; the call was not run."
    )
    assert tools[3].startswith("[Tool] Edit a.txt -> failed: ") and len(tools) == 4


def test_without_a_terminal_refused_writes_say_so_and_exit_8(tmp_path: Path) -> None:
    """H9: without a terminal, writes were reported as `deny (timeout)` though nothing waited, and the run
    exited 0. The line says there is no terminal and what to pass; a turn whose every write was refused that
    way exits 9 with the hint; once any write ran, the exit is 0."""
    write = _tool("write_file", path="a.txt", content="x\n")
    command = _tool("run_command", command="true")
    scenario = _scenario(tmp_path, [write, command], [{"text": "Tried."}])
    out = _agentd(_run(tmp_path, scenario), _env(tmp_path))
    lines = out.stderr.splitlines()
    assert (out.returncode, out.stdout) == (9, "Tried.\n")
    assert [x for x in lines if x.startswith("[Permission]")] == [
        "[Permission] write_file -> deny (no terminal to ask; use --yes or --allow write_file)",
        "[Permission] run_command -> deny (no terminal to ask; use --yes or --allow run_command)",
    ]
    assert lines[-1] == (
        "agentd: no terminal to ask, so every write of this turn was refused (write_file, run_command); "
        "rerun with --yes or --allow TOOL (e.g. --allow write_file)"
    )
    assert not (tmp_path / "ws" / "a.txt").exists()
    partly = _agentd(_run(tmp_path, scenario, "--allow", "write_file"), _env(tmp_path))
    assert partly.returncode == 0, partly.stderr
    assert "[Permission] write_file -> allow (auto-answered by --allow write_file)" in partly.stderr
    assert "every write of this turn" not in partly.stderr


# ---- H10: Ctrl-C and an empty reply ----------------------------------------------------------------


def test_ctrl_c_prints_cancelled_and_an_empty_reply_says_so(tmp_path: Path) -> None:
    """H10: Ctrl-C exited 130 without a word, and an empty model reply printed nothing and exited 0.
    `[cancelled]` is the last line before 130; an empty last reply is named."""
    ws = _ws(tmp_path)
    scenario = _scenario(tmp_path, [_tool("run_command", command="echo $$ > cmd.pid; sleep 60")], [])
    proc = subprocess.Popen(
        [*AGENTD, *_run(tmp_path, scenario, "--allow", "run_command", ws=ws)],
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (ws / "cmd.pid").exists() or not (ws / "cmd.pid").read_text().endswith("\n"):
            assert time.monotonic() < deadline and proc.poll() is None, "the command never started"
            _TICK.wait(0.02)  # a readiness poll with a deadline, not synchronisation by sleeping
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, err.splitlines()[-1]) == (130, "[cancelled]")
    empty = _scenario(tmp_path, [], name="empty.json")
    out = _agentd(_run(tmp_path, empty), _env(tmp_path))
    assert (out.returncode, out.stdout) == (0, "")
    assert out.stderr.splitlines()[-2:] == ["[stop · end_turn]", "[the model's last reply was empty]"]


# ---- H11: a refused local endpoint ------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_refused_local_endpoint_fails_fast_and_leaves_no_session(tmp_path: Path, provider: str) -> None:
    """H11: a refused connection to 127.0.0.1 was retried for about 47 s and left an empty session that
    became the `--continue` target. Now: one retry, a message naming the URL, and no session kept."""
    url = f"http://127.0.0.1:{_closed_port()}" + ("/v1" if provider == "openai" else "")
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-ant-test-" + "0" * 24)
    args = [
        "run",
        "--workspace",
        str(_ws(tmp_path)),
        "--provider",
        provider,
        "--base-url",
        url,
        "--prompt",
        "hi",
    ]
    out = _agentd(args, env)
    assert (out.returncode, out.stdout) == (6, "")
    last = out.stderr.splitlines()[-1]
    assert url in last and "refused the connection" in last and last.endswith("(gave up after 2 attempts)")
    assert len(re.findall(r"^\[Retry\] .* attempt 1 failed; next in ", out.stderr, re.M)) == 1, out.stderr
    assert _session_ids(tmp_path / "data") == []
    assert "discarded: the model was never reached" in out.stderr


def test_sessions_show_names_the_model_last_asked_for(tmp_path: Path) -> None:
    """H11: `sessions show` named the model the session was created with, not the one the later turns
    asked for (a session continued with `--model`)."""
    sid = _one_session(tmp_path)
    scenario = _scenario(tmp_path, [{"text": "ok"}])
    out = _agentd([*_run(tmp_path, scenario, "--resume", sid), "--model", "bigger-model"], _env(tmp_path))
    assert out.returncode == 0, out.stderr
    shown = _agentd(["sessions", "show", sid], _env(tmp_path))
    assert (
        shown.stdout.splitlines()[1]
        == f"workspace: {tmp_path / 'ws'}  model: bigger-model (created with scripted)"
    )


# ---- H12: a data dir agentd cannot write -------------------------------------------------------------


def _read_only(cmd: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `cmd` with `folder` read-only: chmod for a normal user; for root (whom modes do not stop), a
    read-only bind mount in a private user and mount namespace (`unshare -rm`)."""
    if os.geteuid() != 0:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        try:
            return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        finally:
            for p in [folder, *folder.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)
    if shutil.which("unshare") is None:
        pytest.skip("running as root without unshare(1): cannot make a folder read-only")
    script = 'd=$1; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" && exec "$@"'
    wrapped = ["unshare", "-rm", "sh", "-c", script, "sh", str(folder), *cmd]
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(folder), "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a read-only folder here: {probe.stderr.strip()}")
    return subprocess.run(wrapped, env=env, capture_output=True, text=True, timeout=120)


def test_read_only_views_work_on_a_read_only_data_dir(tmp_path: Path) -> None:
    """H12: `sessions list`, `show` and `export` refused a data dir agentd cannot write ("not writable",
    exit 2). They only read, so they work; `rm` still says what is wrong."""
    sid = _one_session(tmp_path)
    data = tmp_path / "data"
    env = _env(tmp_path)
    for args in (
        ["sessions", "list"],
        ["sessions", "show", sid],
        ["sessions", "export", sid, "--format", "jsonl"],
        ["sessions", "export", sid, "--format", "markdown"],
    ):
        out = _read_only([*AGENTD, *args], data, env)
        assert (out.returncode, out.stderr, sid in out.stdout) == (0, "", True), args
    rm = _read_only([*AGENTD, "sessions", "rm", sid], data, env)
    assert rm.returncode == 2 and "is not writable" in rm.stderr


def _frame(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_a_server_that_cannot_write_its_data_dir_answers_initialize_with_the_reason(tmp_path: Path) -> None:
    """H12: `agentd --stdio` with an unusable data dir exited before reading a byte, so the editor saw a
    silent exit. It answers `initialize` with a StorageError that names the data dir and what to do."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"capabilities": {}, "rootUri": None},
    }
    stdin = _frame(init) + _frame({"jsonrpc": "2.0", "method": "exit"})
    out = subprocess.run(
        [*AGENTD, "--stdio", "--data-dir", str(blocker / "data")],
        input=stdin,
        capture_output=True,
        timeout=60,
        env=os.environ.copy(),
    )
    header, _, body = out.stdout.partition(b"\r\n\r\n")
    answer = json.loads(body[: int(header.split(b":")[1])])
    assert (
        answer["id"] == 1
        and answer["error"]["code"] == -32016
        and answer["error"]["data"]["name"] == "StorageError"
    )
    message = answer["error"]["message"]
    assert message.startswith("agentd cannot store sessions: data dir ") and str(blocker) in message
    assert "--data-dir DIR" in message


# ---- H14: the demo ----------------------------------------------------------------------------------


def test_demo_shows_its_work_and_its_session_can_be_found(tmp_path: Path) -> None:
    """H14: `agentd demo` printed a session id that `sessions show` could not find, never showed its prompt,
    a diff or a cache figure other than 0, and labelled its own answers `(user)`. Now it shows the prompt,
    the plan as a list, the edit's diff in the approval as asked and answered (marked auto-answered), the
    command's output, non-zero cache reads from the emulated API, and where the session lives."""
    env = _env(tmp_path, TMPDIR=str(tmp_path))  # the demo's workspace copy stays in tmp_path
    out = _agentd(["demo"], env)
    assert out.returncode == 0, out.stderr
    err = out.stderr
    assert "[prompt] Add a --shout flag to greet.py, test it, and keep a TODO list." in err
    assert "[Plan]\n  [~] Read README.md and greet.py\n  [ ] Add a --shout flag to greet.py\n" in err
    assert "[agentd] Edit greet.py\n--- a/greet.py\n+++ b/greet.py\n" in err
    assert '+    shout = "--shout" in argv\n' in err
    assert "Allow? [o]nce / [a]lways / [d]eny: o   <- auto-answered by agentd demo" in err
    assert "[Permission] edit_file -> allow (auto-answered by agentd demo)" in err
    assert "(user)" not in err
    assert "[Output]" in err and "  | HELLO, ADA!" in err
    usage = re.search(r"\[usage · 6 requests · in=\d+ cache_read=(\d+) \((\d+) % of prompt tokens\)", err)
    assert usage is not None and int(usage.group(1)) > 0 and int(usage.group(2)) >= 50
    sid = re.search(r"\[demo finished · session (\S+) is stored in (.+)\]", err)
    assert sid is not None and sid.group(2) == str(tmp_path / "data")
    assert f"agentd sessions show {sid.group(1)}" in err and f"agentd run --resume {sid.group(1)}" in err
    (copy,) = tmp_path.glob("agentd-demo-*/workspace")
    assert f"[workspace {copy}]" in err and 'shout = "--shout" in argv' in (copy / "greet.py").read_text()
    shown = _agentd(["sessions", "show", sid.group(1)], env)
    assert shown.returncode == 0 and "- [x] Run the tests" in shown.stdout
    assert out.stdout.splitlines()[-1].startswith("Done: greet.py now takes --shout")


# ---- H15: one file for stdout and stderr ------------------------------------------------------------


def test_stdout_and_stderr_in_one_file_never_share_a_line(tmp_path: Path) -> None:
    """H15: with `> out 2>&1`, the assistant's text and the next stderr line shared a line
    (`I'll plan this first.[turn …]`). An operator line first ends the open text line."""
    plan = _tool("todo_write", todos=[{"content": "a", "status": "pending"}])
    scenario = _scenario(tmp_path, [{"text": "I'll plan this first."}, plan], [{"text": "Done."}])
    with (tmp_path / "out.txt").open("w") as both:
        out = _agentd(
            _run(tmp_path, scenario), _env(tmp_path), stdout=both, stderr=both, capture_output=False
        )
    text = (tmp_path / "out.txt").read_text()
    assert out.returncode == 0, text
    assert "I'll plan this first.\n[turn · " in text
    assert all(not line.startswith(("I'll", "Done.")) or line in ("I'll plan this first.", "Done.")
               for line in text.splitlines())  # fmt: skip
    separate = _agentd(_run(tmp_path, scenario), _env(tmp_path))
    assert separate.stdout == "I'll plan this first.\nDone.\n"  # apart, stdout holds the text as it came


# ---- H21: the log file ---------------------------------------------------------------------------------


def test_log_file_never_follows_a_link_and_is_private_under_umask_000(tmp_path: Path) -> None:
    """H21: `--log-file` followed a symbolic link planted in its place and created its parent folder 0777
    under umask 000. A link is refused (exit 2, the target untouched); a new file is 0600 in a 0700 folder."""
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    link = tmp_path / "agentd.log"
    link.symlink_to(target)
    out = _agentd(["--log-file", str(link), "sessions", "list"], _env(tmp_path))
    assert (out.returncode, target.read_text()) == (2, "precious\n")
    assert out.stderr == (
        f"agentd: --log-file {link}: is a symbolic link; agentd does not follow it. Remove the link or choose "
        "another --log-file\n"
    )
    fresh = tmp_path / "new" / "deeper" / "agentd.log"
    code = (
        "import os, sys; os.umask(0); sys.argv[0] = 'agentd'; from agentd.cli import main; "
        f"main(['sessions', 'list', '--log-file', {str(fresh)!r}])"
    )
    made = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    modes = [stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "new", fresh.parent, fresh)]
    assert modes == [0o700, 0o700, 0o600]


def test_a_protected_write_without_a_terminal_does_not_point_at_yes(tmp_path: Path) -> None:
    """New-user trial: with `--yes`, a write to a protected path (`.vscode/tasks.json`, issue 12 §3) refused
    for lack of a terminal said "use --yes or --allow write_file", the flags already given. It says the path is
    protected and that only a person at a terminal can allow it."""
    write = _tool("write_file", path=".vscode/tasks.json", content="{}\n")
    scenario = _scenario(tmp_path, [write], [{"text": "Tried."}])
    out = _agentd(_run(tmp_path, scenario, "--yes"), _env(tmp_path))
    lines = out.stderr.splitlines()
    assert out.returncode == 9, out.stderr
    assert [x for x in lines if x.startswith("[Permission]")] == [
        "[Permission] write_file -> deny (no terminal to ask; a protected path (editor_config): only a person at "
        "a terminal can allow it)"
    ]
    assert lines[-1] == (
        "agentd: no terminal to ask, so every write of this turn was refused (write_file); a write to a protected "
        "path (editor_config) is allowed only by a person at a terminal: run on a terminal, or change the file "
        "yourself"
    )
    assert not (tmp_path / "ws" / ".vscode").exists()


def test_a_retry_is_one_line_not_a_log_record(tmp_path: Path) -> None:
    """New-user trial: a provider retry showed in `agentd run` as a raw timestamped log record among the
    `[turn …]` and `[Tool] …` lines. It is one `[Retry]` line from the session's `retry` update; a log file keeps
    the record."""
    path = tmp_path / "retry.json"
    answers = [{"fault": {"http": 529, "headers": {"retry-after-ms": "1"}}}, {"reply": [{"text": "Done."}]}]
    path.write_text(json.dumps({"answers": answers}), encoding="utf-8")
    out = _agentd(_run(tmp_path, path), _env(tmp_path))
    assert out.returncode == 0, out.stderr
    retries = [x for x in out.stderr.splitlines() if "retry" in x.lower()]
    assert len(retries) == 1 and retries[0].startswith("[Retry] "), out.stderr
    assert retries[0].endswith("· attempt 1 failed; next in 0.001 s") and "529" in retries[0]
    logged = _agentd([*_run(tmp_path, path), "--log-file", str(tmp_path / "agentd.log")], _env(tmp_path))
    assert logged.returncode == 0, logged.stderr
    assert "WARNING agentd.providers" in (tmp_path / "agentd.log").read_text()
