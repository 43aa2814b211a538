"""Fitting every request into the window (issue 17: "never die of a full window").

Owns: `tool_output_bytes(text, window)` (the token cap of one tool result), `output_reserve`, `fits`,
`fit_cut`, `make_room` (compress whatever the history holds, however short, once the next request would
not fit or the provider said it did not) and `no_room(s, exc)` (the error when the system prompt and the tools
alone do not fit). Must not import pygls, lsprotocol, acp or adapters.

Rules:
- One tool result is at most `window / TOOL_OUTPUT_SHARE` tokens, counted pessimistically (`dense_tokens`: a
  digit or a non-ASCII character may be a token of its own, as in Qwen's and most BPE vocabularies; other ASCII
  three characters a token), so 32 KiB of CJK or hex text cannot fill a 16k window. The byte cap of
  `tools.output_max_bytes` still applies; the result keeps head and tail with the size stated.
- A request fits when the estimated context plus the reply's reserve (`max_output_tokens`, at most a quarter
  of the window) is within the window. Before a request that would not fit, the history is compressed: first
  with the usual cut (`context.keep_recent_messages` kept); when that is not enough, with a shorter kept tail:
  the last round alone (the last user message and the assistant message whose tool_uses it answers) when that
  is at most half the window, else nothing is kept and the summary replaces the whole history (its tool
  results appear as stubs that state their size first).
- A `ContextExceeded` error from any provider compresses once with the shorter tail for that request, after
  lowering the window to what the error states (else below the estimate that was refused), then the request
  is retried.
- When that fails and the system prompt and tool definitions alone (with room for a short reply) exceed the
  window, no history can fit: the turn ends with an error that says so, with the figures and what to change,
  instead of the server's "reduce the length of the messages" (the user's prompt may be one word).
"""

from __future__ import annotations

import logging
from typing import Any

from agentd.core.compaction import compress
from agentd.core.tokens import estimate_messages
from agentd.errors import ContextExceeded

log = logging.getLogger("agentd.fit")

TOOL_OUTPUT_SHARE = 4
OUTPUT_SHARE = 4


def dense_tokens(text: str) -> int:
    """A pessimistic token count of `text`: digits and non-ASCII characters one token each, the rest 1 per 3."""
    dense = sum(1 for ch in text if ch.isdigit() or ord(ch) > 127)
    return dense + (len(text) - dense + 2) // 3


def tool_output_bytes(text: str, window: int) -> int:
    """The byte cap that keeps `text` within `window / TOOL_OUTPUT_SHARE` pessimistic tokens (0: no cap needed)."""
    budget = max(256, window // TOOL_OUTPUT_SHARE)
    tokens = dense_tokens(text)
    if tokens <= budget:
        return 0
    size = len(text.encode("utf-8"))
    return max(1024, int(size * budget / tokens))


def output_reserve(max_output_tokens: int, window: int) -> int:
    """Tokens kept free for the reply: `max_output_tokens`, at most a quarter of the window."""
    return min(max_output_tokens, window // OUTPUT_SHARE)


def fits(s: Any) -> bool:
    """Whether the next request of session `s` is estimated to fit its window."""
    need = s.context.estimated_tokens() + output_reserve(s.settings.max_output_tokens, s.window_tokens)
    return need <= s.window_tokens


def _last_round(messages: list[dict[str, Any]]) -> int:
    """Index of the first message of the last round: the last message, or the assistant message before it
    when the last message answers its tool_uses."""
    last = len(messages) - 1
    if last > 0 and any(b.get("type") == "tool_result" for b in messages[last]["content"]):
        return last - 1
    return last


def fit_cut(messages: list[dict[str, Any]], window: int) -> int | None:
    """Where to cut to fit: before the last round when it is at most half the window, else the whole history.
    None when there is nothing to compress (no messages)."""
    if not messages:
        return None
    start = _last_round(messages)
    if start > 0 and estimate_messages(messages[start:]) <= window // 2:
        return start
    return len(messages)


MIN_REPLY_TOKENS = 256  # the least room a reply needs, for `no_room`


def no_room(s: Any, exc: ContextExceeded) -> ContextExceeded:
    """The error to end a turn with after `exc` was refused despite compression: a clear one when the system
    prompt and tools of session `s` alone (`static_tokens`, plus `MIN_REPLY_TOKENS`) exceed its window, else
    `exc` unchanged."""
    fixed = int(s.context.static_tokens)
    if fixed + MIN_REPLY_TOKENS <= s.window_tokens:
        return exc
    message = (
        f"The system prompt and tool definitions alone are about {fixed} tokens, but the model's context window "
        f"is {s.window_tokens} tokens, so no conversation fits ({exc.message}). Serve the model with a larger "
        "context (llama-server -c, Ollama num_ctx, vLLM --max-model-len), or make the fixed part smaller "
        "(tools.terse_descriptions = true, fewer MCP servers, shorter AGENTS.md instructions)."
    )
    return ContextExceeded(
        message, provider=exc.provider, http_status=exc.http_status, window_tokens=exc.window_tokens
    )


async def make_room(s: Any, exceeded: ContextExceeded | None = None) -> bool:
    """Compress the history of `s` so that the next request fits (module docstring). `exceeded`: the
    provider's refusal, whose stated window (or the refused estimate) lowers the session's window first.
    Returns True when the history was replaced. A failing summary request raises ProviderError."""
    if exceeded is not None:
        refused = s.context.estimated_tokens()
        lower = exceeded.window_tokens or int(refused * 0.8)
        if lower < s.window_tokens:
            log.info(
                "the provider refused %d estimated tokens: window %d -> %d", refused, s.window_tokens, lower
            )
            s.window_tokens = lower
    done = False
    if exceeded is None:  # the usual cut first (keep_recent_messages): it keeps more of the recent work
        done = bool(await compress(s, force=True))
        if done and fits(s):
            return True
    cut = fit_cut(s.context.messages, s.window_tokens)
    if cut is None:
        return done
    return bool(await compress(s, force=True, cut=cut)) or done
