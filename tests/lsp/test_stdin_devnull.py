"""stdio mode with a stdin the event loop cannot watch (/dev/null, a regular file): end of input is shutdown +
exit (PROTOCOL.md §4.4), promptly and without a traceback; a terminal on stdin gets one hint line on stderr."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from tests.lsp.harness import daemon_env

TTY_HINT = (
    "agentd: serving LSP on stdin/stdout for an editor; for the terminal use "
    '"agentd run --prompt TEXT" or "agentd demo" (Ctrl-C to quit)\n'
)


def _run(stdin: int | IO[Any], data_dir: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "agentd"],
        stdin=stdin,
        capture_output=True,
        env=daemon_env(data_dir),
        timeout=10,
    )


def test_dev_null_stdin_exits_promptly_and_quietly(data_dir: Path) -> None:
    done = _run(subprocess.DEVNULL, data_dir)
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"Traceback" not in done.stderr
    assert b"PermissionError" not in done.stderr


def test_regular_file_stdin_exits_promptly_and_quietly(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(b"not a frame\r\n\r\n")  # no Content-Length: a framing error (1)
    with path.open("rb") as f:
        done = _run(f, data_dir)
    assert (done.returncode, done.stdout, b"Traceback" in done.stderr) == (1, b"", False)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with empty.open("rb") as f:
        done = _run(f, data_dir)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_a_terminal_on_stdin_gets_one_hint_line_on_stderr(data_dir: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentd"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=daemon_env(data_dir),
    )
    os.close(slave)
    assert proc.stderr is not None
    err = b""
    try:
        deadline = time.monotonic() + 10
        while not err.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            err += chunk
        hint_while_waiting = err
    finally:
        os.close(master)  # the terminal goes away: end of input
    out, rest = proc.communicate(timeout=10)
    assert (hint_while_waiting.decode(), out, proc.returncode) == (TTY_HINT, b"", 0)
    assert b"Traceback" not in rest
