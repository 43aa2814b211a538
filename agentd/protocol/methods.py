"""THE method table (PROTOCOL.md §5). LEAF: imports only agentd.protocol.

One list, used by the LSP adapter to route and validate `agentd/*` messages, to pick the wire envelope
(request or notification), and to announce `experimental.agentd.methods` in its `initialize` result.
Standard LSP methods are pygls' business and are not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from agentd.protocol import approvals, checkpoints, session

PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class Method:
    """One `agentd/*` method. `direction`: `c2s` (client to server) or `s2c`; `kind`: request or
    notification; `params`/`result`: the pydantic models (None: no result); `acp`: the ACP adapter's name."""

    name: str
    direction: Literal["c2s", "s2c"]
    kind: Literal["request", "notification"]
    params: type[BaseModel]
    result: type[BaseModel] | None
    acp: str


METHODS: tuple[Method, ...] = (
    Method("agentd/session/new", "c2s", "request", session.NewSessionParams, session.NewSessionResult,
           "session/new"),
    Method("agentd/session/load", "c2s", "request", session.LoadSessionParams, session.LoadSessionResult,
           "session/load"),
    Method("agentd/session/list", "c2s", "request", session.ListSessionsParams, session.ListSessionsResult,
           "session/list"),
    Method("agentd/session/prompt", "c2s", "request", session.PromptParams, session.PromptResult,
           "session/prompt"),
    Method("agentd/session/cancel", "c2s", "notification", session.SessionIdParams, None, "session/cancel"),
    Method("agentd/session/close", "c2s", "request", session.SessionIdParams, session.EmptyResult,
           "session/close"),
    Method("agentd/session/setMode", "c2s", "request", session.SetModeParams, session.EmptyResult,
           "session/set_mode"),
    Method("agentd/session/todos", "c2s", "request", session.SessionIdParams, session.TodosResult,
           "_agentd/session/todos"),
    Method("agentd/session/status", "c2s", "request", session.SessionIdParams, session.SessionStatus,
           "_agentd/session/status"),
    Method("agentd/session/compact", "c2s", "request", session.SessionIdParams, session.CompactResult,
           "_agentd/session/compact"),
    Method("agentd/session/checkpoints", "c2s", "request", checkpoints.CheckpointsParams,
           checkpoints.CheckpointsResult, "_agentd/session/checkpoints"),
    Method("agentd/session/rewind", "c2s", "request", checkpoints.RewindParams, checkpoints.RewindResult,
           "_agentd/session/rewind"),
    Method("agentd/session/fork", "c2s", "request", checkpoints.ForkParams, checkpoints.ForkResult,
           "_agentd/session/fork"),
    Method("agentd/session/history", "c2s", "request", session.HistoryParams, session.HistoryResult,
           "_agentd/session/history"),
    Method("agentd/session/update", "s2c", "notification", approvals.SessionNotification, None,
           "session/update"),
    Method("agentd/session/requestPermission", "s2c", "request", approvals.RequestPermissionParams,
           approvals.RequestPermissionResponse, "session/request_permission"),
)  # fmt: skip

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}

# `experimental.agentd.methods`: what a client may call, in table order (PROTOCOL.md §4.2).
CLIENT_METHODS: list[str] = [m.name for m in METHODS if m.direction == "c2s"]


def is_notification(name: str) -> bool:
    """True for the notification methods of the table."""
    m = BY_NAME.get(name)
    return m is not None and m.kind == "notification"
