"""Checkpoints of a stored session, without an editor (issue 13; docs/checkpoints.md): the entry points of
`agentd sessions checkpoints | rewind | fork` and of any client that does not hold the session open.

Owns: `stored_checkpoints()` (the listing, read without the lock), `fork_stored()` (a fork of a session,
open elsewhere or not, signed with the user's grant key) and `rewind_stored()` (opens the session, which
takes its lock and finishes an interrupted rewind, rewinds it and closes it). A session opened here makes no
model request and runs no tool: its provider and approver refuse (`OfflineProvider`, `RefusingApprover`).
A client that holds a live Session calls `Session.checkpoints()`, `Session.rewind()` and `Session.fork()`
instead. Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd.checkpoints.restore import read_intent
from agentd.config import Settings, StoreSettings, load_settings
from agentd.core.checkpoints import CHECKPOINTS_DIR
from agentd.core.factory import grant_key, open_session
from agentd.core.fork import fork_session
from agentd.core.rewind import listing
from agentd.log import LineWriter
from agentd.permissions.approver import ApprovalOutcome, ApprovalRequest
from agentd.permissions.signing import RecordSigner
from agentd.persistence.index import read_meta
from agentd.persistence.paths import DataDir
from agentd.persistence.store import read_records
from agentd.providers.base import ModelRequest, ModelResponse, OnEvent


class OfflineProvider:
    """The provider of a session opened only to rewind it: it names the session's provider and model and
    refuses every request (none is made)."""

    def __init__(self, settings: Settings) -> None:
        from agentd.providers.models import DEFAULT_MODELS

        self.name: str = settings.provider
        self.model: str = settings.model or DEFAULT_MODELS[settings.provider]

    async def stream(self, request: ModelRequest, on_event: OnEvent) -> ModelResponse:
        raise RuntimeError("this session was opened to rewind it; it makes no model request")

    async def aclose(self) -> None:
        return None


class RefusingApprover:
    """Answers every approval with a rejection (no tool runs in a session opened to rewind it)."""

    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        return ApprovalOutcome(option="reject_once", note="the session was opened to rewind it")


def session_settings(data_dir: DataDir, session_id: str) -> Settings:
    """The settings of the session's own workspace (its checkpoint cap and ignore rules). Raises ConfigError."""
    cwd = (read_meta(data_dir, session_id) or {}).get("cwd")
    return load_settings(Path(cwd) if isinstance(cwd, str) and os.path.isdir(cwd) else None)


def stored_checkpoints(data_dir: DataDir, session_id: str) -> dict[str, Any]:
    """The `agentd/session/checkpoints` result of a stored session, read without its lock. Raises
    SessionNotFound, StorageError."""
    records, _ = read_records(data_dir, session_id)
    pending = read_intent(data_dir.session_dir(session_id) / CHECKPOINTS_DIR) is not None
    return listing(records, pending)


def fork_stored(
    data_dir: DataDir, session_id: str, at: int | str | None, settings: Settings | None = None
) -> dict[str, Any]:
    """Fork a stored session (agentd.core.fork), open elsewhere or not, with the user's grant key; the
    `agentd/session/fork` result. Raises SessionNotFound, CheckpointError, ConfigError, StorageError."""
    blob_min = (settings.store if settings is not None else StoreSettings.model_validate({})).blob_min_bytes
    signer = RecordSigner(grant_key(), session_id)
    return fork_session(data_dir, session_id, at, signer=signer, blob_min_bytes=blob_min)


async def rewind_stored(
    data_dir: DataDir,
    session_id: str,
    to: int | str,
    *,
    files: bool = True,
    conversation: bool = True,
    overwrite: bool | list[str] = False,
    dry_run: bool = False,
    lines: LineWriter | None = None,
    confirm: Callable[[list[str]], bool] | None = None,
) -> dict[str, Any]:
    """Open the session (its lock), rewind it (Session.rewind) and close it; the `agentd/session/rewind`
    result. `confirm`: asked with the paths the user changed after the checkpoint when `overwrite` is false;
    True restores them too. Raises SessionNotFound, SessionLocked, CheckpointError, UsageError, OSError,
    StorageError."""
    settings = session_settings(data_dir, session_id)
    session = open_session(session_id=session_id, settings=settings, provider=OfflineProvider(settings),
                           data_dir=data_dir, approver=RefusingApprover(), lines=lines or _quiet)  # fmt: skip
    try:
        if files and not dry_run and overwrite is False and confirm is not None:
            plan = await session.rewind(to, files=True, conversation=conversation, dry_run=True)
            mine = [k["path"] for k in plan["files"]["kept"] if k["reason"] == "changed_by_user"]
            if mine and confirm(mine):
                overwrite = mine
        return await session.rewind(to, files=files, conversation=conversation, overwrite=overwrite,
                                    dry_run=dry_run)  # fmt: skip
    finally:
        await session.aclose()


def _quiet(line: str) -> None:
    return None
