"""Crash fuzzing (issue 16 §4; TESTING.md §4.1): `crash_points`, `crash_resumes_ok`.

A seeded random schedule `kill -9`s a real daemon at `points` moments of one scripted session of `calls`
model calls (prompts of up to four calls: tool rounds with `read_file`, `todo_write`, `write_file` (asks)
and `run_command` (asks), then an answer). The kinds of moment:
- `stream`: the reply streams (the emulator holds it at a gate after three events);
- `approval`: agentd waits for the editor's answer to an approval (the editor never answers);
- `tool_use` / `tool_started` / `tool_exec`: after the tool_use is stored, after `tool_started`, after the
  tool ran and before its result is stored (failpoints `loop.after_*=kill@1`);
- `record_write`: half of a log record written (`store.append.mid=kill-mid-write@N`, N from the seed);
- `compression`: the summary request streams (the emulator's `compaction_gate`).
After each kill a new daemon loads the session and the session goes on. Each resume is ok when: the load
answers; nothing acknowledged before the kill is lost (every tool call the editor saw `completed`/`failed`
has its audit record and its one tool_result in the log; the last `plan` it saw is the stored snapshot);
nothing is duplicated (each tool_use has one tool_result, each `messageId` one `message` record); and the
first request after the resume is accepted by the emulator.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.reliability.driver import Daemon, allow_once, canary_key, isolated_env

KINDS = ("stream", "approval", "tool_use", "tool_started", "tool_exec", "record_write", "compression")
FAILPOINT = {"tool_use": "loop.after_tool_use_persisted=kill@1", "tool_started": "loop.after_tool_started=kill@1",
             "tool_exec": "loop.after_tool_exec=kill@1"}  # fmt: skip
COMPACTION_MARKER = "Summarize the conversation below"


def _answers(n: int) -> list[dict[str, Any]]:
    """Generic replies valid in any state: three tool rounds then an answer, over and over."""
    tools = [
        {"tool_use": {"name": "read_file", "input": {"path": "notes.txt"}}},
        {
            "tool_use": {
                "name": "todo_write",
                "input": {"todos": [{"content": "Keep notes", "status": "in_progress"}]},
            }
        },
        {"tool_use": {"name": "write_file", "input": {"path": "out.txt", "content": "written\n"}}},
        {"tool_use": {"name": "run_command", "input": {"command": "echo ran"}}},
    ]
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append({"reply": [{"text": f"Step {i} done. " + "More words to grow the context. " * 20}]})
        else:
            out.append({"reply": [{"text": f"Step {i}."}, tools[i % len(tools)]]})
    return out


@dataclass
class Resume:
    kind: str
    ok: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class Run:
    base: Path
    emu: Emulator
    env: dict[str, str]
    ws: Path
    options: dict[str, Any]
    sid: str = ""
    daemon: Daemon | None = None
    acked_tools: set[str] = field(default_factory=set)
    acked_plan: Any = None
    hold_approvals: bool = False
    approval_asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def answer(self, msg: dict[str, Any]) -> Any:
        if msg.get("method") == "agentd/session/requestPermission" and self.hold_approvals:
            self.approval_asked.set()
            await asyncio.Event().wait()  # never answered: the daemon dies waiting
        return await allow_once(msg)

    async def start(self, failpoints: str | None = None) -> Daemon:
        env = dict(self.env)
        if failpoints:
            env["AGENTD_FAILPOINTS"] = failpoints
        d = await Daemon.spawn(env, stderr=self.base / "stderr")
        d.answer = self.answer
        await d.initialize(self.ws, self.options)
        self.daemon = d
        return d

    def log(self) -> list[dict[str, Any]]:
        path = self.base / "data" / "sessions" / self.sid / "log.jsonl"
        out = []
        for line in path.read_bytes().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a torn last line is set aside at the next open
        return out

    def note_acks(self) -> None:
        """What the editor was told is final: completed/failed tool calls, the last plan."""
        assert self.daemon is not None
        for u in self.daemon.updates.get(self.sid, []):
            up = u.update
            if up.get("sessionUpdate") == "tool_call_update" and up.get("status") in ("completed", "failed"):
                self.acked_tools.add(str(up.get("toolCallId")))
            elif up.get("sessionUpdate") == "plan":
                self.acked_plan = up.get("entries")

    def kill(self) -> None:
        """SIGKILL the daemon, and drop its pending answers (an approval it asked is never answered)."""
        assert self.daemon is not None
        os.kill(self.daemon.pid, signal.SIGKILL)
        self.daemon.kill()


async def crash_fuzz(base: Path, points: int = 20, calls: int = 40, seed: int = 16) -> dict[str, Any]:
    """Run the schedule; `crash_points` reached, `crash_resumes_ok`, and the problems of the others."""
    rng = random.Random(seed)
    schedule = list(KINDS)[:points] + [rng.choice(KINDS) for _ in range(points - len(KINDS))]
    rng.shuffle(schedule)  # every kind at least once (when points allow), the rest at random
    ws = base / "ws"
    ws.mkdir(parents=True)
    (ws / "notes.txt").write_text("notes\n", encoding="utf-8")
    emu = Emulator(api="anthropic", scenario={"answers": _answers(calls + 4 * points + 20),
                                              "compaction_marker": COMPACTION_MARKER})  # fmt: skip
    url = emu.start()
    emu.allow_unused = True
    key = canary_key()
    options = {"model": "claude-sonnet-4-6", "permissions": {"rules": [{"tool": "run_command", "action": "ask"}]},
               "context": {"compressThresholdTokens": 6000, "keepRecentMessages": 4}}  # fmt: skip
    run = Run(base, emu, isolated_env(base, key, ANTHROPIC_BASE_URL=url), ws, options)
    resumes: list[Resume] = []
    try:
        d = await run.start()
        run.sid = await d.new_session(ws)
        for i, kind in enumerate(schedule):
            resumes.append(await _one(run, kind, rng, i))
            if _model_calls(emu) >= calls and i >= points - 1:
                break
        while _model_calls(emu) < calls:  # the rest of the 40 calls, without crashes
            assert run.daemon is not None
            await run.daemon.prompt(run.sid, "Go on.", 300)
    finally:
        if run.daemon is not None:
            await run.daemon.stop()
        emu.stop()
    return {
        "crash_points": len(resumes),
        "crash_resumes_ok": sum(r.ok for r in resumes),
        "crash_calls": _model_calls(emu),
        "crash_kinds": sorted({r.kind for r in resumes}),
        "crash_problems": [f"{r.kind}: {p}" for r in resumes for p in r.problems],
        "key": key,
    }


def _model_calls(emu: Emulator) -> int:
    return sum(1 for e in emu.journal if e.get("status") == 200 and not e.get("compaction"))


async def _one(run: Run, kind: str, rng: random.Random, n: int) -> Resume:
    """Arm `kind`, prompt until the daemon dies, resume, check."""
    emu = run.emu
    failpoints = FAILPOINT.get(kind) or (
        f"store.append.mid=kill-mid-write@{rng.randint(1, 6)}" if kind == "record_write" else None
    )
    if failpoints:  # a fresh daemon whose failpoint counts from now
        assert run.daemon is not None
        run.note_acks()
        await run.daemon.stop()
        d = await run.start(failpoints)
        await d.request("agentd/session/load", {"sessionId": run.sid, "cwd": str(run.ws)})
    d = run.daemon
    assert d is not None
    gate = f"crash{n}"
    if kind == "stream":
        nxt = emu._core.cursor  # the next answer's index
        emu._core.scenario["answers"][nxt].update(hold_after_events=3, gate=gate)
    elif kind == "compression":
        emu._core.scenario["compaction_gate"] = gate
    elif kind == "approval":
        nxt = emu._core.cursor
        emu._core.scenario["answers"][nxt]["reply"] = [
            {"type": "text", "text": "Writing."},
            {
                "type": "tool_use",
                "name": "write_file",
                "input": {"path": "held.txt", "content": "x\n"},
                "id": None,
            },
        ]
        run.hold_approvals = True
        run.approval_asked = asyncio.Event()
    text = f"Crash point {n}: go on."
    if kind == "compression":  # enough text that this turn must compress (compressThresholdTokens 6000)
        text += " Context that fills the window." * 800
    prompt = asyncio.ensure_future(d.prompt(run.sid, text, 600))
    died = asyncio.ensure_future(d.proc.wait())
    if kind in ("stream", "compression"):
        reached = await asyncio.to_thread(emu.wait_reached, gate, 300)
        if reached:
            run.note_acks()
            run.kill()
    elif kind == "approval":
        await asyncio.wait({asyncio.ensure_future(run.approval_asked.wait()), died}, timeout=300,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        run.note_acks()
        run.kill()
    await asyncio.wait({prompt, died}, timeout=600, return_when=asyncio.FIRST_COMPLETED)
    if prompt.done() and prompt.exception() is not None:  # stdout closed: the process is going
        await asyncio.wait({died}, timeout=30)
    run.note_acks()
    emu._core.scenario.pop("compaction_gate", None)
    emu._core.open_all_gates()
    run.hold_approvals = False
    if not died.done():  # the point was not reached in this prompt (e.g. no compression was due)
        await prompt
        return Resume(kind, False, ["the kill point was not reached"])
    prompt.cancel()
    return await _resume(run, kind)


async def _resume(run: Run, kind: str) -> Resume:
    result = Resume(kind, False)
    problems = result.problems
    before = len(run.emu.journal)
    d = await run.start()
    loaded = await d.request("agentd/session/load", {"sessionId": run.sid, "cwd": str(run.ws)}, 120)
    if "result" not in loaded:
        problems.append(f"load failed: {loaded.get('error')}")
        return result
    reply = await d.prompt(run.sid, "After the crash: continue.", 600)
    if "result" not in reply:
        problems.append(f"the prompt after the resume failed: {reply.get('error')}")
    after = [e for e in run.emu.journal[before:] if not e.get("compaction")]
    if not after or after[0]["status"] != 200 or after[0]["validation_error"]:
        problems.append(f"the first request after the resume was refused: {after[:1]}")
    problems += _durability(run)
    result.ok = not problems
    return result


def _durability(run: Run) -> list[str]:
    records = run.log()
    results: dict[str, int] = {}
    uses: set[str] = set()
    ids: list[str] = []
    for r in records:
        if r.get("kind") != "message":
            continue
        if r.get("messageId"):
            ids.append(r["messageId"])
        for b in (r.get("message") or {}).get("content") or []:
            if b.get("type") == "tool_result":
                results[b["tool_use_id"]] = results.get(b["tool_use_id"], 0) + 1
            elif b.get("type") == "tool_use":
                uses.add(b["id"])
    out = [f"tool_use {t} has {n} tool_results" for t, n in results.items() if n != 1]
    out += [f"messageId {m} stored twice" for m in sorted({m for m in ids if ids.count(m) > 1})]
    out += [f"acknowledged tool call {t} lost" for t in sorted(run.acked_tools) if t not in results]
    audit_path = run.base / "data" / "sessions" / run.sid / "audit.jsonl"
    audited = [
        json.loads(x).get("toolUseId") or json.loads(x).get("tool_use_id")
        for x in audit_path.read_bytes().splitlines()
        if x.strip()
    ]
    out += [
        f"acknowledged tool call {t} has no audit record" for t in sorted(run.acked_tools) if t not in audited
    ]
    out += [
        f"tool_use {t} audited {audited.count(t)} times"
        for t in sorted(set(audited))
        if t and audited.count(t) > 1
    ]
    todos = [r for r in records if r.get("kind") == "todos"]
    if run.acked_plan is not None and not todos:
        out.append("the acknowledged plan is not stored")
    return out
