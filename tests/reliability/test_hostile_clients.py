"""Hostile clients of a socket daemon, in both socket modes (`--tcp PORT`, `--socket PATH`; issue 16 §1, the
break16 findings F1-F3). A real daemon subprocess with `--log-file`; raw sockets as clients:

- break16 F1: clients without a token that send requests with 500 KB ids and never read held 390 MiB and
  their connections past the deadline (a plain close waits for the peer to read). Now huge ids are invalid
  requests (answered under id null), a client may leave at most `PREAUTH_OUT_LIMIT` bytes unread before its
  initialize, and the deadline and evictions abort the socket: memory stays bounded, every connection is
  closed by the deadline and the daemon's file descriptors come back down.
- break16 F2: a reset in the middle of a flood put `Unhandled exception in client_connected_cb` and a
  traceback on stderr. Now it is a disconnect: no traceback.
- break16 F3: frames already read were dispatched after the connection closed, one log line each (668 KB of
  log per 920 KB burst). Now reading stops once the connection ends: the log grows by a few lines.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.adapters.lsp import transport
from tests.lsp.harness import daemon_env, frame, init_params, parse_frames, wait_until, write_scenario

HUGE_ID = "A" * 500_000


@dataclass
class Daemon:
    proc: asyncio.subprocess.Process
    mode: str
    address: Any  # a port (tcp) or a path (socket)
    token: str | None
    options: dict[str, Any]
    workspace: Path
    stderr: Path
    log: Path

    def raw(self, rcvbuf: int = 4096) -> socket.socket:
        """A connected, non-blocking client socket with a small receive buffer."""
        family = socket.AF_INET if self.mode == "tcp" else socket.AF_UNIX
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.connect(("127.0.0.1", self.address) if self.mode == "tcp" else str(self.address))
        sock.setblocking(False)
        return sock

    async def editor(self, sock: socket.socket) -> None:
        """Initialize on `sock` as an editor does (with the token in tcp mode) and wait for the answer."""
        options = {**self.options, **({"authToken": self.token} if self.token else {})}
        params = init_params(self.workspace, options)
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(
            sock, frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        )
        data = b""
        while not any(f.get("id") == 1 for f in parse_frames(data)[0]):
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), 30)
            assert chunk, "the daemon closed an editor's connection"
            data += chunk
        assert "result" in next(f for f in parse_frames(data)[0] if f.get("id") == 1)
        await loop.sock_sendall(sock, frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def log_lines(self) -> int:
        return len(self.log.read_bytes().splitlines()) if self.log.exists() else 0

    async def stop(self) -> str:
        self.proc.send_signal(15)
        await asyncio.wait_for(self.proc.wait(), 30)
        return self.stderr.read_text(errors="replace") + self.log.read_text(errors="replace")


@pytest.fixture(params=["tcp", "socket"])
async def daemon(request: Any, tmp_path: Path) -> AsyncIterator[Daemon]:
    data_dir, workspace = tmp_path / "data", tmp_path / "ws"
    workspace.mkdir()
    options = {"provider": "scripted", "scenario": str(write_scenario(tmp_path / "s.json", {"answers": []}))}
    if request.param == "tcp":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            address: Any = probe.getsockname()[1]
        mode_args = ["--tcp", str(address)]
    else:
        address = tmp_path / "agentd.sock"
        mode_args = ["--socket", str(address)]
    log = tmp_path / "agentd.log"
    err = (tmp_path / "stderr").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--log-file", str(log), *mode_args, env=daemon_env(data_dir),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    err.close()
    ready = data_dir / f"tcp-{address}.token" if request.param == "tcp" else address
    try:
        await wait_until(lambda: ready.exists() and (request.param != "tcp" or ready.stat().st_size > 0),
                         "the daemon to listen", 60)  # fmt: skip
        token = ready.read_text() if request.param == "tcp" else None
        yield Daemon(proc, request.param, address, token, options, workspace, tmp_path / "stderr", log)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def send_all(sock: socket.socket, data: bytes, timeout: float = 60) -> None:
    """Send `data`, stopping quietly if the daemon closes the connection meanwhile or, after `timeout` s,
    stops reading (backpressure)."""
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_sendall(sock, data), timeout)
    except (ConnectionError, OSError):  # TimeoutError included
        pass


async def closed_within(sock: socket.socket, timeout: float) -> int:
    """Read until the daemon closes the connection (a reset counts) within `timeout` s; the bytes read."""
    loop = asyncio.get_running_loop()
    got = 0
    try:
        while chunk := await asyncio.wait_for(loop.sock_recv(sock, 65536), timeout):
            got += len(chunk)
    except ConnectionError:
        pass
    return got


async def test_clients_without_a_token_that_never_read_hold_nothing(daemon: Daemon) -> None:
    """break16 F1: 20 clients send requests with 500 KB ids before initialize and never read. The daemon
    grows less than 64 MiB, every connection is closed within the deadline (+ a margin for a loaded
    machine), its file descriptors come back down, and no answer echoes a huge id."""
    baseline_fds, before = daemon.fds(), daemon.rss_kib()
    request = frame({"jsonrpc": "2.0", "id": HUGE_ID, "method": "x"})
    socks = [daemon.raw() for _ in range(20)]
    peak = 0

    async def hostile(sock: socket.socket) -> None:
        nonlocal peak
        for _ in range(6):
            await send_all(sock, request)
            peak = max(peak, daemon.rss_kib() - before)

    started = asyncio.get_running_loop().time()
    await asyncio.gather(*(hostile(s) for s in socks))  # the clients read nothing from here on
    await wait_until(lambda: daemon.fds() <= baseline_fds + 2, "the daemon to close every connection",
                     transport.AUTH_DEADLINE_S + 30)  # fmt: skip
    elapsed = asyncio.get_running_loop().time() - started
    read = await asyncio.gather(*(closed_within(s, 30) for s in socks))  # what the kernel kept, then the end
    for s in socks:
        s.close()
    assert max(read) < 64 * 1024, f"a client without a token was sent {max(read)} bytes"
    assert elapsed < transport.AUTH_DEADLINE_S + 30
    assert peak < 64 * 1024, f"the daemon grew {peak} KiB"
    editor = daemon.raw(65536)
    await daemon.editor(editor)  # still serving
    editor.close()
    out = await daemon.stop()
    assert "Traceback" not in out and "Unhandled exception" not in out


async def test_a_client_without_a_token_that_leaves_answers_unread_is_dropped(daemon: Daemon) -> None:
    """break16 F1: before its initialize a client may leave at most PREAUTH_OUT_LIMIT bytes unread; one
    that sends many small requests and never reads is dropped (one log line), not held to the deadline."""
    request = frame({"jsonrpc": "2.0", "id": 1, "method": "x"})
    sock = daemon.raw()
    await send_all(sock, request * 100_000)  # 13 MB of answers, past what the kernel buffers
    await wait_until(lambda: daemon.log.exists() and "initialize" in daemon.log.read_text(),
                     "the daemon to drop the client", transport.AUTH_DEADLINE_S + 30)  # fmt: skip
    log = daemon.log.read_text()
    assert "unread before its initialize (limit 65536); ending the connection" in log, log  # not the deadline
    assert await closed_within(sock, 30) < 8 * 1024 * 1024  # closed, having been sent a bounded amount
    sock.close()
    out = await daemon.stop()
    assert out.count("unread before its initialize") == 1, out[-2000:]
    assert "Traceback" not in out and "Unhandled exception" not in out


def reset(sock: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0), as a crashed client or a dropped network does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


async def test_a_flood_then_a_reset_leaves_no_traceback_and_a_few_log_lines(daemon: Daemon) -> None:
    """break16 F2 + F3: an editor sends 920 KB of one-byte frames (each answered -32700) without reading,
    then resets. No traceback or unhandled exception on stderr or in the log; the log grows by a few lines,
    not one per frame still buffered (pygls's feature registrations for the next editor aside); the daemon
    serves the next editor."""
    sock = daemon.raw()
    await daemon.editor(sock)
    lines = daemon.log_lines()
    await send_all(sock, b"Content-Length: 1\r\n\r\nx" * 42_000, timeout=5)  # held back (socket mode): enough
    reset(sock)
    other = daemon.raw(65536)
    await daemon.editor(other)
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(other, frame({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/list"}))
    data = b""
    while not any(f.get("id") == 2 for f in parse_frames(data)[0]):
        chunk = await asyncio.wait_for(loop.sock_recv(other, 65536), 30)
        assert chunk
        data += chunk
    reset(other)
    out = await daemon.stop()
    assert "Traceback" not in out and "Unhandled exception" not in out
    new = [ln for ln in daemon.log.read_text().splitlines()[lines:] if "pygls.feature_manager" not in ln]
    assert len(new) <= 12, "the log grew by {} lines:\n{}".format(len(new), "\n".join(new[:20]))


async def test_a_reset_right_after_a_request_leaves_no_traceback(daemon: Daemon) -> None:
    """break16 F2: a client resets while its answer is being written: a disconnect, not a traceback."""
    for _ in range(5):
        sock = daemon.raw()
        await daemon.editor(sock)
        await send_all(sock, frame({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/list"}) * 200)
        reset(sock)
    out = await daemon.stop()
    assert "Traceback" not in out and "Unhandled exception" not in out


async def test_requests_behind_an_exit_in_the_same_read_are_not_handled(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Recheck of break16 F3: `exit` ended the connection in a task, so requests sent in the same packet
    behind it were still handled (50 `agentd/session/new` after an exit created 50 sessions). Nothing
    after an `exit` is read."""
    sock = daemon.raw(rcvbuf=65536)
    await daemon.editor(sock)
    new = {"cwd": str(daemon.workspace)}
    burst = frame({"jsonrpc": "2.0", "method": "exit"}) + b"".join(
        frame({"jsonrpc": "2.0", "id": 10 + k, "method": "agentd/session/new", "params": new})
        for k in range(5)
    )
    await send_all(sock, burst)
    await closed_within(sock, 30)
    sock.close()
    out = await daemon.stop()
    sessions = tmp_path / "data" / "sessions"
    assert not sessions.exists() or not [p for p in sessions.rglob("meta.json")], sorted(sessions.rglob("*"))
    assert "Traceback" not in out
