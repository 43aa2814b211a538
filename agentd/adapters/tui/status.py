"""The status line of the terminal client: model, permission mode, context used / window, cache share, cost.

Owns `status_text(status, usage)`: one line from `Session.status()` (PROTOCOL.md §6.8) and the last
`usage_update` (§7.2), and `tokens_short` (12.3k). Pure functions; imports nothing of prompt_toolkit or
rich, so the line reads the same in the live region of a turn and in the input's bottom toolbar.
"""

from __future__ import annotations

from typing import Any


def tokens_short(n: int) -> str:
    """`950`, `12.3k`, `200k`, `1.2M`: a token count at a glance."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        k = n / 1000
        return f"{k:.1f}k".replace(".0k", "k") if k < 100 else f"{k:.0f}k"
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def cache_share(totals: dict[str, Any]) -> float | None:
    """The share of the session's prompt tokens read from the prompt cache (0..1), or None before the first
    request. `totals`: `Session.status()["totals"]` (inputTokens, cacheReadTokens, cacheWriteTokens)."""
    read = int(totals.get("cacheReadTokens") or 0)
    prompt = int(totals.get("inputTokens") or 0) + read + int(totals.get("cacheWriteTokens") or 0)
    return read / prompt if prompt else None


def status_text(status: dict[str, Any], usage: dict[str, Any] | None = None, width: int | None = None) -> str:
    """`claude-sonnet-4-6 · default · ctx 12.3k/200k (6 %) · cache 87 % · $0.0421`.

    `status`: the `agentd/session/status` result; `usage`: the last `usage_update` of this session (its
    `used` is the model's own count; without one the context is the local estimate). The cost is the
    session's total in USD, left out when the model's price is unknown. `width` (columns): on a narrow
    terminal the parts that matter least are left out (`DROP_ORDER`) until the line fits, so it never
    wraps or is cut mid-word."""
    ctx = status.get("context") or {}
    used = int((usage or {}).get("used") or ctx.get("usedTokens") or 0)
    size = int((usage or {}).get("size") or ctx.get("windowTokens") or 0)
    parts = [str(status.get("model", "")), str(status.get("mode", ""))]
    if size:
        parts.append(f"ctx {tokens_short(used)}/{tokens_short(size)} ({100 * used / size:.0f} %)")
    share = cache_share(status.get("totals") or {})
    parts.append(f"cache {100 * share:.0f} %" if share is not None else "cache –")
    cost = ((usage or {}).get("cost") or status.get("costEstimate") or {}).get("amount")
    if cost is not None:
        parts.append(f"${cost:.4f}")
    return fit([p for p in parts if p], width)


DROP_ORDER = (0, 3, 1)  # positions in the full line: the model, then the cache share, then the mode


def fit(parts: list[str], width: int | None) -> str:
    """`parts` joined by ` · `, leaving out those of `DROP_ORDER` (then the last ones) until it is at most
    `width` characters long."""
    kept = dict(enumerate(parts))
    order = [i for i in DROP_ORDER if i < len(parts)] + list(range(len(parts) - 1, -1, -1))
    line = " · ".join(kept.values())
    for i in order:
        if width is None or len(line) <= width or len(kept) == 1:
            break
        kept.pop(i, None)
        line = " · ".join(kept.values())
    return line if width is None or len(line) <= width else line[: max(0, width - 1)] + "…"
