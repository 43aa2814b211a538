"""The shared core of one daemon and the protocol state of each LSP connection (PROTOCOL.md §3.2, §4, §12).

Owns: `Daemon` (process-wide: the data dir, the connections, the `--resume` session until a connection
loads it), `Connection` (one per client connection: lifecycle state, workspace roots, client capability
flags, `initializationOptions`, the sessions it holds, pending prompts, outstanding server->client
requests, open documents) and `Hosted` (one loaded session: Session, provider, settings, bridge).
Sessions of different connections or workspaces share nothing; a session is held by one connection at a
time (the session lock's in-process registry refuses a second holder with `sameProcess: true`).

A `Connection` exists before its pygls server: `initialize()` answers from the raw params (front.py), and
the server is attached once pygls is loaded (`attach()`). So this module imports neither pygls nor
lsprotocol at import time (`import lsprotocol.types` alone takes ~0.3 s); the methods that send LSP
messages import them, and run only once the server is attached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from agentd.adapters.lsp.bridge import SessionBridge
from agentd.adapters.lsp.errors import RpcError
from agentd.protocol import methods

if TYPE_CHECKING:
    from agentd.adapters.lsp.documents import Editor, OpenDocuments
    from agentd.adapters.lsp.progress import TurnProgress
    from agentd.adapters.lsp.server import AgentdLanguageServer
    from agentd.config import Settings
    from agentd.core.session import Session
    from agentd.persistence.paths import DataDir
    from agentd.providers.base import Provider

log = logging.getLogger("agentd.lsp")


@dataclass
class ClientCaps:
    """The client capabilities agentd acts on (PROTOCOL.md §4.2)."""

    agentd_permission: bool = False
    save_after_apply: bool = False
    checkpoints: bool = False  # the client shows `checkpoint` updates (issue 13); others never get them
    protocol_version: int = 1
    apply_edit: bool = False
    document_changes: bool = False
    work_done_progress: bool = False
    action_item_props: bool = False

    @classmethod
    def of(cls, caps: Any) -> ClientCaps:
        """From the `capabilities` of the raw `initialize` params (a dict; anything else: none)."""
        agentd = _at(caps, "experimental", "agentd")
        version = agentd.get("protocolVersion") if isinstance(agentd, dict) else None
        return cls(
            agentd_permission=_at(caps, "experimental", "agentd", "requestPermission") is True,
            save_after_apply=_at(caps, "experimental", "agentd", "saveAfterApply") is True,
            checkpoints=_at(caps, "experimental", "agentd", "checkpoints") is True,
            protocol_version=version if isinstance(version, int) and not isinstance(version, bool) else 1,
            apply_edit=bool(_at(caps, "workspace", "applyEdit")),
            document_changes=bool(_at(caps, "workspace", "workspaceEdit", "documentChanges")),
            work_done_progress=bool(_at(caps, "window", "workDoneProgress")),
            action_item_props=bool(_at(caps, "window", "showMessage", "messageActionItem",
                                       "additionalPropertiesSupport")),
        )  # fmt: skip


def _at(obj: Any, *keys: str) -> Any:
    """`obj[k1][k2]...` through dicts only; None where a level is missing or not a dict."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


@dataclass
class Hosted:
    """One session loaded by a connection."""

    session: Session
    provider: Provider
    settings: Settings
    bridge: SessionBridge
    prompt_task: asyncio.Task[Any] | None = None
    cancel_early: bool = False
    progress: TurnProgress | None = None


@dataclass
class ResumeSlot:
    """The session opened by `--resume` before stdin was read; announced until a connection loads it."""

    hosted: Hosted
    cwd: str
    taken: bool = False


@dataclass
class Daemon:
    """Process-wide state shared by every connection."""

    data_dir: DataDir
    data_dir_error: str | None = None  # why the data dir cannot be written: every `initialize` gets it (H12)
    tcp_token: str | None = None
    resume: ResumeSlot | None = None
    connections: set[Connection] = field(default_factory=set)
    on_idle: Callable[[], None] | None = None


def uri_to_root(uri: Any) -> str | None:
    """The real path of a `file:` URI (POSIX), else None."""
    if not isinstance(uri, str) or not uri.startswith("file:"):
        return None
    path = unquote(urlsplit(uri).path)
    return os.path.realpath(path) if path else None


def inside(path: str, roots: list[str]) -> bool:
    """`path` (a real path) is one of `roots` or lies inside one."""
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


class Connection:
    """The protocol state of one client connection (see the module docstring)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self._server: AgentdLanguageServer | None = None  # attached once pygls is loaded (`attach`)
        self.init_params: dict[str, Any] = {}
        self.state = "new"  # new -> initialized -> shutdown -> closed
        self.caps = ClientCaps()
        self.roots: list[str] = []
        self.init_options: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.trust_told: set[str] = set()  # workspaces whose untrusted hooks this connection was told of
        self.sessions: dict[str, Hosted] = {}
        self.prompts: dict[Any, str] = {}  # pending prompt request id -> session id
        self.outstanding: dict[str, str] = {}  # server->client request id -> session id
        self.progress_tokens: dict[Any, str] = {}  # work-done token -> session id
        self.documents: OpenDocuments  # set by `attach`
        self.editor: Editor
        self.exit_code: int | None = None
        self.initialize_seen = False
        self.authenticated = False  # initialize succeeded (with --tcp: the token matched)
        self.rejected = False  # a failed --tcp token check: nothing more is handled
        self.shutdown_requested = False
        self.shutdown_answered = asyncio.Event()
        self._shutdown_task: asyncio.Future[None] | None = None
        self._close_task: asyncio.Future[None] | None = None
        self.gone = False  # the client cannot be written to (`lost`): nothing more is sent or read
        self.exit_seen = False  # `exit` was received: no frame after it is read (recheck of break16 F3)
        self.on_close: Callable[[int], None] | None = None
        daemon.connections.add(self)

    @property
    def server(self) -> AgentdLanguageServer:
        """The pygls server (attached after the `initialize` answer; handlers run only then)."""
        assert self._server is not None, "the LSP server is attached after initialize"
        return self._server

    @property
    def protocol(self) -> Any:
        return self.server.protocol

    def attach(self, server: AgentdLanguageServer) -> None:
        """The pygls server of this connection, once loaded (after the `initialize` answer)."""
        from agentd.adapters.lsp.documents import Editor, OpenDocuments

        self._server = server
        self.documents = OpenDocuments(server)
        self.editor = Editor(server, self.documents, self.caps)

    @property
    def open(self) -> bool:
        return self.state in ("new", "initialized")

    # ---- initialize ----------------------------------------------------------------------------------
    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answer `initialize` (PROTOCOL.md §4.2) from its raw params; raises `RpcError` when this connection
        is refused (a wrong `--tcp` token, an unusable data dir), and then closes it."""
        self.initialize_seen = True
        self.init_params = params
        self.set_client(params)
        if self.daemon.tcp_token is not None and not self.token_ok(params.get("initializationOptions")):
            self._refuse()
            raise RpcError("InvalidRequest", "This agentd listens on TCP and needs initializationOptions.authToken "
                           "from <data dir>/tcp-<port>.token; the connection is closed.")  # fmt: skip
        if self.daemon.data_dir_error:  # a daemon that cannot store sessions says so, and why (H12)
            self._refuse()
            raise RpcError("StorageError", f"agentd cannot store sessions: {self.daemon.data_dir_error}; "
                           "the connection is closed.")  # fmt: skip
        self.authenticated = True
        return self.initialize_result()

    def _refuse(self) -> None:
        self.rejected = True
        asyncio.get_running_loop().call_soon(self.lost)

    def set_client(self, params: dict[str, Any]) -> None:
        """Capabilities, roots and options from the raw `initialize` params."""
        self.caps = ClientCaps.of(params.get("capabilities"))
        folders = params.get("workspaceFolders") or []
        roots = [uri_to_root(f.get("uri")) for f in folders if isinstance(f, dict)]
        if not folders and isinstance(params.get("rootUri"), str):
            roots = [uri_to_root(params["rootUri"])]
        elif not folders and isinstance(params.get("rootPath"), str) and params["rootPath"]:
            roots = [os.path.realpath(params["rootPath"])]
        self.roots = [r for r in roots if r]
        opts = params.get("initializationOptions")
        self.init_options = dict(opts) if isinstance(opts, dict) else {}

    def initialize_result(self) -> dict[str, Any]:
        """The `initialize` result of PROTOCOL.md §4.2."""
        import agentd
        from agentd.config import ConfigError, lenient_options, load_settings
        from agentd.providers.models import DEFAULT_MODELS

        warnings: list[str] = []
        try:
            settings = load_settings(Path(self.roots[0]) if self.roots else None, editor_options=self.init_options,
                                     warnings=warnings)  # fmt: skip
            provider, model = settings.provider, settings.model or DEFAULT_MODELS[settings.provider]
            images = settings.accepts_images()
        except ConfigError as exc:
            warnings.append(exc.message)
            _, more = lenient_options(self.init_options)
            warnings.extend(more)
            provider, model, images = "anthropic", DEFAULT_MODELS["anthropic"], True
        self.warnings = warnings
        agentd_caps: dict[str, Any] = {
            "protocolVersion": methods.PROTOCOL_VERSION,
            "loadSession": True,
            "sessionCapabilities": {"list": {}, "close": {}, "additionalDirectories": {}},
            "promptCapabilities": {"image": images, "audio": False, "embeddedContext": True},
            "modes": True,
            "methods": list(methods.CLIENT_METHODS),
            "provider": provider,
            "model": model,
        }
        slot = self.daemon.resume
        if slot is not None and not slot.taken:
            agentd_caps["resume"] = {"sessionId": slot.hosted.session.id, "cwd": slot.cwd}
        return {
            "capabilities": {
                "textDocumentSync": {"openClose": True, "change": 2, "save": {"includeText": False}},
                "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}},
                "experimental": {"agentd": agentd_caps},
            },
            "serverInfo": {"name": "agentd", "version": agentd.__version__},
        }

    def on_initialized(self) -> None:
        self.state = "initialized"
        if self.warnings:
            text = "agentd: " + " ".join(self.warnings) + " Fix these in your editor's agentd settings."
            self.show_message(text, 2)
            self.log_message(text, 2)

    def token_ok(self, options: Any) -> bool:
        """With `--tcp`: `initializationOptions.authToken` equals the token file's (PROTOCOL.md §3.1)."""
        import hmac

        token = self.daemon.tcp_token
        given = options.get("authToken") if isinstance(options, dict) else None
        return token is None or (
            isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())
        )

    # ---- sending -------------------------------------------------------------------------------------
    def notify_update(self, session_id: str, update: dict[str, Any], *, replay: bool = False) -> None:
        if self.state == "closed":
            return
        if update.get("sessionUpdate") == "checkpoint" and not self.caps.checkpoints:
            return  # an agentd-only update the client did not ask for (PROTOCOL.md §4.2)
        params: dict[str, Any] = {"sessionId": session_id, "update": update}
        if replay:
            params["_meta"] = {"agentd": {"replay": True}}
        self.protocol.notify("agentd/session/update", params)

    def log_message(self, text: str, level: int) -> None:
        from lsprotocol import types

        if self.state != "closed" and self._server is not None:
            self._server.window_log_message(
                types.LogMessageParams(type=types.MessageType(level), message=text)
            )

    def show_message(self, text: str, level: int) -> None:
        from lsprotocol import types

        if self.state != "closed" and self._server is not None:
            self._server.window_show_message(
                types.ShowMessageParams(type=types.MessageType(level), message=text)
            )

    def withdraw(self, msg_id: str) -> None:
        """Withdraw an outstanding server->client request: forget it (a late answer is ignored) and send
        `$/cancelRequest` (PROTOCOL.md §6.10, §12.2)."""
        self.outstanding.pop(msg_id, None)
        self.protocol._request_futures.pop(msg_id, None)
        self.protocol._result_types.pop(msg_id, None)
        from lsprotocol import types

        if self.state != "closed":
            self.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    # ---- roots ---------------------------------------------------------------------------------------
    def roots_text(self) -> str:
        return ", ".join(self.roots) if self.roots else "none"

    def folders_changed(self, added: list[str], removed: list[str]) -> list[str]:
        """Apply `workspace/didChangeWorkspaceFolders`; return the ids of sessions now outside every root."""
        gone = {uri_to_root(u) for u in removed}
        self.roots = [r for r in self.roots if r not in gone]
        for uri in added:
            root = uri_to_root(uri)
            if root and root not in self.roots:
                self.roots.append(root)
        return [sid for sid, h in self.sessions.items() if not inside(str(h.session.cwd), self.roots)]

    # ---- teardown ------------------------------------------------------------------------------------
    async def unload(self, session_id: str) -> None:
        """Cancel the session's turn (its prompt answers `cancelled` first), then close it and release
        its lock and provider. Later requests for it get SessionNotLoaded."""
        hosted = self.sessions.pop(session_id, None)
        if hosted is not None:
            await self._release(hosted)

    def unload_now(self, session_id: str) -> None:
        """`unload` for a notification handler: the session is gone for every later message at once; an
        idle one is released at once too, a running one after its prompt has answered `cancelled`."""
        hosted = self.sessions.pop(session_id, None)
        if hosted is None:
            return
        if hosted.prompt_task is None:
            self._close_store(hosted)
        asyncio.get_running_loop().create_task(self._release(hosted))

    async def _release(self, hosted: Hosted) -> None:
        session_id = hosted.session.id
        hosted.cancel_early = True  # a prompt still starting (e.g. awaiting progress creation) must not run
        hosted.session.cancel()
        task = hosted.prompt_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=10)
        for msg_id, sid in list(self.outstanding.items()):
            if sid == session_id:
                self.withdraw(msg_id)
        self._close_store(hosted)
        try:
            await hosted.provider.aclose()
        except Exception:
            log.debug("provider close failed", exc_info=True)

    @staticmethod
    def _close_store(hosted: Hosted) -> None:
        if hosted.session.closed:
            return
        hosted.session.close()  # flushes (a failed fsync is logged) and releases the lock
        hosted.bridge.attach(None, hosted.session)

    async def shutdown(self) -> None:
        """LSP `shutdown` (PROTOCOL.md §4.4): cancel turns, withdraw requests, flush, release locks. Runs
        once; a second caller (exit, end of input) waits for the first."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._shutdown_task)

    async def _shutdown(self) -> None:
        if self.state != "closed":
            self.state = "shutdown"
        await asyncio.gather(*(self.unload(sid) for sid in list(self.sessions)))
        for msg_id in list(self.outstanding):
            self.withdraw(msg_id)

    def lost(self, exc: BaseException | None = None) -> None:
        """The client is gone (a write failed: `exc`, or it must be dropped): close with code 1. Idempotent:
        one log line per connection however many writes fail (break16 F3)."""
        if self.gone:
            return
        self.gone = True
        if exc is not None:
            log.info("the client is gone (%s); ending the connection", exc)
        asyncio.get_running_loop().create_task(self.close(1))

    @property
    def closing(self) -> bool:
        """The connection is ending (`close` began, or the client is gone): no further frame is read."""
        return self.gone or self.exit_seen or self._close_task is not None or self.state == "closed"

    async def close(self, code: int) -> None:
        """The connection ends (`exit`, end of input or a disconnect): clean up once, then `on_close(code)`."""
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close(code))
        await asyncio.shield(self._close_task)

    async def _close(self, code: int) -> None:
        try:
            await self.shutdown()
            if self.shutdown_requested:  # `exit` right behind `shutdown`: its answer goes out first
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.shutdown_answered.wait(), 5)
        finally:
            self.state = "closed"
            self.exit_code = code
            self.daemon.connections.discard(self)
            if self.on_close is not None:
                self.on_close(code)
            if not self.daemon.connections and self.daemon.on_idle is not None:
                self.daemon.on_idle()
