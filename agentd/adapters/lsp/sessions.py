"""The `agentd/session/*` operations of one connection (PROTOCOL.md §6, §11, §12).

Owns: one coroutine or function per method, taking the connection and the raw params dict and returning
the result dict (or raising `RpcError` / an `AgentdError`, mapped by `errors.error_of`). Builds sessions
through the composition root (`agentd.core.factory`) with a `SessionBridge` as sink, line writer and
approver; the provider SDKs are imported here, never before the `initialize` response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentd.adapters.common import DeferredProvider, list_page
from agentd.adapters.lsp.bridge import SessionBridge
from agentd.adapters.lsp.errors import RpcError, invalid_params
from agentd.adapters.lsp.host import Connection, Hosted, inside
from agentd.errors import ConfigError
from agentd.protocol import session as ps

log = logging.getLogger("agentd.lsp.sessions")
M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], method: str, raw: Any) -> M:
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise invalid_params(method, exc) from None


def _dir(conn: Connection, method: str, raw: str, what: str = "cwd") -> str:
    """A real, absolute, existing directory inside the workspace folders (-32602 / -32014)."""
    if not os.path.isabs(raw):
        raise RpcError("InvalidParams", f"{method}: {what} must be an absolute path (got {raw!r}); send the "
                       "workspace folder's absolute path.", errors=[{"loc": what, "msg": "must be absolute"}])  # fmt: skip
    real = os.path.realpath(raw)
    if not os.path.isdir(real):
        raise RpcError("InvalidParams", f"{method}: {what} {raw} does not exist or is not a directory; send an "
                       "existing folder.", errors=[{"loc": what, "msg": "not a directory"}])  # fmt: skip
    if not conn.roots:
        log.info("the client declared no workspace folder; adopting %s as its root", real)
        conn.roots = [real]
    if not inside(real, conn.roots):
        raise RpcError("OutsideWorkspace", f"{raw} is not inside any workspace folder ({conn.roots_text()}); "
                       "open that folder in the editor or use a path inside it.", path=raw)  # fmt: skip
    return real


def _settings(conn: Connection, cwd: str) -> Any:
    from agentd.config import load_settings

    try:
        return load_settings(Path(cwd), editor_options=conn.init_options, warnings=[])
    except ConfigError as exc:
        raise RpcError("InvalidParams", exc.message) from None


def _provider(settings: Any) -> Any:
    from agentd.providers.factory import provider_for

    return provider_for(settings)


def hosted_of(conn: Connection, session_id: str) -> Hosted:
    """The session this connection holds, else SessionNotLoaded (it exists) or SessionNotFound."""
    hosted = conn.sessions.get(session_id)
    if hosted is not None:
        return hosted
    from agentd.persistence.index import read_meta

    if read_meta(conn.daemon.data_dir, session_id) is not None:
        raise RpcError("SessionNotLoaded", f"Call agentd/session/load for {session_id} before prompting it.",
                       sessionId=session_id)  # fmt: skip
    raise RpcError("SessionNotFound", f"Session {session_id} is not in the data dir; call agentd/session/list to "
                   "see sessions, or agentd/session/new.", sessionId=session_id)  # fmt: skip


def _attach(conn: Connection, hosted: Hosted, roots: list[str]) -> None:
    s = hosted.session
    s.attach_editor([Path(r) for r in roots], conn.documents, conn.editor)
    hosted.bridge.attach(conn, s)
    conn.sessions[s.id] = hosted
    _tell_trust(conn, s)


def _tell_trust(conn: Connection, session: Any) -> None:
    """Issue 12 §5: when the session's workspace defines hooks that do not run for want of trust, say so
    once per workspace and connection as a `window/showMessage` warning (what, why, `agentd trust DIR`);
    the session's status carries the same `trust` object."""
    trust = session.status().get("trust") or {}
    root = str(session.cwd)
    if trust.get("trusted", True) or root in conn.trust_told:
        return
    conn.trust_told.add(root)
    text = f"agentd: {trust.get('notice')}."
    conn.show_message(text, 2)
    conn.log_message(text, 2)


async def new_session(conn: Connection, raw: Any) -> dict[str, Any]:
    method = "agentd/session/new"
    params = parse(ps.NewSessionParams, method, raw)
    cwd = _dir(conn, method, params.cwd)
    extra = [_dir(conn, method, d, "additionalDirectories") for d in params.additional_directories]
    settings = _settings(conn, cwd)
    provider = _provider(settings)
    from agentd.core.factory import built_off_loop, create_session

    bridge = SessionBridge()
    mcp = await _start_mcp(conn, settings, cwd)
    try:
        session = await built_off_loop(create_session, cwd=Path(cwd), settings=settings, provider=provider,
                                       data_dir=conn.daemon.data_dir, approver=bridge, sink=bridge.emit,
                                       lines=bridge.line, mcp=mcp)  # fmt: skip
    except BaseException:
        if mcp is not None:
            await mcp.aclose()
        raise
    await _still_open(conn, session, provider)
    hosted = Hosted(session=session, provider=provider, settings=settings, bridge=bridge)
    _attach(conn, hosted, [cwd, *extra])
    await session.learn_window()  # status and usage updates report the served window from the start
    return {
        "sessionId": session.id,
        "modes": ps.modes_state(session.mode),
        "_meta": {
            "agentd": {"provider": provider.name, "model": provider.model, "createdAt": session.created_at}
        },
    }


def _stored_cwd(conn: Connection, session_id: str) -> str | None:
    from agentd.persistence.index import read_meta

    meta = read_meta(conn.daemon.data_dir, session_id) or {}
    cwd = meta.get("cwd")
    return os.path.realpath(cwd) if isinstance(cwd, str) else None


async def load_session(conn: Connection, raw: Any) -> dict[str, Any]:
    method = "agentd/session/load"
    params = parse(ps.LoadSessionParams, method, raw)
    sid = params.session_id
    hosted = conn.sessions.get(sid)
    if hosted is not None and hosted.session.busy:
        raise RpcError("SessionBusy", f"A prompt is still running in {sid}; wait for it or send agentd/session/cancel.",
                       sessionId=sid)  # fmt: skip
    stored = _stored_cwd(conn, sid)
    if stored is not None and os.path.realpath(params.cwd) != stored:
        raise RpcError("InvalidParams", f"{method}: cwd must be the session's stored root {stored} (got "
                       f"{params.cwd}).", errors=[{"loc": "cwd", "msg": f"must be {stored}"}])  # fmt: skip
    cwd = _dir(conn, method, params.cwd)
    extra = [_dir(conn, method, d, "additionalDirectories") for d in params.additional_directories]
    if hosted is None:
        mcp = await _start_mcp(conn, _settings(conn, cwd), cwd)
        try:
            hosted = await _open(conn, sid, cwd, mcp)
        except BaseException:
            if mcp is not None:
                await mcp.aclose()
            raise
        await _still_open(conn, hosted.session, hosted.provider)
        _attach(conn, hosted, [cwd, *extra])
    try:
        await hosted.session.learn_window()  # the closing usage_update reports the served window (issue 17)
        await _replay(conn, hosted)
    except asyncio.CancelledError:  # $/cancelRequest for load: stop, unload, unlock, answer -32800
        await conn.unload(sid)
        raise
    return {"modes": ps.modes_state(hosted.session.mode, descriptions=False)}


async def _start_mcp(conn: Connection, settings: Any, cwd: str) -> Any:
    """The session's MCP servers from the effective config (issue 11); a server that does not start is a
    warning the editor shows, not a failed session."""
    from agentd.core.factory import session_launcher, session_mcp_specs
    from agentd.mcp.manager import start_servers

    specs = session_mcp_specs(settings, Path(cwd))
    return await start_servers(
        specs,
        Path(cwd),
        settings,
        warn=lambda text: conn.show_message(f"agentd: {text}", 2),
        secret_env=[settings.api_key_env] if settings.api_key_env else [],
        launcher=session_launcher(settings, Path(cwd), conn.daemon.data_dir) if specs else None,
    )


async def _still_open(conn: Connection, session: Any, provider: Any) -> None:
    """A session built while its client left (or shut down) is closed, not attached: the connection's
    teardown has already released what it held, so nothing would release this one (issue 16 §1)."""
    if conn.open:
        return
    await session.aclose()
    with contextlib.suppress(Exception):
        await provider.aclose()
    from agentd.protocol.errors import SHUTTING_DOWN

    raise RpcError("InvalidRequest", SHUTTING_DOWN)


async def _open(conn: Connection, sid: str, cwd: str, mcp: Any = None) -> Hosted:
    """Open stored session `sid` in a worker thread (`built_off_loop`): lock, read, replay. Raises
    SessionNotFound, SessionLocked (shown to the user too), StorageError."""
    from agentd.core.factory import built_off_loop, open_session
    from agentd.errors import SessionLocked

    slot = conn.daemon.resume
    settings = _settings(conn, cwd)
    provider = _provider(settings)  # MissingCredentials before taking a --resume slot: it stays announced
    if slot is not None and not slot.taken and slot.hosted.session.id == sid:
        # The --resume session was checked and locked with config-file settings only; the connection's
        # options (rules, todos, tool descriptions, window) shape every per-session object, so it is
        # reopened with them: a fresh replay of the log it has just validated.
        slot.taken = True
        slot.hosted.session.close()
    bridge = SessionBridge()
    try:
        session = await built_off_loop(open_session, session_id=sid, settings=settings, provider=provider,
                                       data_dir=conn.daemon.data_dir, approver=bridge, sink=bridge.emit,
                                       lines=bridge.line, mcp=mcp)  # fmt: skip
    except SessionLocked as exc:
        d = exc.data
        who = (
            "another editor window connected to this agentd"
            if d.get("sameProcess")
            else f"agentd pid {d.get('pid')}"
        )
        conn.show_message(
            f"agentd: session {sid} is open in {who}; close it there, or start a new session.", 1
        )
        raise
    return Hosted(session=session, provider=provider, settings=settings, bridge=bridge)


async def _replay(conn: Connection, hosted: Hosted) -> None:
    """The §6.2 replay: the core's updates, each sent as it is, marked `_meta.agentd.replay`."""
    s = hosted.session
    for update in s.replay_updates():
        conn.notify_update(s.id, update, replay=True)
        await asyncio.sleep(0)  # a cancel of the load can stop the replay here


def list_sessions(conn: Connection, raw: Any) -> dict[str, Any]:
    from agentd.persistence import index

    params = parse(ps.ListSessionsParams, "agentd/session/list", raw)
    if params.cwd is not None:
        metas = index.list_sessions(conn.daemon.data_dir, params.cwd)
    else:
        metas = [m for m in index.list_sessions(conn.daemon.data_dir)
                 if isinstance(m.get("cwd"), str) and inside(os.path.realpath(m["cwd"]), conn.roots)]  # fmt: skip
    try:
        return list_page(metas, params.cursor)
    except ValueError as exc:
        raise RpcError(
            "InvalidParams",
            f"agentd/session/list: cursor: {exc}",
            errors=[{"loc": "cursor", "msg": str(exc)}],
        ) from None


def open_resume(daemon: Any, session_id: str) -> Any:
    """`agentd --resume ID` (PROTOCOL.md §3.1): replay, check, repair, validate and lock the session before
    stdin is read. Raises SessionNotFound (exit 3), SessionLocked (4), StorageError (5)."""
    from agentd.adapters.lsp.host import ResumeSlot
    from agentd.config import load_settings
    from agentd.core.factory import open_session
    from agentd.persistence.index import read_meta

    meta = read_meta(daemon.data_dir, session_id) or {}
    cwd = meta.get("cwd")
    settings = load_settings(Path(cwd) if isinstance(cwd, str) and os.path.isdir(cwd) else None)
    provider = DeferredProvider(settings)
    bridge = SessionBridge()
    session = open_session(session_id=session_id, settings=settings, provider=provider, data_dir=daemon.data_dir,
                           approver=bridge, sink=bridge.emit, lines=bridge.line)  # fmt: skip
    bridge.attach(None, session)
    hosted = Hosted(session=session, provider=provider, settings=settings, bridge=bridge)
    return ResumeSlot(hosted=hosted, cwd=str(session.cwd))
