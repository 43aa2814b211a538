"""Cost benchmark: the reference long session under several context strategies (TESTING.md §5.1).

`python -m tests.benchmarks.cost` prints one JSON line. Only the context strategy varies: the assistant
replies and tool outputs are replayed from `sessions/long-reference.json`. Each request is built by agentd's
own Context (breakpoint planner) and compaction code, checked by the emulator's independent validator, and
billed by the emulator's prompt-cache simulation (EMU-TOK-1 tokens, TTLs on a manual clock advanced by the
session's gaps). A request the emulator would reject, or a usage that breaks input + writes + reads ==
total, aborts the run and publishes nothing.

Bill = input x1 + 5-minute writes x1.25 + 1-hour writes x2 + reads x0.1 (billed input-token equivalents).
Strategies: `agentd` (its planner and compression policy), `seed_cache` (cache_control on the system block
only, agentd's compression), `nocache` (no cache_control, agentd's compression), `seed_design` (system-only
breakpoint, compression at 12,000 tokens keeping the last 8 messages), and `lower_bound` (computed on the
agentd run: every prefix sent before is read, only new tokens are written, at the 5-minute price).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.core import compaction
from agentd.core.context import Context
from agentd.core.prompts import system_blocks
from agentd.core.todos import TodoTracker
from agentd.providers.base import ModelRequest, Usage
from agentd.testing.emulator import SUMMARY_TEXT, CacheSim, ManualClock, count_tokens, validate_request
from agentd.tools.registry import ToolRegistry, default_tools
from agentd.tools.todo import TodoWrite

REFERENCE = Path(__file__).parent / "sessions" / "long-reference.json"
MODEL = "emu-sonnet"
WINDOW = 200_000
MAX_TOKENS = 8192


class _SystemOnly(Context):
    """The seed's caching: one breakpoint on the system block, none on messages."""

    def to_request(self, **kwargs: Any) -> ModelRequest:
        request = super().to_request(**kwargs)
        for m in request.messages:
            m["content"] = [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]
        return request


@dataclass
class Run:
    name: str
    requests: int = 0
    input: int = 0
    write_5m: int = 0
    write_1h: int = 0
    read: int = 0
    output: int = 0
    compactions: int = 0
    prompt_sizes: list[int] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def bill(self) -> float:
        return self.input + 1.25 * self.write_5m + 2.0 * self.write_1h + 0.1 * self.read

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "input": self.input,
            "write_5m": self.write_5m,
            "write_1h": self.write_1h,
            "read": self.read,
            "output": self.output,
            "bill": round(self.bill, 1),
            "compactions": self.compactions,
            "peak_prompt": max(self.prompt_sizes),
            "mean_prompt": round(statistics.fmean(self.prompt_sizes)),
        }


class Driver:
    """Replays the reference session under one strategy."""

    def __init__(self, ref: dict[str, Any], strategy: str, min_cacheable: int) -> None:
        self.ref, self.strategy, self.min_cacheable = ref, strategy, min_cacheable
        caching = strategy != "nocache"
        ctx_cls = _SystemOnly if strategy in ("seed_cache", "seed_design") else Context
        self.ctx = ctx_cls(prompt_caching=caching, ttl="1h")
        self.threshold = 12_000 if strategy == "seed_design" else int(WINDOW * 0.8)
        self.keep = 8
        self.todos = TodoTracker()
        self.clock = ManualClock()
        self.cache = CacheSim()
        registry = ToolRegistry([TodoWrite(), *default_tools()])
        self.tools = registry.definitions(False)
        text = system_blocks("/projects/reference")[0]["text"]
        self.system = [
            {"type": "text", "text": text + "\n\nProject instructions:\n" + ref["project_instructions"]}
        ]
        self.run = Run(strategy)
        self.n_answer = 0

    def _send(self, request: ModelRequest) -> dict[str, Any]:
        body = request.body()
        err = validate_request(body)
        if err is not None:
            raise SystemExit(
                f"cost benchmark: the emulator rejected a request ({self.strategy}): {err.message}"
            )
        result = self.cache.run(body, now=self.clock.now(), min_cacheable_tokens=self.min_cacheable)
        u = result.usage
        split = u.get("cache_creation") or {}
        if (
            u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
            != result.total
        ):
            raise SystemExit("cost benchmark: a usage invariant failed; nothing published")
        r = self.run
        r.requests += 1
        r.input += u["input_tokens"]
        r.write_5m += split.get("ephemeral_5m_input_tokens", 0)
        r.write_1h += split.get("ephemeral_1h_input_tokens", 0)
        r.read += u["cache_read_input_tokens"]
        r.prompt_sizes.append(result.total)
        if self.strategy == "agentd":
            r.bodies.append(body)
        return u

    def _reply(self, blocks: list[dict[str, Any]]) -> None:
        self.run.output += sum(count_tokens(b) for b in blocks)
        self.ctx.add_assistant(blocks)

    def _compress(self) -> None:
        if not compaction.should_compress(self.ctx, threshold_tokens=self.threshold, keep_recent=self.keep):
            return
        history = self.ctx.messages
        cut = compaction.find_cut(history, self.keep)
        if cut is None:
            return
        req = compaction.summary_request(
            history[:cut],
            model=MODEL,
            system=self.system,
            tools=self.tools,
            max_tokens=512,
            prompt_caching=self.strategy != "nocache",
        )
        self._send(req)
        self.run.output += count_tokens({"type": "text", "text": SUMMARY_TEXT})
        rebuilt = compaction.rebuild(history, cut, SUMMARY_TEXT, self.todos.carry_over_text())
        self.ctx.replace_prefix(rebuilt.cut, rebuilt.summary, rebuilt.ack)
        self.run.compactions += 1

    def _request(self) -> None:
        self._compress()
        req = self.ctx.to_request(model=MODEL, system=self.system, tools=self.tools, max_tokens=MAX_TOKENS)
        u = self._send(req)
        self.ctx.record_usage(
            Usage(
                input_tokens=u["input_tokens"],
                output_tokens=0,
                cache_creation_input_tokens=u["cache_creation_input_tokens"],
                cache_read_input_tokens=u["cache_read_input_tokens"],
            ),
            self.ctx.last_request_estimate,
        )

    def play(self) -> Run:
        for turn in self.ref["turns"]:
            self.ctx.add_user([{"type": "text", "text": turn["prompt"]}])
            for rnd in turn["rounds"]:
                self._request()
                self.n_answer += 1
                tid = f"toolu_ref_{self.n_answer}"
                blocks = ([{"type": "text", "text": rnd["text"]}] if rnd["text"] else []) + [
                    {
                        "type": "tool_use",
                        "id": tid,
                        "name": rnd["tool"]["name"],
                        "input": rnd["tool"]["input"],
                    }
                ]
                self._reply(blocks)
                if rnd["tool"]["name"] == "todo_write":
                    self.todos.write(rnd["tool"]["input"])
                self.clock.advance(rnd["gap_s"])
                self.ctx.add_user([{"type": "tool_result", "tool_use_id": tid, "content": rnd["result"]}])
            self._request()
            self._reply([{"type": "text", "text": turn["final"]}])
            self.clock.advance(turn["think_s"])
        return self.run


def _flat_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    strip = lambda b: {k: v for k, v in b.items() if k != "cache_control"}  # noqa: E731
    out = [strip(t) for t in body.get("tools", [])] + [{"__sep": "system"}]
    out += [strip(b) for b in body.get("system", [])] + [{"__sep": "messages"}]
    for m in body["messages"]:
        out += [{"__role": m["role"]}] + [strip(b) for b in m["content"]]
    return out


def lower_bound(bodies: list[dict[str, Any]]) -> float:
    """Every prefix sent before is read (x0.1); only new tokens are written, at the 5-minute price (x1.25)."""
    seen: set[str] = set()
    bill = 0.0
    for body in bodies:
        h, read, total = hashlib.sha256(), 0, 0
        hashes = []
        for block in _flat_blocks(body):
            h.update(json.dumps(block, sort_keys=True).encode())
            total += 0 if ("__sep" in block or "__role" in block) else count_tokens(block)
            key = h.hexdigest()
            hashes.append(key)
            if key in seen:
                read = total
        seen.update(hashes)
        bill += 0.1 * read + 1.25 * (total - read)
    return bill


def measure(min_cacheable: int) -> dict[str, Any]:
    ref = json.loads(REFERENCE.read_text(encoding="utf-8"))
    runs = {
        s: Driver(ref, s, min_cacheable).play() for s in ("agentd", "seed_cache", "nocache", "seed_design")
    }
    a = runs["agentd"]
    lb = lower_bound(a.bodies)
    prompt = a.input + a.write_5m + a.write_1h + a.read
    return {
        "min_cacheable_tokens": min_cacheable,
        "cache_read_share": round(a.read / prompt, 4),
        "bill_ratio_vs_seed_cache": round(a.bill / runs["seed_cache"].bill, 4),
        "bill_ratio_vs_lower_bound": round(a.bill / lb, 4),
        "bill_ratio_vs_nocache": round(a.bill / runs["nocache"].bill, 4),
        "seed_design_bill_ratio": round(a.bill / runs["seed_design"].bill, 4),
        "mean_context_tokens": round(statistics.fmean(a.prompt_sizes)),
        "seed_design_mean_context_tokens": round(statistics.fmean(runs["seed_design"].prompt_sizes)),
        "lower_bound_bill": round(lb, 1),
        "strategies": {name: r.summary() for name, r in runs.items()},
    }


def main() -> None:
    result = measure(1024)
    result["at_min_cacheable_4096"] = {k: v for k, v in measure(4096).items() if k != "strategies"}
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
