"""Params and results of `agentd/session/checkpoints`, `agentd/session/rewind` and `agentd/session/fork`
(PROTOCOL.md §6.12-§6.14; issue 13). LEAF: imports only agentd.protocol.

A checkpoint is named by its id: `"N"` before prompt N, `"N.M"` before the M-th `run_command` of that turn,
`"N.end"` after the turn, `"rK"` before the K-th rewind (so a rewind can be undone). A bare number `N` in
`to` / `at` means `"N"`. Paths are relative to the session's `cwd` (absolute for other roots).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentd.protocol.base import WireModel

CheckpointTarget = int | str
CheckpointKind = Literal["prompt", "run_command", "turn_end", "rewind"]
KeptReason = Literal["changed_by_user", "not_covered", "holds_files_not_covered"]


class CheckpointsParams(WireModel):
    session_id: str


class CheckpointInfo(WireModel):
    """One checkpoint. `active`: on the conversation's current branch; `text`: the prompt's first line or the
    command; `files` / `bytes`: what it covers (absent when it failed or checkpoints are off); `changed`:
    paths changed since the checkpoint before it; `notCovered`: paths it does not cover (ignored, too large,
    ...); `error`: why it failed (the turn went on)."""

    id: str
    before: CheckpointKind
    prompt: int
    at: str
    active: bool
    message_id: str | None = None
    text: str | None = None
    tool_call_id: str | None = None
    files: int | None = None
    bytes: int | None = None
    changed: int = 0
    not_covered: int = 0
    error: str | None = None


class RewindInfo(WireModel):
    """A rewind done in this session: to which checkpoint, what it restored, and the checkpoint taken just
    before it (`before`, to undo it)."""

    id: str
    at: str
    to: str
    files: bool
    conversation: bool
    before: str | None = None


class CheckpointsResult(WireModel):
    checkpoints: list[CheckpointInfo]
    rewinds: list[RewindInfo] = Field(default_factory=list)
    pending_rewind: bool = Field(
        False, description="A rewind was interrupted; it finishes when the session opens."
    )


class RewindParams(WireModel):
    """`files` / `conversation`: what goes back (both by default; `--files-only` / `--conversation-only`).
    `overwrite`: also restore these paths the user changed after the checkpoint (`true`: all of them).
    `dryRun`: only say what would happen."""

    session_id: str
    to: CheckpointTarget
    files: bool = True
    conversation: bool = True
    overwrite: bool | list[str] = False
    dry_run: bool = False


class KeptPath(WireModel):
    path: str
    reason: KeptReason


class RewindFiles(WireModel):
    restored: list[str]
    removed: list[str]
    kept: list[KeptPath]


class RewindConversation(WireModel):
    messages_before: int
    messages_after: int
    abandoned_prompts: list[int]


class RewindResult(WireModel):
    """`done`: false for a dry run. `checkpoint`: the id of the checkpoint taken before the rewind (rewind to
    it to undo this one); a dry run takes none."""

    to: str
    done: bool
    files: RewindFiles | None = None
    conversation: RewindConversation | None = None
    checkpoint: str | None = None


class ForkParams(WireModel):
    """`at`: the checkpoint to fork at (the new session holds the conversation before it); absent: the end."""

    session_id: str
    at: CheckpointTarget | None = None


class ForkResult(WireModel):
    session_id: str
    forked_from: str
    at: str | None = None
    title: str | None = None
    messages: int
