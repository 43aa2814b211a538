"""Params and results of the `agentd/session/*` requests (PROTOCOL.md §6). LEAF: imports only agentd.protocol.

Owns: the content blocks a prompt may carry (ACP v1 shapes, §6.4), the params model of every client ->
server method, the result models, and the mode table (§6.1). Validation: unknown properties are ignored,
`_meta` is kept; a failure becomes `-32602 InvalidParams` with `data.errors` in the adapter.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from agentd.protocol.base import WireModel

# ---- content blocks (§6.4) -------------------------------------------------------------------------


class TextBlock(WireModel):
    type: Literal["text"]
    text: str


class ResourceLinkBlock(WireModel):
    type: Literal["resource_link"]
    uri: str
    name: str
    mime_type: str | None = None
    size: int | None = None


class TextResource(WireModel):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


class ResourceBlock(WireModel):
    type: Literal["resource"]
    resource: TextResource


class ImageBlock(WireModel):
    type: Literal["image"]
    data: str
    mime_type: str


class AudioBlock(WireModel):
    type: Literal["audio"]
    data: str = ""
    mime_type: str = ""


ContentBlock = Annotated[
    TextBlock | ResourceLinkBlock | ResourceBlock | ImageBlock | AudioBlock, Field(discriminator="type")
]

# ---- params ------------------------------------------------------------------------------------------


def _fs_path(value: str) -> str:
    """A path the operating system can take: no NUL character (issue 9 H19: -32602, not -32603)."""
    if "\x00" in value:
        raise ValueError("must not contain a NUL character (\\u0000); send the folder's path")
    return value


FsPath = Annotated[str, AfterValidator(_fs_path)]


class NewSessionParams(WireModel):
    cwd: FsPath
    additional_directories: list[FsPath] = Field(default_factory=list)
    mcp_servers: list[Any] = Field(default_factory=list)


class LoadSessionParams(WireModel):
    session_id: str
    cwd: FsPath
    additional_directories: list[FsPath] = Field(default_factory=list)
    mcp_servers: list[Any] = Field(default_factory=list)


class ListSessionsParams(WireModel):
    cwd: FsPath | None = None
    cursor: str | None = None


class PromptParams(WireModel):
    session_id: str
    prompt: list[ContentBlock]
    work_done_token: int | str | None = None


class SessionIdParams(WireModel):
    """`{sessionId}`: cancel, close, todos, status, compact."""

    session_id: str


class HistoryParams(WireModel):
    """`{sessionId, before}`: the page of history before the compaction record whose seq is `before`."""

    session_id: str
    before: int


class HistoryResult(WireModel):
    """`agentd/session/history` (§6.15): the page's session updates in log order, and the `before` of the
    page preceding it (null: this is the first)."""

    updates: list[dict[str, Any]]
    before: int | None = None


class SetModeParams(WireModel):
    session_id: str
    mode_id: str


# ---- results -----------------------------------------------------------------------------------------

ModeId = Literal["default", "acceptEdits", "readOnly", "auto"]
MODES: tuple[tuple[str, str, str], ...] = (
    ("default", "Ask", "Follow the permission rules; ask when a rule says ask."),
    (
        "acceptEdits",
        "Accept edits",
        "Also allow write_file and edit_file inside the workspace without asking.",
    ),
    ("readOnly", "Read only", "Reject every write and command without asking."),
    (
        "auto",
        "Auto (sandbox)",
        "Allow edits inside the workspace and commands that run in the sandbox without asking; "
        "network use, running outside the sandbox and protected paths still ask.",
    ),
)
MODE_IDS: tuple[str, ...] = tuple(m[0] for m in MODES)  # in MODES' order (help, errors, completion)


class SessionMode(WireModel):
    id: str
    name: str
    description: str | None = None


class SessionModeState(WireModel):
    current_mode_id: str
    available_modes: list[SessionMode]


def modes_state(current: str, *, descriptions: bool = True) -> dict[str, Any]:
    """`{"currentModeId", "availableModes"}` of §6.1 (with descriptions) or §6.2 (without)."""
    return {
        "currentModeId": current,
        "availableModes": [
            {"id": i, "name": n, **({"description": d} if descriptions else {})} for i, n, d in MODES
        ],
    }


class NewSessionResult(WireModel):
    session_id: str
    modes: SessionModeState | None = None


class LoadSessionResult(WireModel):
    modes: SessionModeState | None = None


class SessionInfo(WireModel):
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None


class ListSessionsResult(WireModel):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class PromptResult(WireModel):
    stop_reason: StopReason


class TodoEntry(WireModel):
    content: str
    status: Literal["pending", "in_progress", "done"]


class TodosResult(WireModel):
    todos: list[TodoEntry]
    snapshot: str
    updated_at: str | None = None


class ContextStatus(WireModel):
    used_tokens: int
    window_tokens: int
    compress_threshold_tokens: int
    messages: int
    compactions: int


class Totals(WireModel):
    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_read_known: bool | None = None
    cache_write_known: bool | None = None


class Cost(WireModel):
    amount: float
    currency: str


class SandboxState(WireModel):
    """What protects the session's commands (issue 12; `agentd doctor`): the `sandbox` mode, whether the
    sandbox is active, its backend and label, and the names of the missing protections."""

    mode: str
    active: bool
    backend: str | None = None
    label: str
    missing: list[str]


class InstructionFile(WireModel):
    """One project-instructions file in the session's system prompt (AGENTS.md, CLAUDE.md): `path` as
    shown (workspace-relative, else absolute), its size and the bytes loaded after the 32 KiB cap."""

    path: str
    bytes: int
    loaded_bytes: int


class TrustState(WireModel):
    """Whether the workspace's own hooks run (issue 12 §5): `trusted`, what is `ignored` for want of trust
    (`["hooks"]`) and the `notice` saying why and how to trust it (`agentd trust DIR`)."""

    trusted: bool
    ignored: list[str]
    notice: str | None = None


class SessionStatus(WireModel):
    session_id: str
    cwd: str
    state: Literal["idle", "running", "awaiting_permission"]
    mode: str
    provider: str
    model: str
    context: ContextStatus
    totals: Totals
    cost_estimate: Cost | None = None
    turns: int
    updated_at: str | None = None
    sandbox: SandboxState | None = None
    instructions: list[InstructionFile] | None = None
    trust: TrustState | None = None


class CompactResult(WireModel):
    compacted: bool
    reason: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    messages_before: int | None = None
    messages_after: int | None = None


class EmptyResult(WireModel):
    """`{}`: close, setMode."""
