"""The LSP transport under a client that does not read (issue 16 §1): backpressure, then a drop.

In-process over a real socket pair: `read_frames` with a `BufferedWriter` stops reading a client's frames
while more than `HIGH_WATER` bytes of answers wait for it, resumes once it reads, and a client left
`OUT_LIMIT` bytes behind, or reading nothing for `STALL_S`, is dropped. The daemon-level checks (idle
connections, the connection limit, bodies before initialize) are in tests/reliability/test_load_limits.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentd.adapters import stdio  # the frame writers and their limits
from agentd.adapters.lsp.transport import HIGH_WATER, BufferedWriter, read_frames
from tests.lsp.harness import wait_until

ANSWER = 100_000  # bytes per answer


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


@dataclass
class Conn:
    state: str = "initialized"
    authenticated: bool = True
    closing: bool = False


@dataclass
class Answering:
    """A `Link` double: each request is answered with `ANSWER` bytes on the writer."""

    writer: BufferedWriter
    conn: Conn = field(default_factory=Conn)
    handled: list[int] = field(default_factory=list)

    async def ready(self) -> None:
        return None

    def receive(self, data: dict[str, Any]) -> None:
        self.handled.append(data["id"])
        self.writer.write(b"x" * ANSWER)

    def send_error(self, *args: Any, **kw: Any) -> None:
        raise AssertionError("no error expected")


@pytest.fixture
async def pair() -> AsyncIterator[tuple[asyncio.StreamReader, BufferedWriter, socket.socket]]:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    reader, writer = await asyncio.open_connection(sock=ours)
    out = BufferedWriter(writer)
    yield reader, out, theirs
    writer.transport.abort()
    theirs.close()


async def read_some(sock: socket.socket) -> int:
    """Bytes the client reads once data is there (waits for it, 10 s at most)."""
    chunk = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 1 << 20), 10)
    assert chunk, "the connection closed"
    return len(chunk)


async def test_a_client_that_does_not_read_is_not_read_from(pair: Any) -> None:
    """Issue 16: answers to a client that does not read stay bounded; its frames wait in the kernel."""
    reader, out, theirs = pair
    proto = Answering(out)
    task = asyncio.ensure_future(read_frames(reader, proto, out))  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(
        theirs, b"".join(frame({"jsonrpc": "2.0", "id": i, "method": "m"}) for i in range(200))
    )
    await wait_until(lambda: out.buffered() > HIGH_WATER, "answers to pile up")
    settled = len(proto.handled)
    for _ in range(50):  # the reader waits: no more frames are handled while the client is behind
        await asyncio.sleep(0)
    assert len(proto.handled) == settled < 200
    assert out.buffered() <= HIGH_WATER + ANSWER
    got = 0
    while got < 200 * ANSWER:  # the client reads everything: every frame is handled and answered
        got += await read_some(theirs)
    task.cancel()
    assert (proto.handled, got, out.buffered()) == (list(range(200)), 200 * ANSWER, 0)


async def test_a_client_far_behind_is_dropped(pair: Any) -> None:
    """Issue 16: past OUT_LIMIT unread bytes (while already behind) the connection is aborted."""
    _reader, out, _theirs = pair
    with pytest.raises(BrokenPipeError):
        for _ in range(stdio.OUT_LIMIT // ANSWER + 100):
            out.write(b"y" * ANSWER)
    assert out.writer.is_closing()


async def test_one_big_frame_never_drops_a_client_that_keeps_up(pair: Any) -> None:
    _reader, out, theirs = pair
    out.write(b"z" * (stdio.OUT_LIMIT + 1))  # the buffer was empty: not behind
    got = 0
    while got < stdio.OUT_LIMIT + 1:
        got += await read_some(theirs)
    assert not out.writer.is_closing()


async def test_a_client_that_reads_nothing_for_stall_s_is_dropped(pair: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(stdio, "STALL_S", 0.2)
    _reader, out, _theirs = pair
    while out.buffered() <= HIGH_WATER:
        out.write(b"w" * ANSWER)
    assert await out.writable() is False
    assert out.writer.is_closing()


@dataclass
class Closing(Answering):
    """A `Link` double whose connection ends while the first frame is handled (a failed write, say)."""

    def receive(self, data: dict[str, Any]) -> None:
        super().receive(data)
        self.conn.closing = True


async def test_frames_read_after_the_connection_ended_are_not_handled(pair: Any) -> None:
    """break16 F3: a burst of frames already read was dispatched after the connection closed, each failed
    answer logging a line. Reading stops once the connection ends."""
    reader, out, theirs = pair
    proto = Closing(out)
    await asyncio.get_running_loop().sock_sendall(
        theirs, b"".join(frame({"jsonrpc": "2.0", "id": i, "method": "m"}) for i in range(50))
    )
    assert await asyncio.wait_for(read_frames(reader, proto, out), 10) == "eof"  # type: ignore[arg-type]
    assert proto.handled == [0]


async def test_a_reset_is_the_end_of_input_not_an_exception() -> None:
    """break16 F2: a reset while reading (ConnectionResetError, BrokenPipeError) ended the connection task
    with a traceback ("Unhandled exception in client_connected_cb"). It is the end of input."""
    for exc in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
        reader = asyncio.StreamReader()
        reader.feed_data(b"Content-Length: 10\r\n")
        reader.set_exception(exc)
        proto = Answering(None)  # type: ignore[arg-type]
        assert await read_frames(reader, proto) == "eof"  # type: ignore[arg-type]
        assert proto.handled == []


def test_a_huge_string_id_is_not_an_id() -> None:
    """break16 F1: requests with 500 KB ids were answered echoing them. A longer id than MAX_ID_CHARS is not
    a valid id (both adapters: answered -32600 under id null)."""
    assert stdio.valid_id("A" * stdio.MAX_ID_CHARS) and stdio.valid_id(2**40)
    assert not stdio.valid_id("A" * (stdio.MAX_ID_CHARS + 1))
