"""The front door of one LSP connection: every message up to the `initialize` answer, without pygls
(PROTOCOL.md §4.1, §4.2; issue 16: `initialize` within 500 ms of spawn).

Owns: `Link` (one connection: its `Connection`, its frame writer and, once loaded, its pygls server) and
`load_pygls()`. Importing pygls and lsprotocol takes ~0.4 s (`lsprotocol.types` alone ~0.3 s) and nothing
in the `initialize` answer needs them, so a `Link` answers `initialize` from the raw params itself, writes
the answer, and only then loads pygls in a worker thread (the event loop keeps serving other connections)
and builds the connection's LanguageServer. The client's next frames wait in the input buffer meanwhile and
are then handled in order. Before `initialize`, requests get `-32002` and notifications are dropped, as in
`server.py`; `exit` ends the connection (code 1).

Imports no pygls or lsprotocol at import time (`tests/unit/test_architecture.py` checks the start-up path).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
from typing import TYPE_CHECKING, Any

from agentd.adapters.lsp.errors import RpcError
from agentd.adapters.lsp.host import Connection
from agentd.adapters.stdio import valid_id
from agentd.protocol import errors as perr

if TYPE_CHECKING:
    from agentd.adapters.lsp.host import Daemon
    from agentd.adapters.lsp.server import AgentdLanguageServer
    from agentd.adapters.lsp.transport import FrameWriter

log = logging.getLogger("agentd.lsp")

SERVER_MODULE = "agentd.adapters.lsp.server"
BAD_INITIALIZE = (
    "initialize: params do not have the shape the LSP specification gives them; fix the client's message."
)


async def load_pygls() -> None:
    """Import the pygls server module (and with it pygls and lsprotocol) in a worker thread, once."""
    if SERVER_MODULE not in sys.modules:
        await asyncio.to_thread(importlib.import_module, SERVER_MODULE)


def _initialize_shape_ok(params: Any) -> bool:
    """The members agentd reads have the types the LSP specification gives them."""
    if not isinstance(params, dict) or not isinstance(params.get("capabilities"), dict):
        return False
    if not all(params.get(k) is None or isinstance(params.get(k), str) for k in ("rootUri", "rootPath")):
        return False
    pid = params.get("processId")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool)):
        return False
    folders = params.get("workspaceFolders")
    return folders is None or (
        isinstance(folders, list)
        and all(isinstance(f, dict) and isinstance(f.get("uri"), str) and isinstance(f.get("name"), str)
                for f in folders)
    )  # fmt: skip


class Link:
    """One connection (see the module docstring). `receive()` takes each decoded message; `ready()` is
    awaited by the reader before the next frame (it waits while pygls loads)."""

    def __init__(self, daemon: Daemon, writer: FrameWriter) -> None:
        self.conn = Connection(daemon)
        self.writer = writer
        self.server: AgentdLanguageServer | None = None
        self._loading: asyncio.Future[None] | None = None

    async def ready(self) -> None:
        loading = self._loading
        if loading is None or self.server is not None:
            return
        await asyncio.wait({loading})
        if loading.cancelled() or loading.exception() is not None:  # shutting down, or pygls failed to load
            if not loading.cancelled():
                log.error("could not load the LSP server", exc_info=loading.exception())
            if self.conn.state != "closed":
                self.conn.lost()

    def receive(self, data: Any) -> None:
        """Handle one decoded JSON message (the checks of `AgentdLspProtocol.dispatch`, in its order)."""
        if self.server is not None:
            self.server.protocol.dispatch(data)
            return
        if not isinstance(data, dict):
            self.send_error(None, "InvalidRequest", perr.NOT_A_REQUEST)
            return
        has_id = "id" in data
        msg_id = data["id"] if has_id and valid_id(data["id"]) else None
        method = data.get("method")
        if data.get("jsonrpc") != "2.0" or (has_id and msg_id is None):
            self.send_error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
        elif method is None:
            if not (has_id and ("result" in data or "error" in data)):  # a response to nothing is dropped
                self.send_error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
        elif not isinstance(method, str):
            self.send_error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
        elif self.conn.rejected:  # frames buffered behind a refused initialize are dropped, unanswered
            return
        elif method == "exit":
            self.conn.exit_seen = True  # at once: frames behind it in the same read are not handled
            asyncio.get_running_loop().create_task(self.conn.close(1))
        elif method == "initialize" and has_id:
            self._initialize(msg_id, data.get("params"))
        elif has_id:
            self.send_error(msg_id, "ServerNotInitialized", perr.NOT_INITIALIZED)

    def _initialize(self, msg_id: Any, params: Any) -> None:
        if not _initialize_shape_ok(params):
            self.send_error(msg_id, "InvalidParams", BAD_INITIALIZE)
            return
        try:
            result = self.conn.initialize(params)
        except RpcError as exc:
            self.send({"jsonrpc": "2.0", "id": msg_id, "error": exc.error})
            return
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})
        self._loading = asyncio.ensure_future(self._attach())

    async def _attach(self) -> None:
        await load_pygls()
        from agentd.adapters.lsp.server import make_server

        if self.conn.state != "closed":
            self.server = make_server(self.conn, self.writer)

    # ---- sending -------------------------------------------------------------------------------------
    def send_error(self, msg_id: Any, name: str, message: str, **data: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": perr.rpc_error(name, message, **data)})

    def send(self, message: dict[str, Any]) -> None:
        """Frame and write one message (`Content-Length` in bytes of the ASCII body); a failed write drops
        the client."""
        if self.server is not None:
            self.server.protocol._send_data(message)
            return
        if self.conn.state == "closed" or self.conn.gone:
            return
        raw = json.dumps(message, separators=(",", ":")).encode("ascii")
        try:
            self.writer.write(b"Content-Length: %d\r\n\r\n" % len(raw) + raw)
        except OSError as exc:
            self.conn.lost(exc)
