"""Compression of the active history, all of it (seed 004; CONTRACTS.md §7; cases C02, C03).

Owns: when to compress (`should_compress`), where to cut (`find_cut`), the summary request
(`summary_request`, with the flattened transcript of `flatten`), the rebuilt history (`rebuild`), the whole
step (`compress`: request, validation, the new history, the `compaction` record, the stderr line), the state
it leaves (`CompactionState`, which the Context holds and `Context.replace_prefix` updates), its record (with
the messages it kept, issue 16) and its replay (`replay`: the same `replace_prefix`, so a resumed session
rebuilds the same bytes; `restart`: the same bytes from the record alone, for a resume that starts there). Nothing here deletes
anything from disk: the session log keeps every original message; a `compaction` record says which active
messages the summary replaces. Must not import pygls, lsprotocol, acp or adapters; imports the Context only
for types (the Context imports `CompactionState` from here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentd.core.breakpoints import TTL, cache_control
from agentd.core.validate import validate_messages, validate_request
from agentd.errors import InvalidHistory
from agentd.persistence.records import CompactionRecord, restore_message
from agentd.providers.base import ModelRequest, run_with_retries

if TYPE_CHECKING:
    from agentd.core.context import Context, Message
    from agentd.core.session import Session


@dataclass
class CompactionState:
    """How the active history relates to the log: `compactions` summaries so far, which replaced
    `replaced_total` active messages in all."""

    compactions: int = 0
    replaced_total: int = 0


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


async def compress(s: Session, *, force: bool = False, cut: int | None = None) -> bool:
    """Compress `s`'s active history (CONTRACTS.md §7): when the estimate reaches the threshold, or at once
    with `force` (`Session.compact`, and `agentd.core.fit` to fit the window, which also gives the `cut`).
    Returns True when the history was replaced. The summary request fits the window too (issue 17): its
    transcript keeps only what fits.

    The summary request and the rebuilt history are validated before anything changes; the request's usage
    is accounted like any other; the original messages stay in the log and a `compaction` record says what
    the summary replaces. Raises ProviderError when the summary request fails (the history is then
    unchanged), InvalidHistory on a bug.
    """
    cfg, ctx = s.settings.context, s.context
    threshold = s.settings.compress_threshold(s.window_tokens)
    if not force and not should_compress(
        ctx, threshold_tokens=threshold, keep_recent=cfg.keep_recent_messages
    ):
        return False
    history = ctx.messages
    cut = cut if cut is not None else find_cut(history, cfg.keep_recent_messages)
    if cut is None or only_summary(history[:cut]):
        return False
    room = s.window_tokens - cfg.summary_max_tokens - ctx.static_tokens  # the summary request must fit
    request = summary_request(
        history[:cut], model=s.provider.model, system=s.system, tools=s.tool_defs,
        max_tokens=cfg.summary_max_tokens, prompt_caching=s.settings.prompt_caching,
        cache_ttl=ctx.stable_prefix_ttl(), max_chars=max(2000, room * 2),
    )  # fmt: skip
    err = validate_request(request.body())
    if err:
        raise InvalidHistory(f"agentd refused to send an invalid summary request ({err}); please report it")
    response = await run_with_retries(
        lambda _n: s.provider.stream(request, lambda _e: None),
        clock=s.clock,
        max_total_s=s.settings.retries.max_total_s,
    )
    s.account(response)
    rebuilt = rebuild(history, cut, summary_text_from(response.content), s.tracker.carry_over_text())
    candidate = [rebuilt.summary, *([rebuilt.ack] if rebuilt.ack else []), *history[cut:]]
    err = validate_messages(candidate)
    if err:
        raise InvalidHistory(f"compaction produced an invalid history ({err}); please report it")
    ctx.replace_prefix(rebuilt.cut, rebuilt.summary, rebuilt.ack)
    s.journal.write(record(s, rebuilt))
    s.lines(f"[compressed history · {len(ctx)} messages left]")
    return True


def record(s: Session, rebuilt: Rebuilt) -> CompactionRecord:
    """The `compaction` record of `rebuilt`, just applied to `s.context`: with the messages it kept (large
    tool_result texts in blobs, as in `message` records) and the todo round counter, so a resume can start
    here (issue 16)."""
    head = 1 + (rebuilt.ack is not None)
    kept = []
    for msg in s.context.messages[head:]:
        rec = s.journal.message(msg, "")
        kept.append({"message": rec.message, **({"blobs": rec.blobs} if rec.blobs else {})})
    return CompactionRecord(replaced=rebuilt.cut, summary=rebuilt.summary, ack=rebuilt.ack, kept=kept,
                            stale=s.tracker.stale_count)  # fmt: skip


def replay(context: Context, record: CompactionRecord) -> None:
    """Apply a stored `compaction` record to a replayed Context: the same bytes as when it was made."""
    context.replace_prefix(record.replaced, record.summary, record.ack)


def restart(context: Context, record: CompactionRecord, read_blob: Callable[[str], bytes]) -> None:
    """Rebuild an empty Context from a `compaction` record that holds its `kept` messages (a resume that
    starts at it, issue 16): the summary, the ack, the kept messages: the bytes `replay` gives."""
    for item in record.kept or []:
        msg = restore_message(item, read_blob)
        if msg["role"] == "assistant":
            extra = {k: v for k, v in msg.items() if k not in ("role", "content")}
            context.add_assistant(msg["content"], extra or None, adopt=True)
        else:
            context.add_user(msg["content"], adopt=True)
    context.replace_prefix(0, record.summary, record.ack)
