"""The emulator's HTTP server and its public handle, `Emulator` (TESTING.md §3.1, §3.3, §3.7).

Owns the threaded HTTP/1.1 server bound to 127.0.0.1 on an ephemeral port, the execution of a `Plan`
(JSON bodies, chunked SSE, drops, error events, gates), the journal timestamps and the `/_emu/` control
endpoints used by standalone runs. Imports only the standard library and sibling emulator modules: no
agentd module, and no agentd module outside `agentd/testing/` may import this package.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from . import anthropic as anthropic_api
from . import openai as openai_api
from .clock import Clock, ManualClock
from .common import Core, Gate, Plan, Request, dumps

__all__ = ["Emulator"]

_HOLD_POLL_S = 0.02  # how often a held stream checks for a client disconnect or shutdown


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, emulator: Emulator, port: int) -> None:
        self.emulator = emulator
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests own stderr
        return

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _dispatch(self) -> None:
        emu = self.server.emulator
        received_at = time.monotonic()
        raw = self._read_body()
        path = urlsplit(self.path).path
        if path.startswith("/_emu/"):
            status, data = emu._control(self.command, path, raw)
            self._send_plan(Plan(status, {"content-type": "application/json"}, body=dumps(data)), None)
            return
        core = emu._core
        req = Request(core.next_seq(), self.command, path, self.headers, raw, received_at, core.clock.now())
        module = anthropic_api if core.api == "anthropic" else openai_api
        try:
            plan, entry = module.handle(core, req)
        except Exception as exc:  # a bug of the emulator: answer 500 and fail the test at check()
            core.problem(f"request #{req.seq}: emulator error {exc!r}")
            plan, entry = (
                Plan(500, {"content-type": "application/json"}, body=dumps({"error": repr(exc)})),
                None,
            )
        plan.headers["request-id"] = f"req_emu_{req.seq}"
        if core.api == "openai":
            plan.headers["x-request-id"] = f"req_emu_{req.seq}"
        self._send_plan(plan, entry)

    # --- sending ---

    def _headers(self, plan: Plan, chunked: bool) -> None:
        self.send_response_only(plan.status)
        for k, v in plan.headers.items():
            self.send_header(k, v)
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(len(plan.body or b"")))
        if plan.drop or plan.close:
            self.send_header("connection", "close")
        self.end_headers()

    def _send_plan(self, plan: Plan, entry: dict[str, Any] | None) -> None:
        core = self.server.emulator._core

        def note(**fields: Any) -> None:  # the journal is complete before the client can see the end
            if entry is not None:
                core.update_entry(entry, **fields)

        try:
            self._write(plan, note)
        except OSError:  # BrokenPipeError, ConnectionResetError: the client went away
            note(outcome="disconnected")
            self.close_connection = True
        if plan.drop or plan.close:
            self.close_connection = True

    def _write(self, plan: Plan, note: Callable[..., None]) -> None:
        if plan.gate is not None and plan.events is None and not self._hold(plan.gate):
            note(outcome="disconnected")
            return
        if plan.reset:  # not one byte: an RST (SO_LINGER 0) instead of an answer
            note(outcome="reset")
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if plan.on_headers is not None:  # cache writes become visible as the response begins
            plan.on_headers()
        if plan.events is None:
            now = time.monotonic()
            note(first_byte_at=now, last_byte_at=now, outcome="complete")
            self._headers(plan, chunked=False)
            self.wfile.write(plan.body or b"")
            return
        note(first_byte_at=time.monotonic())
        self._headers(plan, chunked=True)
        pieces = [b"%x\r\n%s\r\n" % (len(f), f) for f in plan.events]
        if plan.endless is not None:
            for piece in pieces:
                self.wfile.write(piece)
            self._endless(plan.endless, note)
            return
        if not plan.drop:  # §3.3 drop_after_events: no final chunk, no message_stop
            pieces.append(b"0\r\n\r\n")
        outcome = "dropped" if plan.drop else "stream_error" if plan.close else "complete"
        for k, piece in enumerate(pieces):
            if plan.gate is not None and k == plan.hold_after and not self._hold(plan.gate):
                note(outcome="disconnected")
                return
            if k == len(pieces) - 1:
                note(last_byte_at=time.monotonic(), outcome=outcome)
            self.wfile.write(piece)
            if k < len(pieces) - 1:
                note(last_byte_at=time.monotonic())
        if plan.drop:
            note(outcome=outcome, **({} if pieces else {"last_byte_at": time.monotonic()}))
            self.connection.shutdown(socket.SHUT_RDWR)

    def _endless(self, frame: bytes, note: Callable[..., None]) -> None:
        """Keep-alive frames every `_HOLD_POLL_S` until the client goes away (or the emulator stops)."""
        piece = b"%x\r\n%s\r\n" % (len(frame), frame)
        core = self.server.emulator._core
        note(outcome="endless")
        while not core.stopping.wait(_HOLD_POLL_S):
            if self._client_gone():
                break
            self.wfile.write(piece)
            note(last_byte_at=time.monotonic())
        note(outcome="disconnected")
        self.close_connection = True

    def _hold(self, name: str) -> bool:
        """Mark gate `name` reached and wait until it opens; False if the client went away first."""
        core = self.server.emulator._core
        gate = core.gate(name)
        gate.reached.set()
        while not gate.opened.wait(_HOLD_POLL_S):
            if core.stopping.is_set() or self._client_gone():
                return False
        return True

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class Emulator:
    """An emulated model API on 127.0.0.1 answering from a scenario script (TESTING.md §3).

    `api`: "anthropic" (Messages API) or "openai" (chat completions). `scenario`: a dict, an answers list,
    a JSON file path or None. `clock`: the clock of cache TTLs (default `ManualClock(0)`). `flavour`:
    the OpenAI usage flavour, else the scenario's, else "openai". `strict`: the first-message and
    alternation rules (§3.5). `chunk`: SSE text chunk size in characters. `port`: 0 for an ephemeral one.
    """

    def __init__(
        self,
        api: str = "anthropic",
        scenario: Any = None,
        clock: Clock | None = None,
        flavour: str | None = None,
        *,
        strict: bool = True,
        chunk: int = 16,
        port: int = 0,
    ) -> None:
        if api not in ("anthropic", "openai"):
            raise ValueError(f"Emulator: api must be 'anthropic' or 'openai', got {api!r}")
        if flavour is not None and flavour not in openai_api.FLAVOURS:
            raise ValueError(f"Emulator: unknown flavour {flavour!r}; one of {sorted(openai_api.FLAVOURS)}")
        self.api = api
        self.clock: Clock = clock if clock is not None else ManualClock()
        self._core = Core(api, scenario, self.clock, flavour=flavour, strict=strict, chunk=chunk)
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---

    def start(self) -> str:
        """Bind and serve in a daemon thread; return the base URL `http://127.0.0.1:<port>`."""
        if self._server is None:
            self._server = _Server(self, self._port)
            self._thread = threading.Thread(
                target=self._server.serve_forever, args=(0.05,), name="emulator", daemon=True
            )
            self._thread.start()
        return self.url

    @property
    def url(self) -> str:
        """The base URL (for the openai SDK, add `/v1`). Raises RuntimeError before `start()`."""
        if self._server is None:
            raise RuntimeError("Emulator.url: call start() first")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Release held streams, stop serving and close every connection. Idempotent."""
        self._core.stopping.set()
        self._core.open_all_gates()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with server.connections_lock:
            conns = list(server.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- scripting ---

    def script(self, scenario: Any, *, allow_unused: bool | None = None) -> None:
        """Replace the scenario (dict, answers list or JSON path); the journal and cache are kept."""
        self._core.set_scenario(scenario)
        if allow_unused is not None:
            self._core.allow_unused = allow_unused

    @property
    def allow_unused(self) -> bool:
        return self._core.allow_unused

    @allow_unused.setter
    def allow_unused(self, value: bool) -> None:
        self._core.allow_unused = value

    def expect_errors(self, n: int) -> None:
        """Declare that exactly `n` requests will fail validation (400) in this test."""
        self._core.expected_errors = n

    def reset(self) -> None:
        """Forget journal, problems, gates, cache, request numbers and expectations; rewind the scenario."""
        self._core.reset(keep_scenario=True)

    # --- observing ---

    @property
    def journal(self) -> list[dict[str, Any]]:
        """A deep copy of the journal: one dict per model request, in arrival order."""
        return self._core.journal_copy()

    @property
    def problems(self) -> list[str]:
        """What `check()` would report now."""
        return self._core.check_problems()

    def gate(self, name: str) -> Gate:
        """The gate `name` (created on first use); `.open()` releases streams held there."""
        return self._core.gate(name)

    def wait_reached(self, name: str, timeout: float = 5.0) -> bool:
        """Block up to `timeout` seconds until a stream is held at gate `name`; True if it is."""
        return self._core.gate(name).wait_reached(timeout)

    async def wait_reached_async(self, name: str, timeout: float = 5.0) -> bool:
        """`wait_reached` without blocking the event loop (for async tests)."""
        return await asyncio.to_thread(self.wait_reached, name, timeout)

    def check(self, *, allow_unused: bool | None = None) -> None:
        """Raise AssertionError listing every problem: validation failures beyond `expect_errors`,
        requests after the script ran out, unused answers (unless allowed), failed `expect` predicates."""
        problems = self._core.check_problems(allow_unused)
        if problems:
            raise AssertionError("emulator check failed:\n- " + "\n- ".join(problems))

    # --- /_emu/ control endpoints (standalone runs) ---

    def _control(self, method: str, path: str, raw: bytes) -> tuple[int, Any]:
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return 400, {"error": "control body is not JSON"}
        parts = [unquote(p) for p in path.split("/")[2:]]
        try:
            if method == "POST" and parts == ["scenario"]:
                self.script(data)
                return 200, {"ok": True}
            if method == "POST" and parts == ["clock", "advance"]:
                advance = getattr(self.clock, "advance", None)
                if advance is None:
                    return 400, {"error": "the clock is not a ManualClock"}
                return 200, {"now": advance(float(data.get("seconds", 0)))}
            if method == "POST" and len(parts) == 3 and parts[0] == "gates" and parts[2] == "open":
                self.gate(parts[1]).open()
                return 200, {"ok": True}
            if method == "GET" and len(parts) == 2 and parts[0] == "gates":
                g = self.gate(parts[1])
                return 200, {"reached": g.reached.is_set(), "open": g.is_open()}
            if method == "GET" and parts == ["journal"]:
                return 200, self.journal
            if method == "GET" and parts == ["check"]:
                return 200, {"problems": self.problems}
            if method == "POST" and parts == ["reset"]:
                self.reset()
                return 200, {"ok": True}
        except (ValueError, TypeError) as exc:
            return 400, {"error": str(exc)}
        return 404, {"error": f"unknown control request {method} {path}"}
