"""EMU-TOK-1, the emulator's deterministic token counter (TESTING.md §3.6).

Owns `canon`, `block_tokens` and `count_tokens`. The counter needs no model files and can be recomputed by
hand: a block costs `max(1, ceil(utf8_len(canon(block)) / 4))` after removing `cache_control`. Imports only
the standard library; no agentd module may import this one outside `agentd/testing/` (agentd's own
estimator is tested *against* it, it never calls it).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["as_blocks", "block_tokens", "canon", "count_tokens", "prompt_sections", "strip_cache_control"]


def canon(value: Any) -> str:
    """The canonical JSON text of `value`: sorted keys, no spaces, non-ASCII kept (TESTING.md §3.6)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def as_blocks(content: Any) -> list[Any]:
    """A message `content` or `system` value as a block list: a string counts as one text block."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return [content]


def strip_cache_control(block: Any) -> Any:
    """A copy of `block` without its `cache_control` (also inside a `tool_result`'s block list).

    Only those two levels are stripped: a key named `cache_control` deeper down (a tool's JSON schema
    property, a tool input) is data and stays.
    """
    if not isinstance(block, dict):
        return block
    out = {k: v for k, v in block.items() if k != "cache_control"}
    if out.get("type") == "tool_result" and isinstance(out.get("content"), list):
        out["content"] = [
            {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
            for b in out["content"]
        ]
    return out


def block_tokens(block: Any) -> int:
    """EMU-TOK-1 tokens of one block (dict), a string (one text block) or any JSON value."""
    if isinstance(block, str):
        block = {"type": "text", "text": block}
    size = len(canon(strip_cache_control(block)).encode("utf-8"))
    return max(1, math.ceil(size / 4))


def prompt_sections(body: dict[str, Any], api: str = "anthropic") -> list[tuple[str, Any]]:
    """The prompt of a request body as `(section, block)` pairs in cache order: tools -> system -> messages.

    Anthropic: each tool, each system block and each message content block is one block; the section of a
    message block is `"messages.<i>.<role>"`. OpenAI (`api="openai"`): each tool and each whole message
    dict is one block (chat messages have no block-level cache control).
    """
    out: list[tuple[str, Any]] = [("tools", t) for t in body.get("tools") or []]
    if api == "openai":
        out += [(f"messages.{i}", m) for i, m in enumerate(body.get("messages") or [])]
        return out
    out += [("system", b) for b in as_blocks(body.get("system"))]
    for i, msg in enumerate(body.get("messages") or []):
        role = msg.get("role") if isinstance(msg, dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        out += [(f"messages.{i}.{role}", b) for b in as_blocks(content)]
    return out


def count_tokens(body_or_block: Any, *, api: str = "anthropic") -> int:
    """EMU-TOK-1 count, in tokens.

    - a request body (a dict with `messages`): the prompt total, the sum over tools, system blocks and
      message content blocks (OpenAI: tools and whole messages), with no hidden overhead;
    - a list: the sum over its items;
    - a string: one text block; any other dict: one block.
    """
    if isinstance(body_or_block, dict) and "messages" in body_or_block:
        return sum(block_tokens(b) for _, b in prompt_sections(body_or_block, api))
    if isinstance(body_or_block, list):
        return sum(block_tokens(b) for b in body_or_block)
    return block_tokens(body_or_block)
