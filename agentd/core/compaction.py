"""Compression of the active history (seed 004; CONTRACTS.md §7; cases C02, C03).

Owns: when to compress (`should_compress`), where to cut (`find_cut`), the summary request
(`summary_request`), the flattened transcript (`flatten`), and the rebuilt history (`rebuild`).
Must not import pygls, lsprotocol, acp or adapters. Nothing here deletes anything from disk: the session
log keeps every original message; a `compaction` record says which active messages the summary replaces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentd.core.breakpoints import TTL
from agentd.core.context import Context, Message, cache_control
from agentd.providers.base import ModelRequest

SUMMARY_INSTRUCTION = (
    "Summarize the conversation below in one paragraph. Keep tool calls, file paths and any facts the next "
    "turn needs. Do not call tools. No preamble."
)
SUMMARY_PREFIX = "[Summary of earlier conversation]\n"
ACK_TEXT = "Understood, continuing from here."
TOOL_RESULT_FLATTEN_CHARS = 2000


def find_cut(messages: list[Message], keep_recent: int) -> int | None:
    """Index of the first kept message, or None when there is nothing safe to compress.

    Start at `len(messages) - keep_recent` and walk earlier while the message at the cut is a user message
    carrying tool_result blocks (a tool_use and its tool_result are never separated). A cut at 0 means no
    compression; so does a history of at most `keep_recent` messages.
    """
    if len(messages) <= keep_recent:
        return None
    cut = len(messages) - keep_recent
    while (
        cut > 0
        and messages[cut]["role"] == "user"
        and any(b.get("type") == "tool_result" for b in messages[cut]["content"])
    ):
        cut -= 1
    return cut if cut > 0 else None


def only_summary(messages: list[Message]) -> bool:
    """True when `messages` are just an earlier summary (and its ack): summarising them again would only
    re-summarise the summary, once per request, while the kept tail alone is over the threshold."""
    for m in messages:
        first = m["content"][0] if m["content"] else {}
        text = first.get("text", "") if first.get("type") == "text" else ""
        head = m["role"] == "user" and text.startswith(SUMMARY_PREFIX)
        ack = m["role"] == "assistant" and text == ACK_TEXT and len(m["content"]) == 1
        if not (head or ack):
            return False
    return True


def should_compress(context: Context, *, threshold_tokens: int, keep_recent: int) -> bool:
    """Estimated context >= threshold and the history is longer than `keep_recent` messages."""
    return len(context) > keep_recent and context.estimated_tokens() >= threshold_tokens


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        text = "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    else:
        text = str(content or "")
    if len(text) > TOOL_RESULT_FLATTEN_CHARS:  # a stub that states the size first (issue 17)
        text = (
            f"[{len(text)} characters; the first {TOOL_RESULT_FLATTEN_CHARS}:] "
            + text[:TOOL_RESULT_FLATTEN_CHARS]
        )
    return text


def flatten(messages: list[Message]) -> str:
    """The old messages as readable text, not JSON: role, text, tool name + input, truncated results."""
    lines: list[str] = []
    for m in messages:
        role = "User" if m["role"] == "user" else "Assistant"
        for b in m["content"]:
            kind = b.get("type")
            if kind == "text":
                lines.append(f"{role}: {b.get('text', '')}")
            elif kind == "tool_use":
                args = json.dumps(b.get("input", {}), ensure_ascii=False, sort_keys=True)
                lines.append(f"{role} called {b.get('name')} {args}")
            elif kind == "tool_result":
                status = "error" if b.get("is_error") else "result"
                lines.append(f"Tool {status}: {_result_text(b)}")
            else:
                lines.append(f"{role}: [{kind}]")
    return "\n".join(lines)


def summary_request(
    old: list[Message],
    *,
    model: str,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    max_tokens: int,
    prompt_caching: bool = True,
    cache_ttl: TTL = "1h",
    max_chars: int = 0,
) -> ModelRequest:
    """The one extra request: the session's exact tools and system (so it reads their cache), one user
    message = instruction + blank line + flattened old messages (only their last `max_chars` characters when
    `max_chars` is set). `tool_choice` is left unset.
    `cache_ttl`: the TTL of its one breakpoint, on the stable prefix (`Context.stable_prefix_ttl()`)."""
    sys_blocks = [dict(b) for b in system]
    tool_defs = [dict(t) for t in tools]
    if prompt_caching and sys_blocks:
        sys_blocks[-1]["cache_control"] = cache_control(cache_ttl)
    elif prompt_caching and tool_defs:  # as Context.to_request: without a system the last tool is the anchor
        tool_defs[-1]["cache_control"] = cache_control(cache_ttl)
    transcript = flatten(old)
    if max_chars and len(transcript) > max_chars:  # the summary request must fit the window too (issue 17)
        omitted = len(transcript) - max_chars
        transcript = (
            f"[the first {omitted} characters of the transcript are omitted]\n" + transcript[omitted:]
        )
    text = SUMMARY_INSTRUCTION + "\n\n" + transcript
    return ModelRequest(
        model=model,
        system=sys_blocks,
        tools=tool_defs,
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
        max_tokens=max_tokens,
        purpose="summary",
    )


def summary_text_from(content: list[dict[str, Any]]) -> str:
    """The summary from the reply: its text blocks joined; a tool_use in the reply is ignored."""
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text").strip()


@dataclass
class Rebuilt:
    """The replacement head: `summary` message, optional `ack` message, and `cut` (messages replaced)."""

    cut: int
    summary: Message
    ack: Message | None


def rebuild(messages: list[Message], cut: int, summary: str, carry_over: str | None) -> Rebuilt:
    """`[user: "[Summary of earlier conversation]\\n<summary>" + carry-over]`, then the ack only when
    the kept part starts with a user message (CONTRACTS.md §7, §11)."""
    text = SUMMARY_PREFIX + (summary or "(no summary was produced)") + (carry_over or "")
    ack = None  # nothing kept (a history compressed whole to fit the window): the summary alone
    if cut < len(messages) and messages[cut]["role"] == "user":
        ack = {"role": "assistant", "content": [{"type": "text", "text": ACK_TEXT}]}
    return Rebuilt(cut=cut, summary={"role": "user", "content": [{"type": "text", "text": text}]}, ack=ack)
