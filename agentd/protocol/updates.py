"""Session updates as they cross the wire (PROTOCOL.md §7), in ACP v1 shape. LEAF: imports only agentd.protocol.

Owns: one pydantic model per §7.2 variant agentd sends (`AgentMessageChunk`, `AgentThoughtChunk`,
`UserMessageChunk`, `ToolCall`, `ToolCallUpdate`, `Plan`, `UsageUpdate`, `SessionInfoUpdate`,
`CurrentModeUpdate`, and the agentd-only `Retry` and `Checkpoint`), `SessionUpdate` (their union, discriminated on
`sessionUpdate`), and the builders: one per variant, typed values in, the update exactly as it goes on the
wire out. The models are the single source of the editor clients' update types (PROTOCOL.md §13); they
allow unknown properties and keep `_meta`.

Each builder returns the `update` object of `agentd/session/update {sessionId, update}` (agentd's own data
under `_meta.agentd`). The core computes every value (`messageId`, `used`/`size`/`cost`, `decision`,
`decidedBy`, `optionId`, `durationMs`: agentd.core.events) and calls these builders once per update, for a
live turn and for the `session/load` replay alike; adapters only frame what the core emits.
`tests/unit/test_protocol_codegen.py` validates every builder's output against its model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from agentd.protocol.base import WireModel
from agentd.protocol.session import ContentBlock, Cost

# ---- models (§7.2) -----------------------------------------------------------------------------------

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]
PlanEntryStatus = Literal["pending", "in_progress", "completed"]


class _Update(WireModel):
    """The base of the update models: unknown properties are allowed and kept (PROTOCOL.md §2)."""

    model_config = ConfigDict(extra="allow")


class _Chunk(_Update):
    content: ContentBlock
    message_id: str | None = Field(None, description="Chunks with one messageId form one message.")


class AgentMessageChunk(_Chunk):
    """Streamed assistant text; `_meta.agentd.retracts` names a message the client drops (§7.2)."""

    session_update: Literal["agent_message_chunk"]


class AgentThoughtChunk(_Chunk):
    """Extended-thinking text."""

    session_update: Literal["agent_thought_chunk"]


class UserMessageChunk(_Chunk):
    """One stored prompt content block, only during `agentd/session/load` replay."""

    session_update: Literal["user_message_chunk"]


class ToolCallLocation(_Update):
    path: str
    line: int | None = None


class ToolCallContentBlock(_Update):
    """Tool output as a content block (`{"type":"content","content":{...}}`)."""

    type: Literal["content"]
    content: ContentBlock


class ToolCallDiff(_Update):
    """A file change; `path` is absolute, `oldText` is null for a new file."""

    type: Literal["diff"]
    path: str
    old_text: str | None = Field(None, json_schema_extra={"x-nullable": True})
    new_text: str


ToolCallContent = Annotated[ToolCallContentBlock | ToolCallDiff, Field(discriminator="type")]


class ToolCall(_Update):
    """Sent once per tool use, when the model has finished streaming its input (§7.2, §7.3)."""

    session_update: Literal["tool_call"]
    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolCallStatus
    raw_input: Any = None
    raw_output: Any = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None


class ToolCallUpdate(_Update):
    """Only `toolCallId` is required; the other fields replace the displayed ones (§7.2)."""

    session_update: Literal["tool_call_update"]
    tool_call_id: str
    title: str | None = None
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    raw_input: Any = None
    raw_output: Any = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None


class PlanEntry(_Update):
    content: str
    priority: Literal["high", "medium", "low"]
    status: PlanEntryStatus


class Plan(_Update):
    """The complete TODO list after a successful `todo_write`; the client replaces its plan (§7.4)."""

    session_update: Literal["plan"]
    entries: list[PlanEntry]


class UsageUpdate(_Update):
    """After every model response, after compression and at the end of a replay (§7.2). `used`: context
    tokens; `size`: the model's window; `cost`: the session's total so far, when the model's price is known."""

    session_update: Literal["usage_update"]
    used: int | None = None
    size: int | None = None
    cost: Cost | None = None


class SessionInfoUpdate(_Update):
    """Patches the stored values: omitted = unchanged, `null` = cleared (§7.2)."""

    session_update: Literal["session_info_update"]
    title: str | None = Field(None, json_schema_extra={"x-nullable": True})
    updated_at: str | None = Field(None, json_schema_extra={"x-nullable": True})


class CurrentModeUpdate(_Update):
    """Only when modes are supported; after `setMode`, and during replay."""

    session_update: Literal["current_mode_update"]
    current_mode_id: str


class Retry(_Update):
    """agentd-only (§7.2): a model request failed and is retried after `delayS` seconds. `attempt` is the
    number of the attempt that failed (1-based); `message` says why, as the provider error reads. Transient:
    not stored, not replayed."""

    session_update: Literal["retry"]
    attempt: int
    delay_s: float
    message: str
    http_status: int | None = None


class Checkpoint(_Update):
    """agentd-only (§7.2; issue 13): a checkpoint of the workspace was taken. `checkpointId` names it for
    `agentd/session/rewind` and `fork` (`"N"` before prompt N, carrying that prompt's `messageId`, so a
    client can offer "Restore checkpoint" on the user's message); `error`: it failed and the turn went on.
    Sent live and in the `session/load` replay."""

    session_update: Literal["checkpoint"]
    checkpoint_id: str
    before: Literal["prompt", "run_command", "turn_end", "rewind"]
    prompt: int
    message_id: str | None = None
    files: int | None = None
    changed: int | None = None
    not_covered: int | None = None
    error: str | None = None


SessionUpdate = Annotated[
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | UsageUpdate
    | SessionInfoUpdate
    | CurrentModeUpdate
    | Retry
    | Checkpoint,
    Field(discriminator="session_update"),
]

# ---- builders (what the core calls) ------------------------------------------------------------------


def _meta(**agentd: Any) -> dict[str, Any]:
    return {"agentd": {k: v for k, v in agentd.items() if v is not None}}


def _chunk(kind: str, message_id: str | None, content: dict[str, Any]) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": content, "messageId": message_id}


def agent_message_chunk(message_id: str, text: str, retracts: str | None = None) -> dict[str, Any]:
    """Streamed (or replayed) assistant text; `retracts`: the messageId of a reply a retry voided (§7.2)."""
    update = _chunk("agent_message_chunk", message_id, {"type": "text", "text": text})
    if retracts:
        update["_meta"] = _meta(retracts=retracts)
    return update


def agent_thought_chunk(message_id: str | None, text: str) -> dict[str, Any]:
    return _chunk("agent_thought_chunk", message_id, {"type": "text", "text": text})


def user_message_chunk(message_id: str | None, content: dict[str, Any]) -> dict[str, Any]:
    """One stored prompt block (a ContentBlock: text, or image `{type, data, mimeType}`), replay only."""
    return _chunk("user_message_chunk", message_id, content)


def tool_content(diff: dict[str, Any] | None, text: str | None) -> list[dict[str, Any]]:
    """A tool call's `content` (§7.3): its diff (`{"path", "oldText", "newText"}`) first, then its text."""
    content: list[dict[str, Any]] = [{"type": "diff", **diff}] if diff else []
    if text is not None:
        content.append({"type": "content", "content": {"type": "text", "text": text}})
    return content


def tool_call(
    tool_call_id: str, title: str, kind: str, raw_input: Any, status: str = "pending", **fields: Any
) -> dict[str, Any]:
    """`tool_call`: `pending` when the model finished its input; with its final state during a replay.
    `fields`: `content`, `rawOutput`, `locations` (None or empty: left out) and `meta` (`_meta.agentd`)."""
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": tool_call_id,
        "title": title,
        "kind": kind,
        "status": status,
        "rawInput": raw_input,
    }
    return _with_fields(update, fields)


def tool_call_update(tool_call_id: str, status: str, **fields: Any) -> dict[str, Any]:
    """`tool_call_update`: `in_progress`, or the terminal `completed` / `failed` with `content`,
    `rawOutput`, `locations` and `meta` (`_meta.agentd`: decision, decidedBy, optionId, durationMs, ...)."""
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": tool_call_id,
        "status": status,
    }
    return _with_fields(update, fields)


def _with_fields(update: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    meta = fields.pop("meta", None)
    update.update({k: v for k, v in fields.items() if v is not None and v != []})
    if meta:
        update["_meta"] = {"agentd": meta}
    return update


def plan(entries: list[dict[str, Any]], snapshot: str) -> dict[str, Any]:
    """The whole TODO list (§7.4); `snapshot`: the todo_write snapshot bytes."""
    return {"sessionUpdate": "plan", "entries": entries, "_meta": _meta(planId="main", snapshot=snapshot)}


def usage_update(
    used: int, size: int, cost: float | None = None, request: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`used`/`size` in tokens; `cost` in USD (left out when the price is unknown); `request`: the counts of
    the request just answered (`_meta.agentd.request`), left out for a replay's or a compaction's update."""
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": used, "size": size}
    if cost is not None:
        update["cost"] = {"amount": round(cost, 6), "currency": "USD"}
    if request is not None:
        update["_meta"] = {"agentd": {"request": request}}
    return update


def session_info_update(title: str | None, updated_at: str | None) -> dict[str, Any]:
    """The stored title and `updatedAt` (both sent, `null` included: null clears)."""
    return {"sessionUpdate": "session_info_update", "title": title, "updatedAt": updated_at}


def current_mode_update(mode_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}


def retry(attempt: int, delay_s: float, message: str, http_status: int | None = None) -> dict[str, Any]:
    """The `retry` update (§7.2): attempt `attempt` (1-based) failed; the next starts in `delay_s` seconds."""
    update: dict[str, Any] = {
        "sessionUpdate": "retry",
        "attempt": attempt,
        "delayS": round(delay_s, 3),
        "message": message,
    }
    if http_status is not None:
        update["httpStatus"] = http_status
    return update


def checkpoint(
    checkpoint_id: str, before: str, prompt: int, *, message_id: str | None = None, files: int | None = None,
    changed: int | None = None, not_covered: int | None = None, error: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The `checkpoint` update (§7.2): checkpoint `checkpoint_id` of kind `before` in turn `prompt`."""
    update: dict[str, Any] = {"sessionUpdate": "checkpoint", "checkpointId": checkpoint_id, "before": before,
                              "prompt": prompt}  # fmt: skip
    for key, value in (("messageId", message_id), ("files", files), ("changed", changed),
                       ("notCovered", not_covered), ("error", error)):  # fmt: skip
        if value is not None:
            update[key] = value
    return update
