"""`_agentd/session/checkpoints`, `_agentd/session/rewind` and `_agentd/session/fork` over ACP (PROTOCOL.md
§6.12-§6.14, §14; issue 13): the params of agentd.protocol.checkpoints in, the core's results out, exactly as
the LSP adapter's `agentd/session/*` (agentd.adapters.lsp.checkpoints).

A rewind needs the session loaded in this process (it holds the lock); the checkpoint list and a fork also
work on a stored session that is not loaded (read from its log, agentd.core.stored). After a conversation
rewind the client calls `session/load` again to replay the new branch. Imports no pygls or lsprotocol; acp
only through agentd.adapters.acp.errors.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from agentd.adapters.acp.errors import busy, invalid_params
from agentd.adapters.acp.setup import settings_of
from agentd.protocol import checkpoints as pc

if TYPE_CHECKING:
    from agentd.adapters.acp.host import AcpHost

M = TypeVar("M", bound=BaseModel)
METHODS = ("agentd/session/checkpoints", "agentd/session/rewind", "agentd/session/fork")


async def call(host: AcpHost, method: str, raw: dict[str, Any]) -> dict[str, Any]:
    """One of `METHODS` (given without its leading underscore) with its raw params; its result. Raises
    RequestError (-32602 bad params, SessionNotFound, SessionNotLoaded, SessionBusy) and the core's errors
    (CheckpointError, StorageError), which the caller maps."""
    if method.endswith("/checkpoints"):
        return _checkpoints(host, _parse(pc.CheckpointsParams, method, raw))
    if method.endswith("/rewind"):
        return await _rewind(host, _parse(pc.RewindParams, method, raw))
    return await _fork(host, _parse(pc.ForkParams, method, raw))


def _parse(model: type[M], method: str, raw: dict[str, Any]) -> M:
    from pydantic import ValidationError

    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise invalid_params(f"_{method}", exc) from None


def _checkpoints(host: AcpHost, params: pc.CheckpointsParams) -> dict[str, Any]:
    hosted = host.sessions.get(params.session_id)
    if hosted is not None:
        return hosted.session.checkpoints()
    from agentd.core.stored import stored_checkpoints

    return stored_checkpoints(host.data_dir, params.session_id)


async def _rewind(host: AcpHost, params: pc.RewindParams) -> dict[str, Any]:
    hosted = host.hosted_of(params.session_id)
    if hosted.session.busy or hosted.prompt_task is not None:
        raise busy(params.session_id)
    return await hosted.session.rewind(
        params.to, files=params.files, conversation=params.conversation, overwrite=params.overwrite,
        dry_run=params.dry_run,
    )  # fmt: skip


async def _fork(host: AcpHost, params: pc.ForkParams) -> dict[str, Any]:
    """Written in a worker thread (issue 16 §1), as the LSP adapter's fork."""
    hosted = host.sessions.get(params.session_id)
    if hosted is not None:
        if hosted.prompt_task is not None or hosted.session.busy:
            raise busy(params.session_id)
        return await asyncio.to_thread(hosted.session.fork, params.at)
    from agentd.core.stored import fork_stored
    from agentd.persistence.index import read_meta

    meta = read_meta(host.data_dir, params.session_id)
    if meta is None:
        host.hosted_of(params.session_id)  # raises SessionNotFound
    cwd = (meta or {}).get("cwd")
    settings = settings_of(cwd)[0] if isinstance(cwd, str) else None
    return await asyncio.to_thread(fork_stored, host.data_dir, params.session_id, params.at, settings)
