"""The provider fault matrix against the emulators (issue 16 §5): `fault_cases`, `fault_cases_ok`.

Per API (the Messages API and chat completions), one daemon over stdio and one emulator; each case is its
own session and its own emulator conversation (TESTING.md §3.3 `conversations`): a turn meets the fault,
then a second prompt in the same session must be accepted by the emulator. A case is ok when:
- the turn ends in a successful retry (`end_turn` with the scripted text, the retries shown as `retry`
  updates whose delays stay within `retries.maxTotalS`), or, for a 400 and for exhausted retries, in one
  clear error (`-32015`, a message that says what happened; for exhausted retries how long it retried);
- nothing is stored twice (every `messageId` once, the reply text once) and the history stays valid (every
  request of the conversation, the second prompt's included, was accepted: status 200, no validation error).

The daemon runs with `retries.requestTimeoutS` 3, `readTimeoutS` 2 and `maxTotalS` 10; the laptop-sleep
case moves the daemon's clock (`AGENTD_TEST_CLOCK_FILE`) and the emulator's by 2 h while a stream is held.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from agentd.testing.emulator.clock import ManualClock
from tests.reliability.driver import Daemon, canary_key, isolated_env

MAX_TOTAL_S = 10.0
LONG = "This reply streams in many small pieces, so that a fault can cut it in the middle of the text. " * 2
OK_TEXT = "Recovered."


def ok(text: str = OK_TEXT) -> dict[str, Any]:
    return {"reply": [{"text": text}]}


def fault(status: int, **headers: str) -> dict[str, Any]:
    return {"fault": {"http": status, **({"headers": headers} if headers else {})}}


@dataclass
class Case:
    name: str
    answers: list[dict[str, Any]]
    error: bool = False  # the turn must end in one clear error (no successful retry)
    during: Callable[[Emulator, Path, str], Any] | None = None  # run while the turn is in flight
    apis: tuple[str, ...] = ("anthropic", "openai")


def _sleep_2h(emu: Emulator, clock_file: Path, gate: str) -> None:
    """The laptop sleeps 2 h while the reply streams: both clocks jump, then the stream dies."""
    assert emu.wait_reached(gate, 60), "the stream never reached the gate"
    clock_file.write_text("7200", encoding="utf-8")
    assert isinstance(emu.clock, ManualClock)
    emu.clock.advance(7200.0)
    emu.gate(gate).open()


CASES = [
    Case("429 with retry-after", [fault(429, **{"retry-after": "1"}), ok()]),
    Case("429 without retry-after", [fault(429), ok()]),
    Case("500", [fault(500), ok()]),
    Case("529 overloaded", [fault(529), ok()]),
    Case("timeout (a silent server)", [{**ok(), "hold_after_events": 0, "gate": "silent"}, ok()]),
    Case("reset before the first byte", [{**ok(), "reset_before_first_byte": True}, ok()]),
    Case("reset mid-stream", [{"reply": [{"text": LONG}], "drop_after_events": 6}, ok()]),
    Case("overloaded_error mid-stream", [{"reply": [{"text": LONG}], "stream_error_after_events": 6}, ok()]),
    Case("malformed SSE", [{"reply": [{"text": LONG}], "malformed_after_events": 5}, ok()]),
    Case("400", [fault(400)], error=True),
    Case("endless stream cut by the client's timeout", [{"reply": [{"text": LONG}], "endless_after_events": 4}, ok()]),
    Case("laptop sleep: the clock jumps 2 h mid-turn",
         [{"reply": [{"text": LONG}], "hold_after_events": 4, "gate": "sleep", "drop_after_events": 6}, ok()],
         during=lambda emu, f, _m: _sleep_2h(emu, f, "sleep")),
    Case("retries exhausted", [fault(529, **{"retry-after": "4"}) for _ in range(3)], error=True),
]  # fmt: skip


@dataclass
class Outcome:
    api: str
    case: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    retry_s: float = 0.0
    key: str = ""  # the daemon's canary API key, for the secrets sweep

    def as_json(self) -> dict[str, Any]:
        return {"api": self.api, "case": self.case, "ok": self.ok, "retry_s": self.retry_s,
                "problems": self.problems}  # fmt: skip


def _scenario(cases: list[Case]) -> dict[str, Any]:
    return {
        "conversations": {
            f"[case {i:02d}]": [*c.answers, ok("Second prompt answered.")] for i, c in enumerate(cases)
        }
    }


async def run_matrix(base: Path, apis: tuple[str, ...] = ("anthropic", "openai")) -> list[Outcome]:
    """Every case of `CASES` on every API; one `Outcome` each."""
    out: list[Outcome] = []
    for api in apis:
        out += await _run_api(base / api, api, [c for c in CASES if api in c.apis])
    return out


async def _run_api(base: Path, api: str, cases: list[Case]) -> list[Outcome]:
    base.mkdir(parents=True)
    ws = base / "ws"
    ws.mkdir()
    clock_file = base / "clock"
    clock_file.write_text("0", encoding="utf-8")
    emu = Emulator(api=api, scenario=_scenario(cases), clock=ManualClock(0))
    url = emu.start()
    emu.allow_unused = True
    key = canary_key()
    url_env = {"ANTHROPIC_BASE_URL": url} if api == "anthropic" else {"OPENAI_BASE_URL": url + "/v1"}
    env = isolated_env(base, key, AGENTD_TEST_CLOCK_FILE=str(clock_file), **url_env)
    daemon = await Daemon.spawn(env, stderr=base / "stderr")
    options = {"provider": api, "model": "claude-sonnet-4-6" if api == "anthropic" else "gpt-4.1",
               "retries": {"maxTotalS": MAX_TOTAL_S, "requestTimeoutS": 3, "readTimeoutS": 2}}  # fmt: skip
    outcomes = []
    try:
        await daemon.initialize(ws, options)
        for i, case in enumerate(cases):
            outcomes.append(await _run_case(daemon, emu, clock_file, api, case, f"[case {i:02d}]", base))
            outcomes[-1].key = key
            clock_file.write_text("0", encoding="utf-8")
    finally:
        await daemon.stop()
        emu.stop()
    return outcomes


async def _run_case(
    daemon: Daemon, emu: Emulator, clock_file: Path, api: str, case: Case, marker: str, base: Path
) -> Outcome:
    result = Outcome(api, case.name, False)
    sid = await daemon.new_session(base / "ws")
    turn = asyncio.ensure_future(daemon.prompt(sid, f"{marker} Say something.", 180))
    if case.during is not None:
        await asyncio.to_thread(case.during, emu, clock_file, marker)
    first = await turn
    updates = [u.update for u in daemon.updates.get(sid, [])]
    second = await daemon.prompt(sid, f"{marker} Once more.", 120)
    retries = [u for u in updates if u.get("sessionUpdate") == "retry"]
    result.retry_s = round(sum(float(u.get("delayS", 0)) for u in retries), 3)
    problems = result.problems
    if case.error:
        err = first.get("error") or {}
        if err.get("code") != -32015 or not err.get("message"):
            problems.append(f"expected one -32015 error, got {first}")
        if case.name == "retries exhausted" and "s of retries" not in str(err.get("message")):
            problems.append(f"the error does not say how long it retried: {err.get('message')!r}")
    else:
        if (first.get("result") or {}).get("stopReason") != "end_turn":
            problems.append(f"the turn did not end in a successful retry: {first}")
        if not retries:
            problems.append("no retry update was shown")
        text = _final_text(updates)
        if not text.startswith(OK_TEXT):
            problems.append(f"the editor's text after retractions is {text[:80]!r}")
    if result.retry_s > MAX_TOTAL_S:
        problems.append(f"retried {result.retry_s} s, above maxTotalS {MAX_TOTAL_S}")
    if (second.get("result") or {}).get("stopReason") != "end_turn":
        problems.append(f"the next prompt failed: {second}")
    problems += _journal_problems(emu.journal, marker)
    problems += _log_problems(base / "data" / "sessions" / sid / "log.jsonl")
    result.ok = not problems
    return result


def _final_text(updates: list[dict[str, Any]]) -> str:
    """The assistant text the editor shows at the end: chunks by messageId, retracted messages dropped."""
    texts: dict[str, str] = {}
    for u in updates:
        if u.get("sessionUpdate") != "agent_message_chunk":
            continue
        meta = (u.get("_meta") or {}).get("agentd") or {}
        if meta.get("retracts"):
            texts.pop(meta["retracts"], None)
        mid = u.get("messageId") or meta.get("messageId") or ""
        texts[mid] = texts.get(mid, "") + (u.get("content") or {}).get("text", "")
    return "".join(texts.values())


def _journal_problems(journal: list[dict[str, Any]], marker: str) -> list[str]:
    out = []
    for e in journal:
        if marker in json.dumps(e.get("body")) and e.get("validation_error"):
            out.append(f"request #{e['seq']} was invalid: {e['validation_error']}")
    return out


def _log_problems(log: Path) -> list[str]:
    """Nothing stored twice: each messageId once, no assistant message repeated back to back."""
    records = [json.loads(line) for line in log.read_bytes().splitlines() if line.strip()]
    messages = [r for r in records if r.get("kind") == "message"]
    ids = [r.get("messageId") for r in messages if r.get("messageId")]
    out = [f"messageId {i} stored twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    bodies = [json.dumps(r.get("message"), sort_keys=True) for r in messages if (r.get("message") or {}).get("role") == "assistant"]  # fmt: skip
    out += [f"assistant message stored twice: {a[:80]}" for a, b in itertools.pairwise(bodies) if a == b]
    return out
