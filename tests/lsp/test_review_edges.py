"""JSON-RPC edge cases found in review: a notification method sent with an id is answered (not left
hanging), and `$/cancelRequest` with an object id is ignored without an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _frames(data: bytes) -> list[dict]:
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        n = int(head.split(b":")[1])
        out.append(json.loads(rest[:n]))
        data = rest[n:]
    return out


def test_notification_with_an_id_and_object_cancel_id(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    msgs = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"capabilities": {}, "rootUri": tmp_path.as_uri()},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": {"a": 1}}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "agentd"],
        input=b"".join(_frame(m) for m in msgs),
        capture_output=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    replies = {f["id"]: f for f in _frames(proc.stdout)}
    assert (proc.returncode, sorted(replies), "Traceback" in proc.stderr.decode()) == (0, [1, 2, 3], False)
    assert replies[2]["error"] == {
        "code": -32600,
        "message": "initialized is a notification; send it without an id.",
        "data": {"name": "InvalidRequest"},
    }


def test_a_second_daemon_never_takes_over_a_live_socket(tmp_path: Path) -> None:
    """C06 class: a second `agentd --socket PATH` used to replace the live socket silently."""
    import socket as sockets

    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    path = str(tmp_path / "a.sock")
    first = subprocess.Popen(
        [sys.executable, "-m", "agentd", "--socket", path, "--exit-when-idle", "30"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        import time as _time

        deadline, ready = _time.monotonic() + 20, False  # readiness poll with a deadline
        while not ready and _time.monotonic() < deadline and first.poll() is None:
            with sockets.socket(sockets.AF_UNIX) as probe:
                ready = probe.connect_ex(path) == 0
        assert ready, "the first daemon never listened"
        second = subprocess.run(
            [sys.executable, "-m", "agentd", "--socket", path],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        with sockets.socket(sockets.AF_UNIX) as probe:
            probe.connect(path)  # the first daemon still answers on it
    finally:
        first.terminate()
        first.wait(timeout=20)
    assert (second.returncode, second.stderr) == (
        2,
        f"agentd: --socket {path}: another agentd is serving this socket; connect to it, stop it, or choose "
        "another path\n",
    )


def test_sighup_stops_the_socket_daemon_as_sigterm_does(tmp_path: Path) -> None:
    """break12 (new-user trial): SIGHUP (the terminal that started the daemon closed) killed it without
    its clean-up; it now stops as on SIGTERM: exit 0, the socket removed."""
    import signal
    import socket as sockets
    import time as _time

    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    path = str(tmp_path / "h.sock")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "agentd", "--socket", path, "--exit-when-idle", "60"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline, ready = _time.monotonic() + 30, False  # readiness poll with a deadline
        while not ready and _time.monotonic() < deadline and daemon.poll() is None:
            with sockets.socket(sockets.AF_UNIX) as probe:
                ready = probe.connect_ex(path) == 0
        assert ready, "the daemon never listened"
        daemon.send_signal(signal.SIGHUP)
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert not os.path.exists(path)
