"""`agentd/session/requestPermission` (PROTOCOL.md §6.10) and the `agentd/session/update` envelope (§7.1).
LEAF: imports only agentd.protocol.

Owns: the permission request params, its options (the four of every tool, and the command-prefix option
that "always" offers for `run_command`), the response (an ACP `RequestPermissionResponse`), and
`SessionNotification`, the params of `agentd/session/update`.

Clients render the options a request carries, in order, and answer with the chosen `optionId`; they never
assume the four base options (§6.10), so an option added here needs no client change.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentd.protocol.base import WireModel

OptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


PREFIX_OPTION_ID = "allow_always_prefix"


class PermissionOption(WireModel):
    """One answer the user can pick (ACP `PermissionOption`). `optionId` is unique within the request; the
    four base options use their kind as id. An option that adds a permission rule carries it in
    `_meta.agentd.rule` (the rule form of CONTRACTS.md §5, e.g. `run_command(npm test)`) and, for a
    command prefix, the prefix in `_meta.agentd.prefix`."""

    option_id: str
    name: str
    kind: OptionKind


def prefix_option(tool_name: str, prefix: str) -> dict[str, Any]:
    """The "always allow this command prefix" option (§6.10): kind `allow_always`, id `allow_always_prefix`,
    the rule `<tool>(<prefix>)` under `_meta.agentd`. `prefix`: the command's leading words (`npm test`)."""
    return {
        "optionId": PREFIX_OPTION_ID,
        "name": f"Always allow `{prefix}` commands in this session",
        "kind": "allow_always",
        "_meta": {"agentd": {"rule": f"{tool_name}({prefix})", "prefix": prefix}},
    }


def permission_options(tool_name: str, prefix: str | None = None) -> list[dict[str, Any]]:
    """The options of §6.10, in the order clients show them. Without `prefix`: the four base options, ids
    equal to kinds. With `prefix` (a command that reduces to one prefix): "always" is the prefix option,
    so it never allows every command."""
    always: dict[str, Any] = (
        prefix_option(tool_name, prefix)
        if prefix
        else {
            "optionId": "allow_always",
            "name": f"Always allow {tool_name} in this session",
            "kind": "allow_always",
        }
    )
    return [
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        always,
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
