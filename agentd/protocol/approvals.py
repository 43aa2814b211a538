"""`agentd/session/requestPermission` (PROTOCOL.md §6.10) and the `agentd/session/update` envelope (§7.1).
LEAF: imports only agentd.protocol.

Owns: the permission request params, its four options, the response (an ACP `RequestPermissionResponse`),
and `SessionNotification`, the params of `agentd/session/update`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentd.protocol.base import WireModel

OptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionOption(WireModel):
    option_id: str
    name: str
    kind: OptionKind


def permission_options(tool_name: str) -> list[dict[str, str]]:
    """The four options of §6.10; option ids equal their kinds."""
    return [
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        {
            "optionId": "allow_always",
            "name": f"Always allow {tool_name} in this session",
            "kind": "allow_always",
        },
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {
            "optionId": "reject_always",
            "name": f"Always reject {tool_name} in this session",
            "kind": "reject_always",
        },
    ]


class ToolCallSummary(WireModel):
    tool_call_id: str
    title: str
    kind: str
    status: str
    raw_input: Any = None
    content: list[dict[str, Any]] | None = None
    locations: list[dict[str, Any]] | None = None


class RequestPermissionParams(WireModel):
    session_id: str
    tool_call: ToolCallSummary
    options: list[PermissionOption]


class SelectedOutcome(WireModel):
    outcome: Literal["selected"]
    option_id: str


class CancelledOutcome(WireModel):
    outcome: Literal["cancelled"]


class RequestPermissionResponse(WireModel):
    outcome: SelectedOutcome | CancelledOutcome = Field(discriminator="outcome")


class SessionNotification(WireModel):
    """The params of `agentd/session/update`: `{sessionId, update}` (`_meta.agentd.replay` on replays)."""

    session_id: str
    update: dict[str, Any]
