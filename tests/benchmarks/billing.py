"""Bills of the cost benchmark (issue 15): what the emulator served, and the same requests under other placements.

- `served(journal)`: the usage the emulator served, request by request, as a `Split` (uncached input, 5m and
  1h writes, reads) plus output tokens.
- `rebill(journal, placement, min_cacheable)`: the same requests (same bodies but for `cache_control`, same
  start times on the emulator's clock), their breakpoints replaced by `placement`, billed by a fresh
  `CacheSim`, the emulator's own prompt-cache simulation. Placements: `as_sent` (unchanged: reproduces the
  served usage, a self-check), `none`, `system` (the seed's: `{"type": "ephemeral"}` on the last system
  block), `system_last` (what Claude Code does: the system block and the last block of the messages, 5m).
- `usd(split, output, model)`: the bill in USD at the model's prices (input; 1.25x / 2x for 5m / 1h writes;
  0.1x for reads; output at the output price).
Imports the emulator and the workload driver's price table only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from agentd.core.compaction import ACK_TEXT
from agentd.testing.emulator import CacheSim, count_tokens
from tests.benchmarks.drive import MODELS
from tests.benchmarks.lower_bound import Split

EPHEMERAL = {"type": "ephemeral"}


def _usage_split(u: dict[str, Any]) -> Split:
    cc = u.get("cache_creation") or {}
    return Split(
        uncached=u["input_tokens"],
        write_5m=cc.get("ephemeral_5m_input_tokens", u["cache_creation_input_tokens"]),
        write_1h=cc.get("ephemeral_1h_input_tokens", 0),
        read=u["cache_read_input_tokens"],
    )


def served(journal: Iterable[dict[str, Any]]) -> tuple[Split, int]:
    """(input-side split, output tokens) of the usage the emulator served."""
    total, output = Split(), 0
    for e in journal:
        total = total + _usage_split(e["usage"])
        output += e["usage"]["output_tokens"]
    return total, output


def strip(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of a request body without any `cache_control`."""
    out = copy.deepcopy(body)
    for section in ("tools", "system"):
        for block in out.get(section) or []:
            block.pop("cache_control", None)
    for m in out.get("messages") or []:
        if isinstance(m.get("content"), list):
            for block in m["content"]:
                block.pop("cache_control", None)
    return out


def _system(body: dict[str, Any]) -> dict[str, Any]:
    out = strip(body)
    if out.get("system"):
        out["system"][-1]["cache_control"] = dict(EPHEMERAL)
    return out


def _system_last(body: dict[str, Any]) -> dict[str, Any]:
    out = _system(body)
    last = out["messages"][-1]["content"]
    if isinstance(last, list) and last:
        last[-1]["cache_control"] = dict(EPHEMERAL)
    return out


PLACEMENTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "as_sent": copy.deepcopy,
    "none": strip,
    "system": _system,
    "system_last": _system_last,
}


def rebill(journal: Iterable[dict[str, Any]], placement: str, min_cacheable: int) -> Split:
    """The input-side bill of the journal's requests under `placement` (module docstring)."""
    sim, total = CacheSim(), Split()
    mark = PLACEMENTS[placement]
    for e in journal:
        usage = sim.run(mark(e["body"]), now=e["clock"], min_cacheable_tokens=min_cacheable).usage
        total = total + _usage_split(usage)
    return total


def usd(split: Split, output: int, model: str) -> float:
    """USD at `model`'s prices (MODELS)."""
    price = MODELS[model]
    return (split.equivalents * price["input"] + output * price["output"]) / 1_000_000


def message_tokens(m: dict[str, Any]) -> int:
    """EMU-TOK-1 tokens of one message's blocks (the emulator's count)."""
    return sum(count_tokens(b) for b in m["content"]) if isinstance(m.get("content"), list) else 0


def context_story(journal: list[dict[str, Any]]) -> dict[str, int]:
    """Requests, compressions, the mean context the model saw (prompt tokens of the turn requests, the
    compression requests left out), the context at the end (prompt + output of the last turn request) and
    what compression took out of it, net of the summaries: the messages a compression replaced that the next
    request no longer carries, minus the summary (and acknowledgement) that replaced them."""
    turns = [e for e in journal if not e["compaction"]]
    forgotten = 0
    for k, e in enumerate(journal):
        if not e["compaction"]:
            continue
        before = next((p for p in reversed(journal[:k]) if not p["compaction"]), None)
        after = next((n for n in journal[k + 1 :] if not n["compaction"]), None)
        if before is None or after is None:
            continue
        gone, now = strip(before["body"])["messages"], strip(after["body"])["messages"]
        kept = {repr(m) for m in now}
        summary = message_tokens(now[0])
        if len(now) > 1 and now[1]["content"] == [{"type": "text", "text": ACK_TEXT}]:
            summary += message_tokens(now[1])  # the acknowledgement (CONTRACTS.md §7)
        forgotten += sum(message_tokens(m) for m in gone if repr(m) not in kept) - summary
    prompts = [_prompt(e["usage"]) for e in turns]
    last = turns[-1]["usage"] if turns else {}
    return {
        "requests": len(journal),
        "compressions": len(journal) - len(turns),
        "mean_context_tokens": round(sum(prompts) / len(prompts)) if prompts else 0,
        "context_tokens_end": (prompts[-1] if prompts else 0) + last.get("output_tokens", 0),
        "forgotten_tokens": forgotten,
    }


def _prompt(usage: dict[str, Any]) -> int:
    return sum(
        usage.get(k, 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
