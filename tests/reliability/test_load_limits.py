"""A shared daemon under hostile or broken clients (issue 16 §1; PROTOCOL.md §3.1): idle connections,
too many connections, huge bodies before `initialize`, a client that never reads its answers. Every case
ends with a real editor connecting and being served, and a stderr without a traceback."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.adapters.lsp import transport
from tests.lsp.harness import daemon_env, frame, init_params, parse_frames, wait_until, write_scenario


@dataclass
class Tcp:
    proc: asyncio.subprocess.Process
    port: int
    token: str
    options: dict[str, Any]
    workspace: Path
    stderr: Path

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def editor(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection that initializes with the token (as an editor does) and is answered."""
        reader, writer = await self.connect()
        params = init_params(self.workspace, {**self.options, "authToken": self.token})
        writer.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
        assert "capabilities" in (await reply(reader, 1))["result"]
        writer.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        return reader, writer

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    async def stop(self) -> bytes:
        self.proc.send_signal(15)
        await asyncio.wait_for(self.proc.wait(), 30)
        return self.stderr.read_bytes()


async def reply(reader: asyncio.StreamReader, msg_id: Any, timeout: float = 20) -> dict[str, Any]:
    data = b""
    while True:
        chunk = await asyncio.wait_for(reader.read(65536), timeout)
        assert chunk, f"the connection closed before the answer to {msg_id!r}"
        data += chunk
        for f in parse_frames(data)[0]:
            if f.get("id") == msg_id and "method" not in f:
                return f


async def closed(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """Everything the daemon sends until it closes the connection (within `timeout` s); a close with our
    bytes unread is a reset."""
    data = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), timeout):
            data += chunk
    except ConnectionResetError:
        pass
    return data


@pytest.fixture
async def tcp(tmp_path: Path) -> AsyncIterator[Tcp]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data_dir, workspace = tmp_path / "data", tmp_path / "ws"
    workspace.mkdir()
    options = {"provider": "scripted", "scenario": str(write_scenario(tmp_path / "s.json", {"answers": []}))}
    err = (tmp_path / "stderr").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--tcp", str(port), env=daemon_env(data_dir),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    err.close()
    token_file = data_dir / f"tcp-{port}.token"
    try:
        await wait_until(lambda: token_file.exists() and token_file.stat().st_size > 0, "the token file", 60)
        yield Tcp(proc, port, token_file.read_text(), options, workspace, tmp_path / "stderr")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_idle_connections_never_lock_an_editor_out(tcp: Tcp) -> None:
    """Issue 16: 1,100 idle connections exhausted the file descriptors and locked editors out. Now the
    oldest idle ones make room, the rest are closed after AUTH_DEADLINE_S, and an editor gets in at once."""
    idle = [await tcp.connect() for _ in range(300)]
    reader, writer = await tcp.editor()
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/list", "params": {}}))
    assert (await reply(reader, 2))["result"]["sessions"] == []
    results = await asyncio.gather(*(closed(r, transport.AUTH_DEADLINE_S + 20) for r, _ in idle))
    assert results == [b""] * 300  # closed, nothing said: they never initialized
    stderr = (await tcp.stop()).decode()
    assert "Traceback" not in stderr
    assert (
        f"1 connection(s) closed before their initialize: {transport.MAX_PENDING} more were waiting" in stderr
    )


async def test_past_the_connection_limit_a_client_is_told_and_closed(tcp: Tcp) -> None:
    """Issue 16: a clear refusal (a window/showMessage), no traceback; the served editors keep working."""
    editors = [await tcp.editor() for _ in range(transport.MAX_CONNECTIONS)]
    reader, _writer = await tcp.connect()
    said = await closed(reader, 20)
    (message,) = parse_frames(said)[0]
    assert message == {"jsonrpc": "2.0", "method": "window/showMessage",
                       "params": {"type": 1, "message": transport.TOO_MANY.format(n=transport.MAX_CONNECTIONS)}}  # fmt: skip
    r, w = editors[-1]
    w.write(frame({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/list", "params": {}}))
    assert (await reply(r, 2))["result"] == {"sessions": []}
    stderr = (await tcp.stop()).decode()
    assert "Traceback" not in stderr
    assert f"1 connection(s) refused: {transport.MAX_CONNECTIONS} are served already (the limit)" in stderr


async def test_huge_bodies_before_initialize_are_refused_unread(tcp: Tcp) -> None:
    """Issue 16: eight 60 MiB bodies took the daemon to 655 MB. The limit is checked from the header."""
    before = tcp.rss_kib()
    conns = [await tcp.connect() for _ in range(8)]
    for _r, w in conns:
        w.write(b"Content-Length: %d\r\n\r\n" % (60 << 20) + b"{" * (1 << 20))
    for r, _w in conns:
        assert await closed(r, 20) == b""
    assert tcp.rss_kib() - before < 16 * 1024
    await tcp.editor()  # still serving
    stderr = (await tcp.stop()).decode()
    assert (
        stderr.count(f"Content-Length {60 << 20} before initialize (limit {transport.PREAUTH_MAX_BODY})") == 8
    )
    assert "Traceback" not in stderr


async def test_a_client_that_never_reads_is_held_back_while_others_are_served(tcp: Tcp) -> None:
    """Issue 16: a client that never read its answers grew the daemon to 590 MB. Its frames now wait in
    the kernel while its answers are above HIGH_WATER; another editor is served meanwhile; when it reads at
    last, every answer arrives, and the daemon never held more than a few MiB for it."""
    reader, writer = await tcp.editor()
    before = tcp.rss_kib()
    name = "agentd/x" + "y" * 100_000  # each -32601 answer names the method: ~200 KB per answer
    count = 300  # 30 MB of requests, 60 MB of answers
    for i in range(count):
        writer.write(frame({"jsonrpc": "2.0", "id": i + 10, "method": name, "params": {}}))
    with pytest.raises(TimeoutError):  # held back: the daemon stops reading (without the limit: ~2 s)
        await asyncio.wait_for(writer.drain(), 10)
    other_r, other_w = await tcp.editor()
    other_w.write(frame({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/list", "params": {}}))
    assert (await reply(other_r, 2))["result"]["sessions"] == []
    peak, data, answered = 0, b"", 0
    while answered < count:
        chunk = await asyncio.wait_for(reader.read(1 << 20), 30)
        assert chunk, "the daemon closed the connection"
        peak = max(peak, tcp.rss_kib() - before)
        data += chunk
        frames, data = parse_frames(data)
        answered += sum(1 for f in frames if f.get("error", {}).get("code") == -32601)
    assert peak < 48 * 1024, f"the daemon grew {peak} KiB"
    stderr = (await tcp.stop()).decode()
    assert "Traceback" not in stderr
