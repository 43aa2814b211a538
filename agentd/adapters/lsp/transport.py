"""LSP framing and the three server modes (PROTOCOL.md §3.1, §3.2, §3.4, §4.4).

Owns: `read_frames()` (the `Content-Length` reader, done here rather than by pygls: a length above 64 MiB or
a missing one ends the connection without reading the body; a body that is not JSON gets `-32700`; a
request nested too deeply to decode or handle gets `-32602` under its id, found by a flat scan, and any
other message nested too deeply is logged and dropped) and `serve()`: stdio (default), a Unix socket
(mode 0600) or TCP on 127.0.0.1 with a token file, each connection with its own LanguageServer over the
shared `Daemon`. On stdio, fd 1 is moved aside for frames and pointed at stderr, so nothing else can ever
reach the client's stdout.

Limits under load (issue 16), so that one client cannot stall or exhaust a daemon others use:
- Writes never block the event loop (the frame writers of `agentd.adapters.stdio`, which the ACP adapter
  shares): frames go to the connection's transport buffer. Past `HIGH_WATER`
  buffered bytes, the connection's next frame is not read until the client has read its answers down to
  `LOW_WATER` (backpressure); a client that reads nothing for `STALL_S`, or lets `OUT_LIMIT` bytes pile up,
  is dropped (its sessions are cancelled and unlocked as on a disconnect).
- On a socket, a body is limited to `PREAUTH_MAX_BODY` until `initialize` has succeeded (checked from the
  header, before reading), a client that leaves more than `PREAUTH_OUT_LIMIT` bytes of answers unread by
  then is dropped, and a connection that has not initialized within `AUTH_DEADLINE_S` is dropped. A drop
  (the deadline, an eviction, a client that does not read) aborts the socket: a plain close would wait,
  without limit, for the client to read what is buffered (break16 F1). A connection that ended otherwise
  gets `CLOSE_GRACE_S` to read what is left, then is aborted.
- A reset or broken pipe is a disconnect (one log line, never a traceback), and frames already read from a
  connection that is ending are not handled (break16 F2, F3).
  At most `MAX_CONNECTIONS` initialized connections are served at once: the next one gets a
  `window/showMessage` saying so, and is closed. At most `MAX_PENDING` connections wait for their
  `initialize`; a new one closes the oldest waiting one, so idle connections never lock an editor out.
  Running out of file descriptors is one warning line, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd import loopwatch
from agentd.adapters.lsp.errors import too_deep
from agentd.adapters.lsp.front import Link
from agentd.adapters.stdio import (  # noqa: F401 (re-exported for the tests)
    HIGH_WATER,
    BufferedWriter,
    FdWriter,
    FrameWriter,
    envelope_of,
    frames_fd,
    stdin_reader,
    stdout_writer,
    tty_hint,
)
from agentd.errors import ConfigError
from agentd.protocol import errors as perr

if TYPE_CHECKING:
    from agentd.adapters.lsp.host import Daemon

log = logging.getLogger("agentd.lsp.transport")

MAX_BODY = 64 * 1024 * 1024
HEADER_LIMIT = 64 * 1024
PREAUTH_MAX_BODY = 1024 * 1024  # socket connections before a successful initialize
AUTH_DEADLINE_S = 10.0  # a socket connection must have initialized by then
MAX_CONNECTIONS = 64  # initialized socket connections served at once
MAX_PENDING = 64  # socket connections waiting for their initialize
PREAUTH_OUT_LIMIT = 64 * 1024  # unread answer bytes a socket client may leave before its initialize
CLOSE_GRACE_S = 5.0  # a closed socket connection's unsent answers are dropped after this
EOF, FATAL = "eof", "fatal"


async def read_frames(
    reader: asyncio.StreamReader, link: Link, writer: FrameWriter | None = None,
    *, preauth_limit: int | None = None,
) -> str:  # fmt: skip
    """Read frames until end of input (`EOF`) or a framing error (`FATAL`), dispatching each body. With
    `writer`, the next frame waits while the client has not read its answers (module docstring); with
    `preauth_limit`, bodies are limited to that many bytes until `initialize` has succeeded."""
    conn = link.conn
    while not conn.closing:
        await link.ready()
        if writer is not None and not await writer.writable():
            return FATAL
        if preauth_limit is not None and writer is not None and _unread_before_auth(conn, writer):
            return FATAL
        headers: dict[str, str] = {}
        header_bytes = 0
        while True:
            try:
                line = await reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                log.error("a header line is longer than %d bytes; ending the connection", HEADER_LIMIT)
                return FATAL
            except (ConnectionError, OSError) as exc:  # a reset: a disconnect, not an error (break16 F2)
                return _disconnected(conn, exc)
            if not line:
                return EOF
            if line in (b"\r\n", b"\n"):
                break
            header_bytes += len(line)
            if header_bytes > HEADER_LIMIT:  # endless header lines: a framing error, not unbounded memory
                log.error("the header block is longer than %d bytes; ending the connection", HEADER_LIMIT)
                return FATAL
            name, _, value = line.decode("ascii", "replace").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length", "")
        if not length.isdigit():
            log.error("a message without a valid Content-Length (%r); ending the connection", length)
            return FATAL
        size = int(length)
        if size > MAX_BODY:
            log.error("Content-Length %d is above the 64 MiB limit; ending the connection", size)
            return FATAL
        if preauth_limit is not None and size > preauth_limit and not conn.authenticated:
            log.warning(
                "Content-Length %d before initialize (limit %d); ending the connection", size, preauth_limit
            )
            return FATAL
        try:
            body = await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            log.error("end of input inside a message body (%d bytes announced)", size)
            return EOF
        except (ConnectionError, OSError) as exc:
            return _disconnected(conn, exc)
        if conn.closing:  # frames read before the connection ended are not handled (break16 F3)
            break
        _receive(link, body)
    return EOF


def _disconnected(conn: Any, exc: BaseException) -> str:
    """The client went away abruptly (a reset, a broken pipe): one log line, then the end of input."""
    if not conn.closing:
        log.info("the client disconnected (%s)", exc)
    return EOF


def _unread_before_auth(conn: Any, writer: FrameWriter) -> bool:
    """A client that has not initialized and leaves more than `PREAUTH_OUT_LIMIT` bytes of answers unread
    is dropped (break16 F1): before the token is checked, agentd holds almost nothing for a client."""
    if conn.authenticated or writer.buffered() <= PREAUTH_OUT_LIMIT:
        return False
    log.warning("a client left %d bytes unread before its initialize (limit %d); ending the connection",
                writer.buffered(), PREAUTH_OUT_LIMIT)  # fmt: skip
    return True


def _receive(link: Link, body: bytes) -> None:
    try:
        text = body.decode("utf-8")
        data = json.loads(text)
    except RecursionError:
        _too_deep(link, envelope_of(text))
        return
    except ValueError:
        link.send_error(None, "ParseError", perr.PARSE_ERROR)
        return
    try:
        link.receive(data)
    except RecursionError:
        _too_deep(link, data if isinstance(data, dict) else {})
    except Exception:
        log.exception("failed to dispatch a message")


def _too_deep(link: Link, envelope: dict[str, Any]) -> None:
    """A request nested too deeply still gets its answer, -32602 (H19); anything else is logged, dropped."""
    msg_id, method = envelope.get("id"), envelope.get("method")
    is_id = (isinstance(msg_id, int) and not isinstance(msg_id, bool)) or isinstance(msg_id, str)
    if not (is_id and isinstance(method, str)):
        log.warning("dropped a message nested too deeply to decode or handle")
        return
    log.warning("%s (id %r): params nested too deeply; answered -32602", method, msg_id)
    link.send_error(msg_id, "InvalidParams", too_deep(method).args[0],
                        errors=[{"loc": "params", "msg": "nested too deeply"}])  # fmt: skip


def _route_pygls_logs() -> None:
    """pygls logs what agentd already answers (bad params, unknown notifications) with tracebacks: its
    records go where agentd's go, and only in a debug log (`-vv`, `--log-file`)."""
    mine = logging.getLogger("agentd")
    theirs = logging.getLogger("pygls")
    theirs.handlers[:] = mine.handlers
    theirs.propagate = False
    theirs.setLevel(logging.DEBUG if mine.getEffectiveLevel() <= logging.DEBUG else logging.CRITICAL)


# ---- stdio ---------------------------------------------------------------------------------------


TTY_HINT = (
    "agentd: serving LSP on stdin/stdout for an editor; for the terminal use "
    '"agentd run --prompt TEXT" or "agentd demo" (Ctrl-C to quit)\n'
)


async def _serve_stdio(daemon: Daemon, fd: int) -> int:
    loopwatch.watch()
    writer = await stdout_writer(fd)
    link = Link(daemon, writer)
    conn = link.conn
    closed = asyncio.Event()
    conn.on_close = lambda _code: closed.set()
    loop = asyncio.get_running_loop()
    for num in (signal.SIGTERM, signal.SIGHUP):  # SIGHUP (the terminal closed) as SIGTERM
        loop.add_signal_handler(num, lambda: asyncio.ensure_future(conn.close(1)))
    reader = await stdin_reader(HEADER_LIMIT)
    reading = asyncio.ensure_future(read_frames(reader, link, writer))
    waiting = asyncio.ensure_future(closed.wait())
    await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if reading.done():  # end of input: shutdown + exit (0); a framing error ends the process (1)
        await conn.close(0 if reading.result() == EOF else 1)
    reading.cancel()
    waiting.cancel()
    await writer.flush(5.0)
    return conn.exit_code if conn.exit_code is not None else 1


# ---- sockets -------------------------------------------------------------------------------------


async def _serve_sockets(
    daemon: Daemon, *, socket_path: str | None, port: int | None, idle_s: float | None, written: list[Path]
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loopwatch.watch(loop)
    for num in (signal.SIGTERM, signal.SIGHUP):  # SIGHUP (the terminal closed) as SIGTERM
        loop.add_signal_handler(num, stop.set)
    loop.set_exception_handler(_quiet_resource_errors)
    _raise_fd_limit()
    idle: list[asyncio.TimerHandle] = []

    def arm_idle() -> None:
        if idle_s is not None and not daemon.connections:
            idle.append(loop.call_later(idle_s, stop.set))

    daemon.on_idle = arm_idle
    gate = _Admission()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for timer in idle:
            timer.cancel()
        idle.clear()
        if not gate.room():
            await gate.refuse(writer)
            return
        out = BufferedWriter(writer)
        link = Link(daemon, out)
        conn = link.conn
        conn.on_close = lambda _code: _end(writer)
        gate.add(conn, lambda: _drop(conn, writer))
        deadline = loop.call_later(AUTH_DEADLINE_S, _unauthenticated, conn, writer)
        try:
            outcome = await read_frames(reader, link, out, preauth_limit=PREAUTH_MAX_BODY)
            if outcome == FATAL and not conn.authenticated:
                _drop(conn, writer)
            await conn.close(0 if outcome == EOF else 1)
        except asyncio.CancelledError:  # the daemon stops (Python 3.11's stream callback would log a
            pass  # traceback for a cancelled connection task)
        except (ConnectionError, OSError) as exc:  # a disconnect while closing: no traceback (break16 F2)
            log.info("the client disconnected (%s)", exc)
        finally:
            deadline.cancel()
            gate.discard(conn)
            _end(writer)

    if socket_path is not None:
        _refuse_live_socket(socket_path)
        old = os.umask(0o177)
        try:
            srv = await asyncio.start_unix_server(handle, path=socket_path, limit=HEADER_LIMIT)
        except OSError as exc:
            raise ConfigError(f"--socket {socket_path}: cannot listen there ({exc.strerror})") from None
        finally:
            os.umask(old)
        os.chmod(socket_path, 0o600)
        log.info("listening on %s", socket_path)
    else:
        try:
            srv = await asyncio.start_server(handle, "127.0.0.1", port, limit=HEADER_LIMIT)
        except OSError as exc:
            raise ConfigError(
                f"--tcp {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror}); is another agentd using "
                "it? Stop it or choose another port"
            ) from None
        assert port is not None
        written.append(_write_token(daemon, port))  # only once the port is ours: never clobber a live one
        log.info("listening on 127.0.0.1:%s", port)
    arm_idle()
    async with srv:
        await stop.wait()
    for conn in list(daemon.connections):
        await conn.close(0)
    if socket_path is not None:
        with contextlib.suppress(OSError):
            os.unlink(socket_path)
    return 0


TOO_MANY = (
    "agentd: this daemon already serves {n} editor connections, its limit; the connection is closed. Close "
    "an editor window connected to it, or start another agentd for this editor."
)


class _Admission:
    """Which socket connections are served (module docstring). A connection past `MAX_CONNECTIONS` gets a
    `window/showMessage` (allowed before initialize) and is closed. The log gets one line per burst of
    refusals or evictions, not one per connection."""

    def __init__(self) -> None:
        self.pending: dict[Any, Callable[[], None]] = {}  # waiting for initialize, oldest first: its drop
        self.served: set[Any] = set()
        self.counts = {"refused": 0, "evicted": 0}
        self.logged_at = {"refused": -1e9, "evicted": -1e9}

    def room(self) -> bool:
        """True when a new connection may wait for its initialize (evicting the oldest waiting one if
        `MAX_PENDING` wait already); False when `MAX_CONNECTIONS` are served."""
        for conn in [c for c in self.pending if c.authenticated]:
            del self.pending[conn]
            self.served.add(conn)
        if len(self.served) >= MAX_CONNECTIONS:
            return False
        if len(self.pending) >= MAX_PENDING:
            oldest = next(iter(self.pending))
            drop = self.pending.pop(oldest)
            self._note("evicted", "%d connection(s) closed before their initialize: %d more were waiting (the limit)",
                       MAX_PENDING)  # fmt: skip
            drop()
        return True

    def add(self, conn: Any, drop: Callable[[], None]) -> None:
        self.pending[conn] = drop

    def discard(self, conn: Any) -> None:
        self.pending.pop(conn, None)
        self.served.discard(conn)

    def _note(self, what: str, text: str, limit: int) -> None:
        self.counts[what] += 1
        now = asyncio.get_running_loop().time()
        if now - self.logged_at[what] >= 10.0:
            log.warning(text, self.counts[what], limit)
            self.logged_at[what], self.counts[what] = now, 0

    async def refuse(self, writer: asyncio.StreamWriter) -> None:
        self._note("refused", "%d connection(s) refused: %d are served already (the limit)", MAX_CONNECTIONS)
        params = {"type": 1, "message": TOO_MANY.format(n=MAX_CONNECTIONS)}
        body = json.dumps({"jsonrpc": "2.0", "method": "window/showMessage", "params": params}).encode()
        with contextlib.suppress(OSError, ConnectionError, TimeoutError):
            writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            writer.close()
            await asyncio.wait_for(writer.wait_closed(), 2.0)
        writer.transport.abort()  # a refused client that does not read keeps nothing open


def _unauthenticated(conn: Any, writer: asyncio.StreamWriter) -> None:
    """A socket connection that has not initialized within `AUTH_DEADLINE_S` is dropped."""
    if not conn.authenticated and conn.state != "closed":
        log.info("a connection sent no successful initialize within %.0f s; closing it", AUTH_DEADLINE_S)
        _drop(conn, writer)


def _drop(conn: Any, writer: asyncio.StreamWriter) -> None:
    """Drop a socket connection now (the deadline, an eviction, a client that reads nothing before its
    initialize): its socket is aborted, what is buffered for it discarded, whether or not it reads (break16
    F1: a plain close waits for the client to read without limit)."""
    writer.transport.abort()
    conn.lost()


def _end(writer: asyncio.StreamWriter) -> None:
    """Close a socket connection once it ended: what is buffered is sent for at most `CLOSE_GRACE_S`
    seconds, then the socket is aborted (a client that never reads cannot keep it open)."""
    if writer.transport.is_closing():
        return
    writer.close()
    asyncio.get_running_loop().call_later(CLOSE_GRACE_S, writer.transport.abort)


def _quiet_resource_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio logs running out of file descriptors in `accept()` with a traceback, once a second: here it is
    one warning line (the accept loop retries by itself). Everything else goes to the default handler."""
    exc = context.get("exception")
    if isinstance(exc, OSError) and "out of system resource" in str(context.get("message", "")):
        log.warning("cannot accept a connection: %s; retrying", exc.strerror or exc)
        return
    loop.default_exception_handler(context)


def _raise_fd_limit() -> None:
    """Raise the soft limit of open files to the hard limit (a daemon holds a socket per connection)."""
    import resource

    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = 1 << 16 if hard == resource.RLIM_INFINITY else hard
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _refuse_live_socket(path: str) -> None:
    """A socket file another live agentd serves is never replaced (asyncio would unlink it silently)."""
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except OSError:
        return  # stale: nobody listens, asyncio replaces it
    finally:
        probe.close()
    raise ConfigError(
        f"--socket {path}: another agentd is serving this socket; connect to it, stop it, or choose another path"
    )


def _write_token(daemon: Daemon, port: int) -> Path:
    from agentd.persistence.paths import ensure_dir, open_private, write_all

    ensure_dir(daemon.data_dir.root)
    path = daemon.data_dir.root / f"tcp-{port}.token"
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    token = daemon.tcp_token or secrets.token_urlsafe(32)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        write_all(fd, token.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    daemon.tcp_token = token
    return path


def serve(daemon: Daemon, *, socket_path: str | None = None, port: int | None = None,
          idle_s: float | None = None) -> int:  # fmt: skip
    """Run the LSP adapter until the client exits (stdio) or SIGTERM / idle (sockets); the exit code."""
    _route_pygls_logs()
    if socket_path is None and port is None:
        tty_hint(TTY_HINT)
        fd = frames_fd()
        return asyncio.run(_serve_stdio(daemon, fd))
    if port is not None:  # the token is checked from the first connection on; its file is written after bind
        daemon.tcp_token = secrets.token_urlsafe(32)
    written: list[Path] = []
    try:
        return asyncio.run(
            _serve_sockets(daemon, socket_path=socket_path, port=port, idle_s=idle_s, written=written)
        )
    finally:
        for token_path in written:
            with contextlib.suppress(OSError):
                token_path.unlink()
