"""Drive the real agentd daemon through one workload, over LSP, against the emulator (issue 15).

`drive(workload, options, base)` builds the workspace, starts the Messages-API emulator in this process (its
clock is a `ManualClock`), spawns `python -m agentd` on stdio with the real anthropic SDK pointed at the
emulator over HTTP, and plays the workload turn by turn: before each prompt the user's think time passes on both
clocks (the emulator's, and the daemon's through the test-only `AGENTD_TEST_CLOCK_FILE`), then the prompt is sent
and its result awaited. The emulator answers from the workload's script; compression requests get its fixed
summary. A `resume` stops the daemon, lets the pause pass, and loads the session in a new daemon.
Approval requests are answered "allow once" (the user of the benchmark approves everything).

The result keeps the emulator's journal (what it accepted and the usage it served) and the usage the product
reported for every request (`usage_update`); `check()` raises when the two disagree in number or in any count,
when a turn did not end normally, or when the emulator saw an invalid request or an unused answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.core.compaction import SUMMARY_INSTRUCTION
from agentd.testing.emulator import Emulator, ManualClock
from tests.benchmarks.daemon import Client
from tests.benchmarks.workloads import materialize

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 200_000
# The models the workloads use: Anthropic's published prices in USD per million tokens (input, output) and
# minimum cacheable prompt (prompt-caching docs): Sonnet 4.5 1,024 tokens, Opus 4.5 4,096 (as the seed says).
MODELS: dict[str, dict[str, float]] = {
    "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "min_cacheable": 1024},
    "claude-opus-4-5": {"input": 5.0, "output": 25.0, "min_cacheable": 4096},
}


@dataclass
class Played:
    """What one run of a workload produced."""

    journal: list[dict[str, Any]]
    reported: list[dict[str, Any]]  # the product's per-request usage over LSP (camelCase), in order
    stops: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Raise RuntimeError unless the run is valid and the product's usage is the emulator's."""
        bad = [e["seq"] for e in self.journal if e["status"] != 200]
        if self.problems or bad or any(s != "end_turn" for s in self.stops):
            raise RuntimeError(
                f"invalid run: problems {self.problems}, failed requests {bad}, stops {self.stops}"
            )
        if len(self.reported) != len(self.journal):
            raise RuntimeError(
                f"agentd reported {len(self.reported)} requests, the emulator served {len(self.journal)}"
            )
        for e, r in zip(self.journal, self.reported, strict=True):
            u = e["usage"]
            served = {
                "inputTokens": u["input_tokens"],
                "outputTokens": u["output_tokens"],
                "cacheReadTokens": u["cache_read_input_tokens"],
                "cacheWriteTokens": u["cache_creation_input_tokens"],
            }
            if r != served:
                raise RuntimeError(f"request #{e['seq']}: agentd reported {r}, the emulator served {served}")


def scenario(workload: dict[str, Any]) -> dict[str, Any]:
    """The emulator's script: the workload's replies in order, the model's cache minimum, compression marked."""
    answers = [{"reply": reply} for turn in workload["turns"] for reply in turn["replies"]]
    model = workload["model"]
    return {
        "models": {
            model: {"min_cacheable_tokens": int(MODELS[model]["min_cacheable"]), "context_window": WINDOW}
        },
        "answers": answers,
        "compaction_marker": SUMMARY_INSTRUCTION[:60],
    }


def _env(base: Path, url: str, clock_file: Path) -> dict[str, str]:
    home = base / "home"
    (home / ".config" / "agentd").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "AGENTD_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        AGENTD_CONFIG_DIR=str(home / ".config/agentd"),
        AGENTD_DATA_DIR=str(base / "data"),
        AGENTD_TEST_CLOCK_FILE=str(clock_file),
        ANTHROPIC_API_KEY="sk-ant-emu-" + secrets.token_hex(16),
        ANTHROPIC_BASE_URL=url,
        PYTHONPATH=str(ROOT),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    return env


class _Daemon:
    """One `python -m agentd` on stdio, initialized for the workspace with the run's options."""

    def __init__(self, client: Client, ws: Path) -> None:
        self.client, self.ws, self.ids = client, ws, 100

    @classmethod
    async def start(cls, env: dict[str, str], ws: Path, options: dict[str, Any], log: Path) -> _Daemon:
        with log.open("ab") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentd", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=err, env=env, cwd=str(ws), limit=1 << 24)  # fmt: skip
        d = cls(Client(proc), ws)
        caps = {"experimental": {"agentd": {"protocolVersion": 1, "requestPermission": True}}}
        await d.call("initialize", {"processId": None, "rootUri": ws.as_uri(), "capabilities": caps,
                                    "workspaceFolders": [{"uri": ws.as_uri(), "name": ws.name}],
                                    "initializationOptions": options})  # fmt: skip
        await d.client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return d

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        self.ids += 1
        await self.client.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        reply = await self.client.reply(self.ids, timeout=900)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def stop(self) -> None:
        await self.call("shutdown", {})
        await self.client.send({"jsonrpc": "2.0", "method": "exit"})
        await asyncio.wait_for(self.client.proc.wait(), 60)

    def usages(self) -> list[dict[str, Any]]:
        """The per-request usage of every `usage_update` so far (`_meta.agentd.request`, PROTOCOL.md)."""
        out = []
        for u in self.client.updates:
            update = u.get("update", {})
            request = (update.get("_meta") or {}).get("agentd", {}).get("request")
            if update.get("sessionUpdate") == "usage_update" and request is not None:
                out.append(request)
        return out


async def drive(workload: dict[str, Any], options: dict[str, Any], base: Path) -> Played:
    """Play `workload` with agentd configured by `options` (initializationOptions, camelCase) in `base`."""
    ws = base / "ws"
    ws.mkdir(parents=True)
    materialize(workload, ws)
    clock, clock_file, offset = ManualClock(), base / "clock", 0.0
    clock_file.write_text("0", encoding="utf-8")
    emu = Emulator(api="anthropic", scenario=scenario(workload), clock=clock)
    reported: list[dict[str, Any]] = []
    stops: list[str] = []
    try:
        env = _env(base, emu.start(), clock_file)
        log = base / "agentd.stderr"
        opts = {"model": workload["model"], **options}
        daemon = await _Daemon.start(env, ws, opts, log)
        sid = (await daemon.call("agentd/session/new", {"cwd": str(ws)}))["sessionId"]
        resume = workload.get("resume") or {}
        for k, turn in enumerate(workload["turns"]):
            pause = turn["pause_s"]
            if k == resume.get("before"):
                reported += daemon.usages()
                await daemon.stop()
                pause += resume["pause_s"]
                daemon = await _Daemon.start(env, ws, opts, log)
                await daemon.call("agentd/session/load", {"sessionId": sid, "cwd": str(ws)})
                daemon.client.updates.clear()  # the history the load replays is not new usage
            offset += pause
            clock.advance(pause)
            clock_file.write_text(repr(offset), encoding="utf-8")
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": turn["prompt"]}]}
            stops.append((await daemon.call("agentd/session/prompt", prompt))["stopReason"])
        reported += daemon.usages()
        await daemon.stop()
        return Played(emu.journal, reported, stops, emu.problems)
    finally:
        emu.stop()


def run(workload: dict[str, Any], options: dict[str, Any], base: Path) -> Played:
    """`drive()` in a fresh event loop; the run is checked (`Played.check`)."""
    played = asyncio.run(drive(workload, options, base))
    dump(played, base / "journal.json")
    played.check()
    return played


def dump(played: Played, path: Path) -> None:
    """Keep a run's journal and usages next to its workspace (kept with `--keep`)."""
    path.write_text(json.dumps({"journal": played.journal, "reported": played.reported}), encoding="utf-8")
