"""Thin pygls feature handlers: each delegates to `sessions.py` / `turns.py` or the connection's documents
(PROTOCOL.md §5). Params of `agentd/*` arrive as plain dicts (wire.py); results are plain dicts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from agentd.adapters.lsp import checkpoints, sessions, turns

if TYPE_CHECKING:
    from agentd.adapters.lsp.host import Connection
    from agentd.adapters.lsp.server import AgentdLanguageServer

log = logging.getLogger("agentd.lsp")


def register(server: AgentdLanguageServer, conn: Connection) -> None:
    """Register every `agentd/*` method of the table and the standard notifications agentd acts on."""

    @server.feature("agentd/session/new")
    async def new(params: Any) -> dict[str, Any]:
        """Create a session bound to `cwd` (§6.1)."""
        return await sessions.new_session(conn, params)

    @server.feature("agentd/session/load")
    async def load(params: Any) -> dict[str, Any]:
        """Reopen a stored session and replay it as updates before answering (§6.2)."""
        return await sessions.load_session(conn, params)

    @server.feature("agentd/session/list")
    def list_(params: Any) -> dict[str, Any]:
        """Sessions newest first, 50 per page (§6.3)."""
        return sessions.list_sessions(conn, params)

    @server.feature("agentd/session/prompt")
    async def prompt(params: Any) -> dict[str, Any]:
        """One turn; answers `{stopReason}` when it ends (§6.4)."""
        return await turns.prompt(conn, params, server.protocol.msg_id)

    @server.feature("agentd/session/cancel")
    def cancel(params: Any) -> None:
        """Stop the session's running turn (§6.5)."""
        turns.cancel(conn, params)

    @server.feature("agentd/session/close")
    async def close(params: Any) -> dict[str, Any]:
        """Cancel, unload and unlock (§6.11)."""
        return await turns.close(conn, params)

    @server.feature("agentd/session/setMode")
    def set_mode(params: Any) -> dict[str, Any]:
        """Change the permission mode (§6.6)."""
        return turns.set_mode(conn, params)

    @server.feature("agentd/session/todos")
    def todos(params: Any) -> dict[str, Any]:
        """The current todo snapshot (§6.7)."""
        return turns.todos(conn, params)

    @server.feature("agentd/session/history")
    async def history(params: Any) -> dict[str, Any]:
        """A page of history before record `before` (§6.15), read in a worker thread."""
        return await turns.history(conn, params)

    @server.feature("agentd/session/status")
    def status(params: Any) -> dict[str, Any]:
        """State, context size and token totals (§6.8)."""
        return turns.status(conn, params)

    @server.feature("agentd/session/compact")
    async def compact(params: Any) -> dict[str, Any]:
        """Compress the history now (§6.9)."""
        return await turns.compact(conn, params)

    @server.feature("agentd/session/checkpoints")
    def list_checkpoints(params: Any) -> dict[str, Any]:
        """The session's checkpoints and rewinds (§6.12)."""
        return checkpoints.checkpoints(conn, params)

    @server.feature("agentd/session/rewind")
    async def rewind(params: Any) -> dict[str, Any]:
        """Files and/or conversation back to a checkpoint (§6.13)."""
        return await checkpoints.rewind(conn, params)

    @server.feature("agentd/session/fork")
    async def fork(params: Any) -> dict[str, Any]:
        """A new session with the history up to a checkpoint (§6.14)."""
        return await checkpoints.fork(conn, params)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        conn.documents.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        conn.documents.closed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        conn.documents.saved(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def folders(params: types.DidChangeWorkspaceFoldersParams) -> None:
        """Sessions whose cwd left every folder are cancelled, unloaded and unlocked (§8.3)."""
        added = [f.uri for f in params.event.added or []]
        removed = [f.uri for f in params.event.removed or []]
        for sid in conn.folders_changed(added, removed):
            conn.unload_now(sid)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(params: types.WorkDoneProgressCancelParams) -> None:
        turns.cancel_progress(conn, params.token)
