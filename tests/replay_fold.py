"""Adapter-neutral comparison of a live turn's session updates with a `session/load` replay's (issue 10
Part 1: the replay reuses the live turn's builders, so it shows what the live turns showed).

`live_conversation(updates)` folds what a client saw live into the items a replay sends: assistant chunks of
one message joined; each tool call's `tool_call` with its later `tool_call_update` fields applied (final
status, content, rawOutput, locations; `_meta.agentd` reduced to `decidedBy`, since `decision`, `optionId`
and `durationMs` describe that moment); plans and checkpoints as they came. `replay_conversation(updates)` takes the same
items from a replay (the opening `session_info_update` / `current_mode_update`, the prompts' user chunks, the
closing plan and the closing `usage_update` left out). Both take plain `update` dicts, whatever the transport.
"""

from __future__ import annotations

import copy
from typing import Any

Update = dict[str, Any]
CHUNKS = ("agent_message_chunk", "agent_thought_chunk")


def _join(items: list[Update], u: Update) -> None:
    prev = items[-1] if items else None
    if (
        prev is not None
        and prev["sessionUpdate"] == u["sessionUpdate"]
        and prev.get("messageId") == u.get("messageId")
    ):
        prev["content"] = {"type": "text", "text": prev["content"]["text"] + u["content"]["text"]}
    else:
        items.append({k: v for k, v in copy.deepcopy(u).items() if k != "_meta"})


def live_conversation(updates: list[Update]) -> list[Update]:
    items: list[Update] = []
    calls: dict[str, Update] = {}
    for u in updates:
        kind = u["sessionUpdate"]
        if kind in CHUNKS:
            _join(items, u)
        elif kind == "tool_call":
            calls[u["toolCallId"]] = call = copy.deepcopy(u)
            items.append(call)
        elif kind == "tool_call_update":
            call = calls[u["toolCallId"]]
            for key in ("status", "content", "rawOutput", "locations", "title", "kind"):
                if key in u:
                    call[key] = copy.deepcopy(u[key])
            by = ((u.get("_meta") or {}).get("agentd") or {}).get("decidedBy")
            if by is not None:
                call["_meta"] = {"agentd": {"decidedBy": by}}
        elif kind in ("plan", "checkpoint"):
            items.append(copy.deepcopy(u))
    return items


def replay_conversation(updates: list[Update]) -> list[Update]:
    body = [u for u in updates if u["sessionUpdate"] not in ("session_info_update", "current_mode_update")]
    assert body[-1]["sessionUpdate"] == "usage_update", "a replay ends with a usage_update"
    body = body[:-1]
    plans = [i for i, u in enumerate(body) if u["sessionUpdate"] == "plan"]
    if len(plans) >= 2 and plans[-1] == len(body) - 1:
        body = body[:-1]  # the closing plan repeats the last one
    items: list[Update] = []
    for u in body:
        if u["sessionUpdate"] in CHUNKS:
            _join(items, u)
        elif u["sessionUpdate"] != "user_message_chunk":
            items.append(copy.deepcopy(u))
    return items
