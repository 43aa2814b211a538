"""The pygls LanguageServer of one connection and the overrides where pygls 2.1 falls short
(ARCHITECTURE.md; PROTOCOL.md §3.2, §4, §11, §12.2).

Owns: `AgentdLspProtocol` and `make_server()`. `dispatch()` is the entry point for every decoded message
(transport.py parses the frames): it answers `-32600` for anything that is not a JSON-RPC 2.0 message and
for requests after `shutdown`, `-32002` for requests before `initialize`, `-32601` (with `data.name`) for
unknown methods, `-32602` for standard params of the wrong shape and for params holding lone surrogates (a
notification's are replaced by U+FFFD instead), and turns `$/cancelRequest` for a pending prompt into a
turn cancel. `initialize` itself is answered before pygls is loaded (front.py); `make_server()` then
gives the protocol what pygls' own handler would have set (the client capabilities, the workspace). The
protocol also overrides `shutdown` (cancel turns, withdraw requests, flush, release locks, then answer),
`exit` (ends this connection only), the error answers (every error carries `data.name`) and the framing of
sent messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, default_converter, lsp_method
from pygls.uris import from_fs_path
from pygls.workspace import Workspace

from agentd.adapters.lsp.errors import error_of, unicode_error
from agentd.adapters.lsp.host import Connection
from agentd.adapters.lsp.wire import WireMixin
from agentd.adapters.stdio import valid_id
from agentd.protocol import errors as perr
from agentd.text import scrub_surrogates, surrogate_problems

if TYPE_CHECKING:
    from agentd.adapters.lsp.transport import FrameWriter

log = logging.getLogger("agentd.lsp")


_valid_id = valid_id  # the one rule of agentd.adapters.stdio (a bounded string, or an integer)


NOTIFICATIONS = frozenset({
    "initialized", "exit", "$/cancelRequest", "$/setTrace", "$/progress", "textDocument/didOpen",
    "textDocument/didChange", "textDocument/didClose", "textDocument/didSave", "workspace/didChangeWorkspaceFolders",
    "workspace/didChangeConfiguration", "window/workDoneProgress/cancel", "agentd/session/cancel",
})  # fmt: skip


class AgentdLspProtocol(WireMixin, LanguageServerProtocol):  # type: ignore[misc]
    """pygls' LSP protocol with agentd's lifecycle, errors and dict envelopes (see the module docstring)."""

    conn: Connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._methods: dict[Any, str] = {}

    # ---- entry point ---------------------------------------------------------------------------------
    def dispatch(self, data: Any) -> None:
        """Handle one decoded JSON message (see the module docstring)."""
        if not isinstance(data, dict):
            self.send_error(None, "InvalidRequest", perr.NOT_A_REQUEST)
            return
        has_id = "id" in data
        msg_id = data.get("id") if has_id and _valid_id(data.get("id")) else None
        method = data.get("method")
        if data.get("jsonrpc") != "2.0" or (has_id and msg_id is None):
            self.send_error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
            return
        if method is None:
            if has_id and ("result" in data or "error" in data):
                self._deliver(data, None)
            else:
                self.send_error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
            return
        if not isinstance(method, str):
            self.send_error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
            return
        if not self._admit(method, msg_id, has_id):
            return
        if has_id and method in NOTIFICATIONS:  # a request for a notification would never be answered
            self.send_error(msg_id, "InvalidRequest", f"{method} is a notification; send it without an id.")
            return
        if method == types.CANCEL_REQUEST:
            self._cancel_request(data.get("params"))
            return
        if has_id and method not in self.fm.features and method not in self.fm.builtin_features:
            self.send_error(msg_id, "MethodNotFound", perr.method_not_found(method))
            return
        problems = surrogate_problems(data.get("params"))
        if problems:  # lone surrogates cannot be stored or sent on (H19)
            if has_id:
                self._send_data(
                    {"jsonrpc": "2.0", "id": msg_id, "error": unicode_error(method, problems).error}
                )
                return
            data["params"] = scrub_surrogates(data["params"])  # a notification (document sync): U+FFFD
        if has_id:
            self._methods[msg_id] = method
        if method == types.SHUTDOWN:
            self.conn.shutdown_requested = True  # later requests get -32600, even before it is answered
        data.setdefault("params", None)
        self._deliver(data, msg_id if has_id else None, method)

    def _admit(self, method: str, msg_id: Any, is_request: bool) -> bool:
        state = self.conn.state
        if self.conn.rejected:  # frames buffered behind a refused initialize are dropped, unanswered
            return False
        if method == types.EXIT:
            self.conn.exit_seen = True  # at once: frames behind it in the same read are not handled
            return True
        if not self.conn.initialize_seen and method != types.INITIALIZE:
            if is_request:
                self.send_error(msg_id, "ServerNotInitialized", perr.NOT_INITIALIZED)
            return False
        if state in ("shutdown", "closed") or self.conn.shutdown_requested:
            if is_request:
                self.send_error(msg_id, "InvalidRequest", perr.SHUTTING_DOWN)
            return False
        if method == types.INITIALIZE and self.conn.initialize_seen:
            self.send_error(msg_id, "InvalidRequest", "initialize was already sent on this connection.")
            return False
        return True

    def _deliver(self, data: dict[str, Any], msg_id: Any, method: str | None = None) -> None:
        try:
            message = self.structure_message(data)
        except JsonRpcException as exc:
            log.info("could not structure %s: %s", method or "a response", exc)
            if msg_id is not None:
                self._methods.pop(msg_id, None)
                detail = "params do not have the shape the LSP specification gives them"
                self.send_error(msg_id, "InvalidParams", f"{method}: {detail}; fix the client's message.")
            return
        try:
            self.handle_message(message)
        except Exception:
            log.exception("failed to handle %s", method or "a response")
            if msg_id is not None:
                self.send_error(msg_id, "InternalError", perr.INTERNAL)

    def _cancel_request(self, params: Any) -> None:
        from agentd.adapters.lsp.turns import cancel_prompt

        target: Any = params.get("id") if isinstance(params, dict) else None
        if not _valid_id(target):  # e.g. an object id: nothing to cancel (and not hashable)
            return

        if cancel_prompt(self.conn, target):
            return  # a pending prompt: a turn cancel, answered with {"stopReason": "cancelled"}
        future = self._request_futures.get(target) if _valid_id(target) else None
        if future is not None and target in self._methods and not future.done():
            future.cancel()  # load / compact / other requests: answered -32800

    # ---- sending -------------------------------------------------------------------------------------
    def send_error(self, msg_id: Any, name: str, message: str, **data: Any) -> None:
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": perr.rpc_error(name, message, **data)})

    def _send_data(self, data: Any) -> None:
        """Frame and write one message: `Content-Length` in bytes of the UTF-8 (ASCII) body."""
        if not data or self.writer is None or self.conn.state == "closed" or self.conn.gone:
            return
        try:
            body = json.dumps(data, default=self._serialize_message, separators=(",", ":"))
        except Exception:
            log.exception("could not serialise an outgoing message")
            return
        raw = body.encode("ascii")
        try:
            self.writer.write(b"Content-Length: %d\r\n\r\n" % len(raw) + raw)
        except OSError as exc:
            self.conn.lost(exc)

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:  # type: ignore[override]
        self._request_futures.pop(msg_id, None)
        method = self._methods.pop(msg_id, "")
        if future.cancelled():
            error = error_of(asyncio.CancelledError(), method)
        else:
            exc = future.exception()
            if exc is None:
                self._send_response(msg_id, result=future.result())
                if method == types.SHUTDOWN:
                    self.conn.shutdown_answered.set()
                return
            error = error_of(exc, method)
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error})
        if method == types.SHUTDOWN:
            self.conn.shutdown_answered.set()

    # ---- lifecycle overrides -------------------------------------------------------------------------
    @lsp_method(types.INITIALIZED)
    def lsp_initialized(self, *args: Any) -> None:  # type: ignore[override]
        self.conn.on_initialized()

    @lsp_method(types.SHUTDOWN)
    async def lsp_shutdown(self, *args: Any) -> None:  # type: ignore[override]
        await self.conn.shutdown()
        return None

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:  # type: ignore[override]
        code = 0 if self.conn.shutdown_requested else 1
        asyncio.get_running_loop().create_task(self.conn.close(code))


class AgentdLanguageServer(LanguageServer):
    conn: Connection
    protocol: AgentdLspProtocol


def make_server(conn: Connection, writer: FrameWriter) -> AgentdLanguageServer:
    """The LanguageServer of `conn`, writing frames to `writer`, in the state pygls' `initialize` handler
    would have left it: the connection has already answered `initialize` from `conn.init_params`."""
    import agentd
    from agentd.adapters.lsp import handlers

    server = AgentdLanguageServer(
        "agentd", agentd.__version__, protocol_cls=AgentdLspProtocol, converter_factory=default_converter
    )
    server.conn = conn
    server.protocol.conn = conn
    server.protocol.set_writer(writer, include_headers=True)  # type: ignore[arg-type]
    _initialized_state(server.protocol, conn.init_params)
    conn.attach(server)
    handlers.register(server, conn)
    return server


def _initialized_state(protocol: AgentdLspProtocol, params: dict[str, Any]) -> None:
    """Client capabilities and workspace on the protocol, from the raw `initialize` params. Capabilities of
    an odd shape (agentd read what it needs leniently) leave pygls with none."""
    try:
        protocol.client_capabilities = protocol._converter.structure(
            params.get("capabilities") or {}, types.ClientCapabilities
        )
    except Exception:
        log.info("client capabilities of an unexpected shape; pygls gets none")
        protocol.client_capabilities = types.ClientCapabilities()
    root_uri = params.get("rootUri") if isinstance(params.get("rootUri"), str) else None
    root_path = params.get("rootPath")
    if root_uri is None and isinstance(root_path, str) and root_path:
        root_uri = from_fs_path(root_path)
    folders = [types.WorkspaceFolder(uri=f["uri"], name=str(f.get("name", "")))
               for f in params.get("workspaceFolders") or [] if isinstance(f, dict) and isinstance(f.get("uri"), str)]  # fmt: skip
    protocol._workspace = Workspace(
        root_uri, types.TextDocumentSyncKind.Incremental, folders, types.PositionEncodingKind.Utf16
    )
