"""The byte streams of a server mode, for both adapters (PROTOCOL.md §3.2, §3.3, §3.4; issue 16 §1).

Owns:
- `frames_fd()`: the real stdout moved aside for protocol frames; fd 1 and `sys.stdout` then write to stderr,
  so nothing else can ever reach the client's stdout.
- The frame writers (`FrameWriter`): `BufferedWriter` (an asyncio stream: writes never block the event loop
  and keep their order; past `HIGH_WATER` buffered bytes `writable()` waits until the client has read down to
  `LOW_WATER`; a client that reads nothing for `STALL_S`, or lets `OUT_LIMIT` bytes pile up, is dropped:
  `write()` raises `BrokenPipeError`), `FdWriter` (blocking writes to a file descriptor the loop cannot
  watch, such as a regular file), and `stdout_writer(fd)`, which picks one.
- `stdin_reader(limit)`: fd 0 through the event loop when it can watch it, else through a `ThreadReader`
  (/dev/null, a regular file, a closed fd).
- `tty_hint(text)`: a line on stderr for a person who started a server mode in a terminal.
- `envelope_of()`: the top-level `id` and `method` of a message nested too deeply for `json.loads` (issue 9
  H19); `valid_id()` (a string id is at most `MAX_ID_CHARS` long: a longer one is an invalid request,
  answered under id null, so that a client cannot make agentd echo megabytes per request; break16 F1).
Imports only the standard library; never pygls, lsprotocol or acp.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import selectors
import stat
import sys
import threading
from typing import Any, Protocol

log = logging.getLogger("agentd.stdio")

HIGH_WATER = 4 * 1024 * 1024  # bytes waiting for the client: stop reading its frames
LOW_WATER = 1024 * 1024  # ... until it has read down to this
OUT_LIMIT = 32 * 1024 * 1024  # a client this far behind is dropped
STALL_S = 120.0  # a client that reads nothing for this long while behind is dropped
MAX_ID_CHARS = 16 * 1024  # a request id longer than this is not a valid id (never echoed)


class FrameWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def buffered(self) -> int: ...

    async def writable(self) -> bool: ...

    async def flush(self, timeout: float) -> None: ...


class FdWriter:
    """Blocking writes of whole frames to a file descriptor the event loop cannot watch (stdout redirected
    to a regular file): such writes do not wait for a reader."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def buffered(self) -> int:
        return 0

    async def writable(self) -> bool:
        return True

    async def flush(self, timeout: float) -> None:
        return None


class BufferedWriter:
    """Frames to an asyncio stream, never blocking the loop, with the limits of the module docstring.

    `write()` raises `BrokenPipeError` when the connection is closed or the client has fallen `OUT_LIMIT`
    bytes behind (the caller drops it); `writable()` waits while more than `HIGH_WATER` bytes are buffered,
    and answers False when the client read nothing for `STALL_S` (the caller drops it)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        writer.transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)

    def buffered(self) -> int:
        return self.writer.transport.get_write_buffer_size()

    def write(self, data: bytes) -> None:
        if self.writer.is_closing():
            raise BrokenPipeError("connection closed")
        behind = self.buffered() > HIGH_WATER  # one big frame alone never drops a client that keeps up
        self.writer.write(data)
        if behind and self.buffered() > OUT_LIMIT:
            log.warning(
                "a client left %d bytes unread; dropping the connection (agentd buffers at most %d MiB)",
                self.buffered(), OUT_LIMIT >> 20,
            )  # fmt: skip
            self.writer.transport.abort()
            raise BrokenPipeError("the client does not read its messages")

    def close(self) -> None:
        self.writer.close()

    async def writable(self) -> bool:
        if self.buffered() <= HIGH_WATER:
            return True
        size = self.buffered()
        while True:  # progress (any byte read) restarts the stall clock
            try:
                await asyncio.wait_for(self.writer.drain(), STALL_S)
                return True
            except TimeoutError:
                if self.buffered() >= size:
                    log.warning("a client read nothing for %.0f s; dropping the connection", STALL_S)
                    self.writer.transport.abort()
                    return False
                size = self.buffered()
            except (ConnectionError, RuntimeError):
                return False

    async def flush(self, timeout: float) -> None:
        """Send what is buffered (at most `timeout` seconds), then close."""
        self.writer.close()
        with contextlib.suppress(TimeoutError, OSError, ConnectionError):
            await asyncio.wait_for(self.writer.wait_closed(), timeout)


class ThreadReader:
    """A stdin reader for inputs the event loop cannot watch (/dev/null, regular files, a closed fd): a daemon
    thread reads the fd with `os.read` (never the buffered `sys.stdin`, whose lock a blocked daemon thread would
    hold at interpreter exit) and feeds the reader; end of input or a read error is fed as end of input."""

    def __init__(self, fd: int, limit: int) -> None:
        self._reader = asyncio.StreamReader(limit=limit)
        loop = asyncio.get_running_loop()

        def pump() -> None:
            try:
                while True:
                    try:
                        chunk = os.read(fd, 65536)
                    except InterruptedError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        loop.call_soon_threadsafe(self._reader.feed_eof)
                        return
                    loop.call_soon_threadsafe(self._reader.feed_data, chunk)
            except RuntimeError:  # the loop is closed: the server has ended
                return

        threading.Thread(target=pump, name="agentd-stdin", daemon=True).start()

    @property
    def reader(self) -> asyncio.StreamReader:
        return self._reader


def tty_hint(text: str) -> None:
    """Started by hand in a terminal (stdin is a tty): say `text` on stderr, since the mode waits silently for
    protocol frames. Never on stdout, which carries frames only (§3.4)."""
    try:
        interactive = sys.stdin is not None and os.isatty(sys.stdin.fileno())
    except (OSError, ValueError):
        interactive = False
    if interactive:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(text)
            sys.stderr.flush()


def frames_fd() -> int:
    """Move the real stdout aside for frames; fd 1 and sys.stdout then write to stderr (§3.4)."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return fd


def pollable(fd: int, events: int = selectors.EVENT_READ) -> bool:
    """True if the event loop can watch `fd` (a pipe, a socket, a terminal). False for what epoll refuses
    (/dev/null and other character devices: EPERM; regular files) and for a closed fd; those are read by a
    thread instead. Probed with a throwaway selector of the loop's kind, because `connect_read_pipe` accepts
    any character device and only fails later, inside the loop, where the error cannot be caught."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    probe = selectors.DefaultSelector()
    try:
        probe.register(fd, events)
    except (OSError, ValueError):
        return False
    finally:
        probe.close()
    return True


async def stdin_reader(limit: int) -> asyncio.StreamReader:
    """A reader of fd 0 (buffer limit `limit` bytes): through the event loop when it can watch it, else
    through a `ThreadReader`."""
    stdin = sys.stdin
    reader = asyncio.StreamReader(limit=limit)
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # started with fd 0 closed (`agentd <&-`): no input at all
        reader.feed_eof()
        return reader
    if not pollable(fd):
        return ThreadReader(fd, limit).reader
    loop = asyncio.get_running_loop()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin.buffer)
        return reader
    except (ValueError, OSError):
        return ThreadReader(fd, limit).reader


class _PipeProtocol(asyncio.streams.FlowControlMixin):
    """Flow control for the stdout pipe, with the close waiter `StreamWriter.wait_closed()` needs."""

    def __init__(self) -> None:
        super().__init__()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


async def stdout_writer(fd: int) -> FrameWriter:
    """A non-blocking writer of the frames fd when the loop can watch it (a pipe, a socket), else `FdWriter`."""
    if not pollable(fd, selectors.EVENT_WRITE):
        return FdWriter(fd)
    loop = asyncio.get_running_loop()
    try:
        pipe = os.fdopen(fd, "wb", buffering=0, closefd=True)
        transport, protocol = await loop.connect_write_pipe(_PipeProtocol, pipe)
    except (OSError, ValueError):
        return FdWriter(fd)
    return BufferedWriter(asyncio.StreamWriter(transport, protocol, None, loop))


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def envelope_of(text: str) -> dict[str, Any]:
    """The top-level `id` and `method` of a JSON object too deep for `json.loads`, found without recursion:
    a scan of strings and brackets, decoding only the two members' (flat) values. `{}` if there are none."""
    out: dict[str, Any] = {}
    depth, key = 0, None
    decoder = json.JSONDecoder()
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
        elif tok in "]}":
            depth -= 1
        elif depth == 1 and tok == ":" and isinstance(key, str) and key in ("id", "method"):
            start = len(text) - len(text[m.end() :].lstrip())
            if text[start : start + 1] not in ("[", "{"):
                with contextlib.suppress(ValueError):
                    out[key] = decoder.raw_decode(text, start)[0]
        key = None
        if depth == 1 and tok.startswith('"'):
            with contextlib.suppress(ValueError):
                key = json.loads(tok)
        if len(out) == 2:
            break
    return out


def valid_id(value: Any) -> bool:
    """A JSON-RPC request id: a string of at most `MAX_ID_CHARS` characters or an integer (not a boolean)."""
    if isinstance(value, str):
        return len(value) <= MAX_ID_CHARS
    return isinstance(value, int) and not isinstance(value, bool)
