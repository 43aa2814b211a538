"""Turn-level `agentd/session/*` operations: prompt, cancel, close, setMode, todos, status, compact
(PROTOCOL.md §6.4-§6.9, §6.11, §10.1, §12.2).

Owns: the prompt request (content blocks -> model blocks, one turn per session, progress, the
`session_info_update` at the end of the first turn, `{stopReason}`), the cancel paths (notification,
`$/cancelRequest` for the pending prompt, progress cancel), and the on-demand views and compaction.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agentd.adapters import common
from agentd.adapters.lsp.errors import RpcError
from agentd.adapters.lsp.host import Connection, Hosted
from agentd.adapters.lsp.progress import TurnProgress
from agentd.adapters.lsp.sessions import hosted_of, parse
from agentd.core.session import SessionBusyError
from agentd.protocol import session as ps

log = logging.getLogger("agentd.lsp.turns")


def _busy(sid: str) -> RpcError:
    return RpcError("SessionBusy", f"A prompt is still running in {sid}; wait for it or send agentd/session/cancel.",
                    sessionId=sid)  # fmt: skip


def model_blocks(blocks: list[Any], images: bool) -> list[dict[str, Any]]:
    """Prompt content blocks (§6.4) as Messages API blocks (agentd.adapters.common); -32602 for audio, blobs,
    unsupported images, an empty prompt."""
    try:
        return common.model_blocks(blocks, images)
    except common.BadPrompt as exc:
        raise RpcError(
            "InvalidParams", f"agentd/session/prompt: {exc}", errors=[{"loc": exc.loc, "msg": str(exc)}]
        ) from None


def _totals(h: Hosted) -> tuple[int, int, int, int, int]:
    t = h.session.totals
    return (
        t.requests,
        t.input_tokens,
        t.output_tokens,
        t.cache_read_input_tokens,
        t.cache_creation_input_tokens,
    )


async def prompt(conn: Connection, raw: Any, msg_id: Any) -> dict[str, Any]:
    params = parse(ps.PromptParams, "agentd/session/prompt", raw)
    hosted = hosted_of(conn, params.session_id)
    s = hosted.session
    if s.busy or hosted.prompt_task is not None:
        raise _busy(s.id)
    blocks = model_blocks(params.prompt, images=s.accepts_images)
    hosted.prompt_task = asyncio.current_task()
    hosted.cancel_early = False
    conn.prompts[msg_id] = s.id
    before = _totals(hosted)
    progress: TurnProgress | None = None
    try:
        progress = await TurnProgress.start(conn.server, session_id=s.id, cwd=str(s.cwd), token=params.work_done_token,
                                            supported=conn.caps.work_done_progress)  # fmt: skip
        if progress is not None:
            conn.progress_tokens[progress.token] = s.id
            hosted.bridge.on_state = progress.report
        if hosted.cancel_early or not conn.open:
            stop = "cancelled"
        else:
            try:
                stop = await s.prompt(blocks)
            except SessionBusyError:
                raise _busy(s.id) from None
        if progress is not None:
            after = _totals(hosted)
            d = [a - b for a, b in zip(after, before, strict=True)]
            progress.end(stop, d[0], {"in": d[1], "out": d[2], "cache_read": d[3], "cache_write": d[4]})
        return {"stopReason": stop}
    finally:
        if progress is not None:
            progress.end("error", 0, {"in": 0, "out": 0, "cache_read": 0, "cache_write": 0})
            conn.progress_tokens.pop(progress.token, None)
        hosted.bridge.on_state = None
        hosted.prompt_task = None
        conn.prompts.pop(msg_id, None)


def cancel_session(conn: Connection, session_id: Any) -> None:
    """Cancel the running turn of a held session; an idle or unknown session is ignored (logged)."""
    hosted = conn.sessions.get(session_id) if isinstance(session_id, str) else None
    if hosted is None:
        log.debug("cancel for %r: not a session of this connection", session_id)
        return
    if hosted.prompt_task is not None and not hosted.session.busy:
        hosted.cancel_early = True
    hosted.session.cancel()


def cancel(conn: Connection, raw: Any) -> None:
    sid = raw.get("sessionId") if isinstance(raw, dict) else None
    cancel_session(conn, sid)


def cancel_prompt(conn: Connection, msg_id: Any) -> bool:
    """`$/cancelRequest` naming a pending prompt: a turn cancel (True), not a task cancel."""
    sid = conn.prompts.get(msg_id)
    if sid is None:
        return False
    cancel_session(conn, sid)
    return True


def cancel_progress(conn: Connection, token: Any) -> None:
    """`window/workDoneProgress/cancel` for a turn's token cancels the turn."""
    sid = conn.progress_tokens.get(token)
    if sid is not None:
        cancel_session(conn, sid)


async def close(conn: Connection, raw: Any) -> dict[str, Any]:
    params = parse(ps.SessionIdParams, "agentd/session/close", raw)
    await conn.unload(params.session_id)
    return {}


def set_mode(conn: Connection, raw: Any) -> dict[str, Any]:
    params = parse(ps.SetModeParams, "agentd/session/setMode", raw)
    hosted = hosted_of(conn, params.session_id)
    if params.mode_id not in ps.MODE_IDS:
        raise RpcError("InvalidParams", f"agentd/session/setMode: unknown modeId {params.mode_id!r}; use default, "
                       "acceptEdits, readOnly or auto.", errors=[{"loc": "modeId", "msg": "unknown mode"}])  # fmt: skip
    hosted.session.set_mode(params.mode_id)
    return {}


def todos(conn: Connection, raw: Any) -> dict[str, Any]:
    params = parse(ps.SessionIdParams, "agentd/session/todos", raw)
    return hosted_of(conn, params.session_id).session.todos()


async def history(conn: Connection, raw: Any) -> dict[str, Any]:
    """A page of the history before record `before` (PROTOCOL.md §6.15; issue 16, break16 F4): read in a
    worker thread (only the log's file is touched there), so other requests are answered meanwhile."""
    params = parse(ps.HistoryParams, "agentd/session/history", raw)
    session = hosted_of(conn, params.session_id).session
    return await asyncio.to_thread(session.history, params.before)


def status(conn: Connection, raw: Any) -> dict[str, Any]:
    params = parse(ps.SessionIdParams, "agentd/session/status", raw)
    return hosted_of(conn, params.session_id).session.status()


async def compact(conn: Connection, raw: Any) -> dict[str, Any]:
    """Compress now (PROTOCOL.md §6.9); the core answers and sends the `usage_update`."""
    params = parse(ps.SessionIdParams, "agentd/session/compact", raw)
    hosted = hosted_of(conn, params.session_id)
    s = hosted.session
    if s.busy or hosted.prompt_task is not None:
        raise _busy(s.id)
    try:
        return await s.compact()
    except SessionBusyError:
        raise _busy(s.id) from None
