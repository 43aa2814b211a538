"""`agentd/session/checkpoints`, `agentd/session/rewind` and `agentd/session/fork` over LSP (PROTOCOL.md
§6.12-§6.14; issue 13): params in, the core's results out (agentd.core.rewind, agentd.core.fork).

A rewind needs the session loaded on this connection (it holds the lock and the editor's buffers); the
checkpoints list and a fork also work on a stored session that is not loaded (read from its log). After a
conversation rewind the client calls `agentd/session/load` again to replay the new branch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.adapters.lsp.errors import RpcError
from agentd.adapters.lsp.host import Connection
from agentd.adapters.lsp.sessions import _settings, hosted_of, parse
from agentd.core.session import SessionBusyError
from agentd.protocol import checkpoints as pc


def _busy(sid: str) -> RpcError:
    return RpcError("SessionBusy", f"A prompt is still running in {sid}; wait for it or send agentd/session/cancel.",
                    sessionId=sid)  # fmt: skip


def checkpoints(conn: Connection, raw: Any) -> dict[str, Any]:
    params = parse(pc.CheckpointsParams, "agentd/session/checkpoints", raw)
    hosted = conn.sessions.get(params.session_id)
    if hosted is not None:
        return hosted.session.checkpoints()
    from agentd.core.stored import stored_checkpoints

    return stored_checkpoints(conn.daemon.data_dir, params.session_id)


async def rewind(conn: Connection, raw: Any) -> dict[str, Any]:
    params = parse(pc.RewindParams, "agentd/session/rewind", raw)
    hosted = hosted_of(conn, params.session_id)
    if hosted.session.busy or hosted.prompt_task is not None:
        raise _busy(params.session_id)
    try:
        return await hosted.session.rewind(
            params.to, files=params.files, conversation=params.conversation, overwrite=params.overwrite,
            dry_run=params.dry_run,
        )  # fmt: skip
    except SessionBusyError:
        raise _busy(params.session_id) from None


async def fork(conn: Connection, raw: Any) -> dict[str, Any]:
    """The fork is written in a worker thread (its log, audit log and links fsynced: issue 16 §1); it is
    created, not opened, so a cancelled request leaves a complete fork and no lock behind."""
    params = parse(pc.ForkParams, "agentd/session/fork", raw)
    hosted = conn.sessions.get(params.session_id)
    if hosted is not None:
        if hosted.prompt_task is not None or hosted.session.busy:
            raise _busy(params.session_id)
        try:
            return await asyncio.to_thread(hosted.session.fork, params.at)
        except SessionBusyError:
            raise _busy(params.session_id) from None
    from agentd.core.stored import fork_stored
    from agentd.persistence.index import read_meta

    meta = read_meta(conn.daemon.data_dir, params.session_id)
    if meta is None:
        hosted_of(conn, params.session_id)  # raises SessionNotFound
    cwd = (meta or {}).get("cwd")
    settings = _settings(conn, cwd) if isinstance(cwd, str) else None
    return await asyncio.to_thread(fork_stored, conn.daemon.data_dir, params.session_id, params.at, settings)
