"""The values of the session updates the core emits (PROTOCOL.md §7.2; issue 10 Part 1).

Owns: the computed fields, in one place, for a live turn and the `session/load` replay alike: `usage`
(`used` = the context tokens after the response, `size` = the model's window, `cost` = the session's total
when the price is known, `_meta.agentd.request` = the request's counts) and `context_usage` (the same for a
replay or a compaction, from the estimate); `tool_outcome` (`_meta.agentd` of a terminal tool update:
`decision`, `decidedBy`, `optionId`, `durationMs`, `cancelled`); `plan` (a TodoTracker as a `plan` update);
`checkpoint` (a checkpoint record as a `checkpoint` update, issue 13).
The shapes are `agentd.protocol.updates`' builders; adapters frame the result and compute nothing.
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentd.core.todos import TodoItem, TodoTracker, plan_entries, snapshot_bytes
from agentd.core.tokens import TokenTotals, price_known
from agentd.permissions.gate import Decision
from agentd.protocol import updates
from agentd.providers.base import Usage


def usage(response_usage: Usage, totals: TokenTotals, window: int, model: str) -> dict[str, Any]:
    """The `usage_update` after a model response: `used` = its context tokens (prompt + output, known
    counts), `size` = `window`, `cost` = `totals` in USD when `model` is priced, and the request's counts."""
    request = {
        "inputTokens": response_usage.input_tokens,
        "outputTokens": response_usage.output_tokens,
        "cacheReadTokens": response_usage.cache_read_input_tokens,
        "cacheWriteTokens": response_usage.cache_creation_input_tokens,
    }
    return updates.usage_update(response_usage.context_tokens, window, _cost(totals, model), request)


def context_usage(used: int, totals: TokenTotals, window: int, model: str) -> dict[str, Any]:
    """The `usage_update` with no request behind it (after a compaction, at the end of a replay): `used` is
    the context estimate in tokens."""
    return updates.usage_update(used, window, _cost(totals, model))


def _cost(totals: TokenTotals, model: str) -> float | None:
    return totals.cost_usd if price_known(model) else None


def tool_outcome(
    decision: Decision | None, *, started: bool, duration_ms: int, cancelled: bool = False
) -> dict[str, Any]:
    """`_meta.agentd` of a terminal `tool_call_update`, keys in this order: `decision` (`allow` only for a
    call that ran), `decidedBy`, `optionId` (the user's answer), `durationMs` (0 when it never ran),
    `cancelled`. A cancelled call is denied by `cancel` whatever allowed it (CONTRACTS.md §5)."""
    by = "cancel" if cancelled else (decision.decided_by if decision is not None else None)
    meta: dict[str, Any] = {}
    if by is not None:
        meta["decision"] = "allow" if started and not cancelled and decision and decision.allowed else "deny"
        meta["decidedBy"] = by
        if by == "user" and decision is not None and decision.option is not None:
            meta["optionId"] = decision.option
    meta["durationMs"] = duration_ms
    if cancelled:
        meta["cancelled"] = True
    return meta


def plan(todos: TodoTracker) -> dict[str, Any]:
    """The `plan` update of the current snapshot (PROTOCOL.md §7.4)."""
    return updates.plan(todos.plan_entries(), todos.snapshot_json())


def stored_plan(todos: list[dict[str, Any]]) -> dict[str, Any]:
    """The `plan` update of a stored snapshot (a `todos` record), as `plan` built it when it was written."""
    items = [TodoItem.model_validate(t) for t in todos]
    return updates.plan(plan_entries(items), snapshot_bytes(items))


def checkpoint(record: Mapping[str, Any]) -> dict[str, Any]:
    """The `checkpoint` update of a checkpoint record (live or replayed): `changed` counts the paths changed
    since the checkpoint before it."""
    changed = record.get("changedTotal") or len(record.get("changed") or [])
    return updates.checkpoint(
        str(record.get("id")), str(record.get("before")), int(record.get("prompt") or 0),
        message_id=record.get("messageId"), files=record.get("files"),
        changed=changed if record.get("roots") is not None else None, not_covered=record.get("notCovered"),
        error=record.get("error"),
    )  # fmt: skip
