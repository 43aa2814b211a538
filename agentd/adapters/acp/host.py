"""The sessions of one `agentd --acp` process and what the client said about itself (PROTOCOL.md §4.5, §6,
§12; ACP "Session Setup", "Session List", "Prompt Turn").

Owns: `AcpHost` (the data dir, the client's capabilities, the sessions this process holds, the `--resume`
session until the client loads it, the client requests in flight) and `Hosted` (one held session: Session,
provider, bridge, the running prompt). Sessions are the same sessions as the LSP adapter's and the command
line's: created and opened through the composition root (`agentd.core.factory`), stored in the same data dir,
locked while held (a lock left by a dead process is taken over, so a client that restarts the agent can load
at once). Every update is written as its `session/update` notification the moment the core emits it, in ACP
shape (validated by the SDK's models), so updates of a turn precede its response and a replay precedes the
`session/load` answer. Uses a Session's public API only; imports acp (the SDK's models) and the core.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.schema import (
    ReadTextFileRequest,
    RequestPermissionRequest,
    SessionNotification,
    WriteTextFileRequest,
)
from acp.utils import serialize_params

from agentd.adapters.acp import commands
from agentd.adapters.acp.bridge import ACP_UPDATES, AcpBridge, config_options
from agentd.adapters.acp.errors import bad_param, busy, not_found, rpc
from agentd.adapters.acp.files import ClientFiles
from agentd.adapters.acp.setup import (
    close_quietly,
    directory,
    provider_of,
    settings_of,
    start_mcp,
    stored_cwd,
)
from agentd.adapters.acp.transport import CURRENT_ID, LineTransport
from agentd.adapters.common import BadPrompt, DeferredProvider, list_page, model_blocks
from agentd.core.session import SessionBusyError
from agentd.protocol import session as ps

if TYPE_CHECKING:
    from agentd.core.session import Session
    from agentd.persistence.paths import DataDir
    from agentd.providers.base import Provider

log = logging.getLogger("agentd.acp")

REQUEST_MODELS: dict[str, Any] = {
    "session/request_permission": RequestPermissionRequest,
    "fs/read_text_file": ReadTextFileRequest,
    "fs/write_text_file": WriteTextFileRequest,
}


@dataclass
class ClientCaps:
    """What the client offered in `initialize` (`clientCapabilities.fs`)."""

    read_text_file: bool = False
    write_text_file: bool = False


@dataclass
class Hosted:
    """One session this process holds."""

    session: Session
    provider: Provider
    bridge: AcpBridge
    prompt_task: asyncio.Task[Any] | None = None
    cancel_early: bool = False


class AcpHost:
    """The process's sessions and client state (see the module docstring). `conn`: the SDK's connection
    (set when it connects); `transport`: the line transport it runs on."""

    def __init__(
        self, data_dir: DataDir, transport: LineTransport, *, data_dir_error: str | None = None
    ) -> None:
        self.data_dir = data_dir
        self.data_dir_error = data_dir_error
        self.transport = transport
        self.conn: Any = None
        self.caps = ClientCaps()
        self.sessions: dict[str, Hosted] = {}
        self.resume: Hosted | None = None  # `--resume ID`: checked and locked, until the client loads it
        self.prompts: dict[Any, str] = {}  # pending session/prompt request id -> session id
        self.early_cancels: set[Any] = set()  # `$/cancel_request` ids that came before their prompt started
        self.trust_told: set[str] = set()  # workspaces whose untrusted hooks this client was told of
        self.serving = True
        transport.on_cancel_request = self.cancel_request

    # ---- sending -------------------------------------------------------------------------------------
    def notify(self, session_id: str, update: dict[str, Any], *, replay: bool = False) -> None:
        """Write one `session/update` now (PROTOCOL.md §7.1; `_meta.agentd.replay` on a replay's). agentd-only
        variants (`retry`, `checkpoint`, §7.2), live or replayed, are not sent: ACP v1 has none."""
        if not self.serving or update.get("sessionUpdate") not in ACP_UPDATES:
            return
        params: dict[str, Any] = {"sessionId": session_id, "update": update}
        if replay:
            params["_meta"] = {"agentd": {"replay": True}}
        try:
            note = SessionNotification.model_validate(params)
        except Exception:
            log.exception("session %s: an update that is not ACP v1 was not sent: %r", session_id, update)
            return
        self.transport.write({"jsonrpc": "2.0", "method": "session/update", "params": serialize_params(note)})

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the client and return its result (raises on an error answer). When the caller
        is cancelled (a timeout, a cancelled turn) the request is withdrawn with `$/cancel_request`."""
        model = REQUEST_MODELS.get(method)
        if model is not None:
            params = serialize_params(model.model_validate(params))
        conn = self.conn._conn  # the SDK's JSON-RPC connection
        request_id = getattr(conn, "_next_request_id", None)
        try:
            return await conn.send_request(method, params)
        except asyncio.CancelledError:
            if request_id is not None and self.serving:
                self.transport.write(
                    {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}}
                )
            raise

    def after_response(self, callback: Any) -> None:
        """Run `callback` right after the current request is answered."""
        self.transport.after_response(CURRENT_ID.get(), callback)

    # ---- sessions ------------------------------------------------------------------------------------
    def hosted_of(self, session_id: str) -> Hosted:
        """The session this process holds, else SessionNotLoaded (it exists) or SessionNotFound."""
        hosted = self.sessions.get(session_id)
        if hosted is not None:
            return hosted
        from agentd.persistence.index import read_meta

        if read_meta(self.data_dir, session_id) is not None:
            raise rpc("SessionNotLoaded", f"Call session/load for {session_id} before prompting it.",
                      sessionId=session_id)  # fmt: skip
        raise not_found(session_id)

    async def new_session(
        self, cwd: str, extra: list[str], mcp_servers: list[dict[str, Any]]
    ) -> dict[str, Any]:
        method = "session/new"
        root = directory(method, cwd, "cwd")
        roots = [root, *(directory(method, d, "additionalDirectories") for d in extra)]
        settings, warnings = settings_of(root)
        provider = provider_of(settings)
        bridge = AcpBridge(self)
        mcp = await start_mcp(settings, root, mcp_servers, warnings, self.data_dir)
        try:
            from agentd.core.factory import built_off_loop, create_session

            session = await built_off_loop(create_session, cwd=Path(root), settings=settings, provider=provider,
                                           data_dir=self.data_dir, approver=bridge, sink=bridge.emit,
                                           lines=bridge.line, mcp=mcp)  # fmt: skip
        except BaseException:
            await close_quietly(mcp, provider)
            raise
        await self._still_serving(session, provider)
        hosted = self._attach(Hosted(session=session, provider=provider, bridge=bridge), roots)
        self._after_setup(hosted, warnings)
        meta: dict[str, Any] = {
            "provider": provider.name,
            "model": provider.model,
            "createdAt": session.created_at,
        }
        if warnings:
            meta["warnings"] = warnings
        return {"sessionId": session.id, "modes": ps.modes_state(session.mode),
                "configOptions": config_options(session.mode), "_meta": {"agentd": meta}}  # fmt: skip

    async def load_session(
        self, session_id: str, cwd: str, extra: list[str], mcp_servers: list[dict[str, Any]], *, replay: bool
    ) -> dict[str, Any]:
        """`session/load` (replay: every update of §6.2 before the answer) or `session/resume` (none)."""
        method = "session/load" if replay else "session/resume"
        hosted = self.sessions.get(session_id)
        if hosted is not None and (hosted.session.busy or hosted.prompt_task is not None):
            raise busy(session_id)
        stored = stored_cwd(self.data_dir, session_id)
        if stored is not None and os.path.realpath(cwd) != stored:
            raise bad_param(method, "cwd", f"must be the session's stored root {stored} (got {cwd})",
                            "send the folder the session was started in")  # fmt: skip
        root = directory(method, cwd, "cwd")
        roots = [root, *(directory(method, d, "additionalDirectories") for d in extra)]
        warnings: list[str] = []
        if hosted is None:
            hosted = self._attach(await self._open(session_id, root, mcp_servers, warnings), roots)
        if replay:
            for update in hosted.session.replay_updates():
                self.notify(session_id, update, replay=True)
        self._after_setup(hosted, warnings)
        mode = hosted.session.mode
        out: dict[str, Any] = {"modes": ps.modes_state(mode), "configOptions": config_options(mode)}
        if warnings:
            out["_meta"] = {"agentd": {"warnings": warnings}}
        return out

    async def _open(
        self, sid: str, root: str, mcp_servers: list[dict[str, Any]], warnings: list[str]
    ) -> Hosted:
        from agentd.core.factory import built_off_loop, open_session
        from agentd.persistence.index import read_meta

        if read_meta(self.data_dir, sid) is None:
            raise not_found(sid)
        settings, more = settings_of(root)
        warnings.extend(more)
        provider = provider_of(settings)
        if self.resume is not None and self.resume.session.id == sid:
            # checked and locked before stdin was read, with config-file settings only; reopened with the
            # client's MCP servers and a real provider: a fresh replay of the log it has just validated
            self.resume.session.close()
            self.resume = None
        mcp = await start_mcp(settings, root, mcp_servers, warnings, self.data_dir)
        bridge = AcpBridge(self)
        try:
            session = await built_off_loop(open_session, session_id=sid, settings=settings, provider=provider,
                                           data_dir=self.data_dir, approver=bridge, sink=bridge.emit,
                                           lines=bridge.line, mcp=mcp)  # fmt: skip
        except BaseException:
            await close_quietly(mcp, provider)
            raise
        await self._still_serving(session, provider)
        return Hosted(session=session, provider=provider, bridge=bridge)

    async def _still_serving(self, session: Session, provider: Provider) -> None:
        """A session built (in a worker thread) while the client went away is closed, not attached: the
        shutdown has already released the others, so nothing would release this one (issue 16 §1)."""
        if self.serving:
            return
        await close_quietly(None, provider, session)
        raise rpc("InvalidRequest", "The agent is shutting down; start it again.")

    def _attach(self, hosted: Hosted, roots: list[str]) -> Hosted:
        s = hosted.session
        files = None
        if self.caps.read_text_file or self.caps.write_text_file:
            files = ClientFiles(
                s.id, self.ask, read=self.caps.read_text_file, write=self.caps.write_text_file
            )
        s.attach_editor([Path(r) for r in roots], files, files)
        hosted.bridge.attach(self, s)
        self.sessions[s.id] = hosted
        return hosted

    def _after_setup(self, hosted: Hosted, warnings: list[str]) -> None:
        """After the answer: the slash commands, and each warning as a message the user sees; among them, once
        per workspace, that its hooks do not run for want of trust (issue 12 §5, the session's status `trust`)."""
        sid = hosted.session.id
        trust = hosted.session.status().get("trust") or {}
        root = str(hosted.session.cwd)
        if not trust.get("trusted", True) and root not in self.trust_told:
            self.trust_told.add(root)
            warnings.append(f"{trust.get('notice')}.")

        def send() -> None:
            self.notify(sid, commands.available_commands_update())
            for text in warnings:
                from agentd.core.journal import new_message_id
                from agentd.protocol.updates import agent_message_chunk

                self.notify(sid, agent_message_chunk(new_message_id(), f"agentd: {text}\n"))

        for text in warnings:
            log.warning("%s", text)
        self.after_response(send)

    def list_sessions(self, cwd: str | None, cursor: str | None) -> dict[str, Any]:
        """`session/list` (§6.3): every session in the data dir (with `cwd`: only that folder's)."""
        from agentd.persistence import index

        if cwd is not None and not os.path.isabs(cwd):
            raise bad_param(
                "session/list", "cwd", f"must be an absolute path (got {cwd!r})", "send a folder's path"
            )
        metas = (
            index.list_sessions(self.data_dir, cwd) if cwd is not None else index.list_sessions(self.data_dir)
        )
        try:
            return list_page(metas, cursor)
        except ValueError as exc:
            raise bad_param("session/list", "cursor", "is not a cursor agentd gave", str(exc)) from None

    async def close(self, session_id: str) -> None:
        """Cancel the session's turn (its prompt answers `cancelled` first), then release it: lock, MCP
        servers, provider. Closing a session this process does not hold does nothing."""
        hosted = self.sessions.pop(session_id, None)
        if hosted is None:
            return
        hosted.cancel_early = True
        hosted.session.cancel()
        task = hosted.prompt_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=10)
        await close_quietly(None, hosted.provider, hosted.session)

    async def shutdown(self) -> None:
        """End of input or SIGTERM (PROTOCOL.md §4.4): cancel every turn, flush, release every lock."""
        await asyncio.gather(*(self.close(sid) for sid in list(self.sessions)), return_exceptions=True)
        self.serving = False  # from now on a session built in a worker thread is closed, not attached
        await asyncio.gather(*(self.close(sid) for sid in list(self.sessions)), return_exceptions=True)
        if self.resume is not None:
            self.resume.session.close()
            self.resume = None

    # ---- turns ---------------------------------------------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[dict[str, Any]]) -> dict[str, Any]:
        """`session/prompt`: one turn (or a slash command); `{stopReason, usage}` when it ends."""
        hosted = self.hosted_of(session_id)
        s = hosted.session
        if s.busy or hosted.prompt_task is not None:
            raise busy(session_id)
        blocks = _blocks(prompt, s.accepts_images)
        request_id = CURRENT_ID.get()
        hosted.prompt_task = asyncio.current_task()
        hosted.cancel_early = False
        self.prompts[request_id] = session_id
        before = _totals(s)
        try:
            name = commands.command_of(blocks)
            if hosted.cancel_early or request_id in self.early_cancels:
                stop = "cancelled"
            elif name is not None:
                stop = await commands.run(name, s, lambda u: self.notify(session_id, u))
            else:
                stop = await s.prompt(blocks)
        except SessionBusyError:
            raise busy(session_id) from None
        finally:
            hosted.prompt_task = None
            self.prompts.pop(request_id, None)
            self.early_cancels.discard(request_id)
        return {"stopReason": stop, "usage": _usage(before, _totals(s))}

    def cancel(self, session_id: Any) -> None:
        """`session/cancel`: stop the running turn; an idle or unknown session is ignored (logged)."""
        hosted = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if hosted is None:
            log.debug("cancel for %r: not a session of this process", session_id)
            return
        if hosted.prompt_task is not None and not hosted.session.busy:
            hosted.cancel_early = True
        hosted.session.cancel()

    def cancel_request(self, request_id: Any) -> None:
        """`$/cancel_request` naming a pending prompt: a turn cancel (it answers `cancelled`). One that names a
        request whose handler has not started yet is kept for it (both can arrive in one read)."""
        sid = self.prompts.get(request_id)
        if sid is not None:
            self.cancel(sid)
        elif self.transport.pending(request_id):
            self.early_cancels.add(request_id)

    def set_mode(
        self, session_id: str, mode_id: str, *, method: str = "session/set_mode", loc: str = "modeId"
    ) -> None:
        """The permission mode (PROTOCOL.md §6.6): stored, then `current_mode_update` (and, from the bridge,
        `config_option_update`)."""
        hosted = self.hosted_of(session_id)
        if mode_id not in ps.MODE_IDS:
            raise bad_param(
                method, loc, f"is not a mode ({mode_id!r})", "use default, acceptEdits, readOnly or auto"
            )
        hosted.session.set_mode(mode_id)

    def set_config_option(self, session_id: str, config_id: str, value: Any) -> dict[str, Any]:
        """`session/set_config_option`: `mode` is the only option; the answer lists the options as they are now."""
        method = "session/set_config_option"
        if config_id != "mode":
            raise bad_param(method, "configId", f"is not a config option ({config_id!r})", "agentd has: mode")
        self.set_mode(session_id, str(value), method=method, loc="value")
        return {"configOptions": config_options(self.hosted_of(session_id).session.mode)}

    def open_resume(self, session_id: str) -> str:
        """`agentd --acp --resume ID` (PROTOCOL.md §3.1): replay, check, repair, validate and lock the session
        before stdin is read; returns its cwd. Raises SessionNotFound (exit 3), SessionLocked (4), StorageError (5)."""
        from agentd.config import load_settings
        from agentd.core.factory import open_session
        from agentd.persistence.index import read_meta

        cwd = (read_meta(self.data_dir, session_id) or {}).get("cwd")
        settings = load_settings(Path(cwd) if isinstance(cwd, str) and os.path.isdir(cwd) else None)
        provider = DeferredProvider(settings)
        bridge = AcpBridge(None)
        session = open_session(session_id=session_id, settings=settings, provider=provider, data_dir=self.data_dir,
                               approver=bridge, sink=bridge.emit, lines=bridge.line)  # fmt: skip
        bridge.attach(None, session)
        self.resume = Hosted(session=session, provider=provider, bridge=bridge)
        return str(session.cwd)


def _blocks(prompt: list[dict[str, Any]], images: bool) -> list[dict[str, Any]]:
    from pydantic import TypeAdapter, ValidationError

    from agentd.adapters.acp.errors import invalid_params

    try:
        parsed = TypeAdapter(list[ps.ContentBlock]).validate_python(prompt)
        return model_blocks(parsed, images)
    except ValidationError as exc:
        raise invalid_params("session/prompt", exc) from None
    except BadPrompt as exc:
        raise rpc(
            "InvalidParams", f"session/prompt: {exc}", errors=[{"loc": exc.loc, "msg": str(exc)}]
        ) from None


def _totals(s: Session) -> tuple[int, int, int, int]:
    t = s.totals
    return (t.input_tokens, t.output_tokens, t.cache_read_input_tokens, t.cache_creation_input_tokens)


def _usage(before: tuple[int, int, int, int], after: tuple[int, int, int, int]) -> dict[str, int]:
    """The turn's tokens (ACP `Usage`): input counts every prompt token, cached or not."""
    i, o, r, w = (a - b for a, b in zip(after, before, strict=True))
    return {"totalTokens": i + o + r + w, "inputTokens": i + r + w, "outputTokens": o, "cachedReadTokens": r,
            "cachedWriteTokens": w}  # fmt: skip
