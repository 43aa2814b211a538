"""break9 attacks on the command line. H20 class: no control character from a model reply, a stored
session or a command reaches the terminal as itself. A reply that writes `ESC [2J` (clear screen), an OSC
title or clipboard sequence, a BEL or a lone CR (which rewrites a line: a forged `[Permission] ... -> allow`)
is shown with escapes by `agentd run`, `agentd sessions show`, `sessions list` and `sessions export --format
markdown`; the JSONL export stays the log itself. H7 class: a standard stream closed at start. H19: a
workspace path that is not UTF-8. H11 class:
every address of this machine fails fast when refused."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentd.log import Console
from agentd.providers.base import is_local
from agentd.text import terminal_safe

AGENTD = [sys.executable, "-m", "agentd"]
HOSTILE = "hello \x1b[2J\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x07 fine\r[Permission] rm -> allow\x9b31m"
CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]


def _agentd(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(
        [*AGENTD, *args], env=env, text=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL
    )


def _raw(text: str) -> list[str]:
    return [c for c in text if c in CONTROLS]


def test_terminal_safe_escapes_controls_only() -> None:
    """H20 (break9): C0 (but tab and newline), DEL and C1 become escapes; a CRLF is a newline; right-to-left
    prose and other text stay; the function is idempotent."""
    assert terminal_safe(HOSTILE) == (
        "hello \\x1b[2J\\x1b]0;pwned\\x07\\x1b]52;c;ZWNobyBoaQ==\\x07 fine\\r[Permission] rm -> allow\\x9b31m"
    )
    assert terminal_safe("a\r\nb\tc שלום") == "a\nb\tc שלום"
    assert terminal_safe(terminal_safe(HOSTILE)) == terminal_safe(HOSTILE)
    assert _raw(terminal_safe("".join(CONTROLS))) == []


def test_the_console_writes_no_control_character(monkeypatch: Any) -> None:
    """H20 (break9): both streams of `Console` (the model's text and every operator line) are escaped."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    console = Console()
    console.out(HOSTILE)
    console.line("[Tool] " + HOSTILE)
    assert _raw(out.getvalue()) == [] and _raw(err.getvalue()) == []
    assert "\\x1b]52;c;" in out.getvalue() and "\\x1b]0;pwned" in err.getvalue()


def test_agentd_run_and_the_session_views_show_a_hostile_reply_escaped(tmp_path: Path) -> None:
    """H20 (break9): `agentd run` streams a reply holding terminal sequences with escapes, and so do
    `sessions show`, `sessions list` (the title is the prompt's first line) and the Markdown export."""
    ws = tmp_path / "ws"
    ws.mkdir()
    scenario = tmp_path / "s.json"
    plan = {"todos": [{"content": "step \x1b[8mhidden", "status": "pending"}]}
    replies = [[{"tool_use": {"name": "todo_write", "input": plan}}], [HOSTILE]]
    scenario.write_text(json.dumps({"answers": [{"reply": r} for r in replies]}), encoding="utf-8")
    prompt = "title \x1b]0;x\x07 here"
    run = _agentd(
        [
            "run",
            "--workspace",
            str(ws),
            "--provider",
            "scripted",
            "--scenario",
            str(scenario),
            "--prompt",
            prompt,
        ],
        tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert _raw(run.stdout) == [] and _raw(run.stderr) == []
    assert "\\x1b[2J" in run.stdout and "\\r[Permission] rm -> allow" in run.stdout
    (sid,) = os.listdir(tmp_path / "data" / "sessions")
    for args in (
        ["sessions", "show", sid],
        ["sessions", "list"],
        ["sessions", "export", sid, "--format", "markdown"],
    ):
        view = _agentd(args, tmp_path)
        assert view.returncode == 0, view.stderr
        assert _raw(view.stdout) == [], args
    assert "\\x1b[8mhidden" in _agentd(["sessions", "show", sid], tmp_path).stdout
    jsonl = _agentd(["sessions", "export", sid, "--format", "jsonl"], tmp_path).stdout
    assert json.dumps(HOSTILE, ensure_ascii=False)[1:-1] in jsonl  # the log itself, JSON-escaped


def test_a_closed_standard_stream_is_a_closed_pipe_not_an_internal_error(tmp_path: Path) -> None:
    """H7 (break9): `agentd sessions list >&-` (stdout closed, not a pipe) said "internal error:
    AttributeError" and exit 1; `agentd run ... >&-` logged a traceback and claimed the reply was empty.
    Now a closed stdout stops the command as a closed pipe does (quiet exit 141), a closed stderr or stdin
    is /dev/null, and no file agentd opens takes a closed descriptor's number."""
    ws = tmp_path / "ws"
    ws.mkdir()
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"answers": [{"reply": ["one"]}, {"reply": ["two"]}]}), encoding="utf-8")
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    run = [
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

    def closed(redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
        script = f'exec "$@" {redirect}'
        return subprocess.run(["bash", "-c", script, "bash", *AGENTD, *args], env=env, text=True,
                              capture_output=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip

    quiet = closed("2>&- <&-", *run)
    assert (quiet.returncode, quiet.stdout) == (0, "one\n")
    listed = closed(">&-", "sessions", "list")
    assert (listed.returncode, listed.stderr) == (141, "")
    turn = closed(">&-", *run)
    assert turn.returncode == 141 and "Traceback" not in turn.stderr and "empty" not in turn.stderr
    (sid, *_) = sorted(os.listdir(tmp_path / "data" / "sessions"))
    for name in ("log.jsonl", "audit.jsonl", "meta.json"):
        path = tmp_path / "data" / "sessions" / sid / name
        assert not path.exists() or "[turn" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:9/v1", True),
        ("http://127.0.0.2:9/v1", True),
        ("http://0.0.0.0:9", True),
        ("http://[::]:9", True),
        ("http://[::1]:9", True),
        ("http://[::ffff:127.0.0.1]:9", True),
        ("http://LOCALHOST:9", True),
        ("http://ollama.localhost:9", True),
        ("http://localhost.:9", True),
        ("http://localhostx:9", False),
        ("http://10.0.0.1:9", False),
        ("https://api.anthropic.com", False),
        (None, False),
    ],
)
def test_every_address_of_this_machine_is_local(url: str | None, local: bool) -> None:
    """H11 (break9): a refused connection failed fast only for localhost, 127.0.0.1 and ::1; 127.0.0.2 (all of
    127/8 is loopback), 0.0.0.0 and :: (which connect here) and *.localhost were retried for about 51 s."""
    assert is_local(url) is local


def test_a_refused_connection_to_another_loopback_address_fails_fast(tmp_path: Path) -> None:
    """H11 (break9): `--base-url http://0.0.0.0:PORT/v1` with nothing listening: one retry, the refusal
    named, no session kept (as for 127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = tmp_path / "ws"
    ws.mkdir()
    url = f"http://0.0.0.0:{port}/v1"
    out = _agentd(
        ["run", "--workspace", str(ws), "--provider", "openai", "--base-url", url, "--prompt", "hi"], tmp_path
    )
    assert (out.returncode, out.stdout) == (6, "")
    last = out.stderr.splitlines()[-1]
    assert "refused the connection" in last and last.endswith("(gave up after 2 attempts)")
    assert not (tmp_path / "data" / "sessions").exists() or not os.listdir(tmp_path / "data" / "sessions")


def test_a_workspace_whose_path_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    """H19 (break9): `agentd run` in a folder whose name is not UTF-8 (`wsx\\xff`) ended with "internal error:
    UnicodeEncodeError" and left a broken session behind; it is a usage error (exit 2) that says what to do,
    and no session is written."""
    ws = os.fsdecode(os.fsencode(tmp_path) + b"/wsx\xff")
    os.mkdir(ws)
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"answers": [{"reply": ["one"]}]}), encoding="utf-8")
    out = _agentd(
        ["run", "--workspace", ws, "--provider", "scripted", "--scenario", str(scenario), "--prompt", "hi"],
        tmp_path,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.endswith("wsx\\xff: its path is not valid UTF-8, and a session stores it as text; rename the "
                               "folder, or work in another one\n")  # fmt: skip
    assert not (tmp_path / "data" / "sessions").exists() or not os.listdir(tmp_path / "data" / "sessions")
