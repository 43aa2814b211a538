"""User hooks (issue 12 §4): allow / deny / ask with a reason, exit code 2 = deny, the timeout, a crashing
hook (treated as ask), a deny rule beats a hook's allow, every answer audited with the hook's name; and
the trust boundary for a workspace's hooks (§5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentd.audit import AuditLog
from agentd.clock import ManualClock
from agentd.core.user_hooks import HookSpec, UserHooks
from agentd.permissions.approver import QueueApprover
from agentd.permissions.gate import Decision, Gate
from agentd.permissions.rules import Rule
from agentd.tools.base import Preview
from tests.sandbox_fixtures import marker, wait_survivors

PREVIEW = Preview(summary="Run `git push`", command="git push", cwd="/")


def spec(command: str, *, name: str = "h", matcher: str | None = None, timeout_s: float = 10.0) -> HookSpec:
    return HookSpec("before_tool", name, command, matcher, timeout_s)


def gate_with(tmp_path: Path, *specs: HookSpec, rules: tuple[Rule, ...] = (), approver: Any = None,
              lines: list[str] | None = None) -> Gate:  # fmt: skip
    write = lines.append if lines is not None else (lambda _l: None)
    return Gate(
        rules,
        None,
        "default",
        None,
        approver if approver is not None else QueueApprover.of("reject_once"),
        120,
        ManualClock(),
        session_id="s",
        line_writer=write,
        roots=[tmp_path],
        user_hooks=UserHooks(list(specs), tmp_path, environ={"PATH": "/usr/bin:/bin"}, write=write),
    )


async def decide(gate: Gate, tool: str = "run_command", preview: Preview = PREVIEW) -> Decision:
    return await gate.decide(tool, {"command": preview.command}, preview, "toolu_1")


ALLOW = """echo '{"decision": "allow", "reason": "pushes are fine"}'"""


async def test_allow_waives_the_ask_and_is_recorded(tmp_path: Path) -> None:
    lines: list[str] = []
    d = await decide(gate_with(tmp_path, spec(ALLOW, name="pusher"), lines=lines))
    assert (d.decision, d.decided_by, d.rule, d.detail) == ("allow", "hook", "pusher", "pushes are fine")
    assert d.hooks == [{"hook": "pusher", "decision": "allow", "reason": "pushes are fine", "failed": False}]
    assert lines[0] == "[Hook] before_tool pusher run_command -> allow: pushes are fine"


async def test_deny_by_json_and_by_exit_code_2(tmp_path: Path) -> None:
    by_json = await decide(gate_with(tmp_path, spec("""echo '{"decision":"deny","reason":"no pushes"}'""")))
    by_code = await decide(gate_with(tmp_path, spec("cat >/dev/null; echo 'not on main' >&2; exit 2")))
    assert [(d.decision, d.decided_by, d.detail) for d in (by_json, by_code)] == [
        ("deny", "hook", "no pushes"),
        ("deny", "hook", "not on main"),
    ]


async def test_ask_a_crash_and_the_timeout_ask_a_person(tmp_path: Path) -> None:
    mark = marker()
    cases = {
        "asks": spec("""echo '{"decision":"ask","reason":"check it"}'"""),
        "crash": spec("echo boom >&2; exit 1"),
        "garbage": spec("echo not json"),
        "slow": spec(f"sleep {mark} & sleep {mark}", timeout_s=0.5),
    }
    for name, hook in cases.items():
        approver = QueueApprover.of("allow_once")
        gate = gate_with(tmp_path, hook, rules=(Rule(tool="run_command", action="allow"),), approver=approver)
        d = await decide(gate)
        assert (d.decided_by, d.rule, len(approver.requests)) == ("user", "hook:h", 1), name
    assert wait_survivors(mark, 0) == []  # the timed-out hook and what it started are gone
    slow = await decide(gate_with(tmp_path, cases["slow"]))
    assert slow.hooks == [
        {"hook": "h", "decision": "ask", "reason": "hook h timed out after 0.5 s", "failed": True}
    ]


async def test_a_deny_rule_beats_a_hooks_allow(tmp_path: Path) -> None:
    d = await decide(
        gate_with(tmp_path, spec(ALLOW), rules=(Rule(tool="run_command(git push *)", action="deny"),))
    )
    assert (d.decision, d.decided_by, d.rule) == ("deny", "rule", "run_command(git push *)=deny")


async def test_matcher_and_event_on_stdin(tmp_path: Path) -> None:
    dump = tmp_path / "event.json"
    hooks = (
        spec(f"cat > {dump}", matcher="run_command(git push *)"),
        spec(ALLOW, name="only-reads", matcher="read_file"),
    )
    d = await decide(gate_with(tmp_path, *hooks))
    event = json.loads(dump.read_text())
    assert {k: event[k] for k in ("event", "tool", "input", "toolUseId")} == {
        "event": "before_tool", "tool": "run_command", "input": {"command": "git push"}, "toolUseId": "toolu_1"}  # fmt: skip
    assert (d.decided_by, [h["hook"] for h in d.hooks or []]) == (
        "user",
        ["h"],
    )  # the read_file hook did not run


async def test_every_hook_answer_is_audited_with_its_name(tmp_path: Path) -> None:
    gate = gate_with(tmp_path, spec("true", name="quiet"), spec(ALLOW, name="pusher"))
    d = await decide(gate)
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record("s", "toolu_1", "run_command", {"command": "git push"}, d)
    rec = log.records()[0]
    assert (rec["decidedBy"], rec["rule"], rec["hooks"]) == ("hook", "pusher", [
        {"hook": "quiet", "decision": None, "reason": "", "failed": False},
        {"hook": "pusher", "decision": "allow", "reason": "pushes are fine", "failed": False}])  # fmt: skip


async def test_observing_hooks_get_their_events(tmp_path: Path) -> None:
    """after_tool, before_model and turn_end run in the background with the event on stdin."""
    from agentd.config import Settings
    from agentd.core.factory import create_session
    from agentd.persistence.paths import DataDir
    from agentd.providers.scripted import ScriptedProvider

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    out = tmp_path / "events"
    settings = Settings.model_validate({"hooks": {
        point: [{"command": f"cat > {out}-$$", "name": point}]  # one file per run: they run concurrently
        for point in ("after_tool", "before_model", "turn_end")}})  # fmt: skip
    scenario = {"answers": [{"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}]},
                            {"reply": [{"text": "Done."}]}]}  # fmt: skip
    session = create_session(cwd=ws, settings=settings, provider=ScriptedProvider(scenario), data_dir=DataDir(tmp_path / "d"),
                             approver=QueueApprover(), clock=ManualClock(), lines=lambda _l: None)  # fmt: skip
    try:
        assert await session.prompt([{"type": "text", "text": "read a"}]) == "end_turn"
        await session.p.gate.user_hooks.drain()
    finally:
        session.close()
    events = [json.loads(p.read_text()) for p in tmp_path.glob("events-*")]
    assert sorted(e["event"] for e in events) == ["after_tool", "before_model", "before_model", "turn_end"]
    after = next(e for e in events if e["event"] == "after_tool")
    assert (after["tool"], after["isError"], "alpha" in after["output"]) == ("read_file", False, True)
    assert next(e for e in events if e["event"] == "turn_end")["stopReason"] == "end_turn"


# ---- one test per observing point, driven by the loop (issue 12 follow-up, item 3; docs/hooks.md) -----------
async def _turns(tmp_path: Path, hooks: dict[str, Any], answers: list[Any], prompts: int = 1,
                 rules: list[dict[str, str]] | None = None, cancel_when_asked: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Run `prompts` prompts of a scripted session whose user hooks dump their events; the events, in the
    order the hooks started (each dump carries a sequence number from the hook's start)."""
    import asyncio

    from agentd.config import Settings
    from agentd.core.factory import create_session
    from agentd.errors import ProviderError
    from agentd.persistence.paths import DataDir
    from agentd.providers.scripted import ScriptedProvider

    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "a.txt").write_text("alpha\n")
    out = tmp_path / "events"
    out.mkdir(exist_ok=True)
    cmd = f"cat > {out}/$(date +%s%N)-$$"
    settings = Settings.model_validate({"hooks": {p: [{"command": cmd, "name": p}] for p in hooks},
                                        "permissions": {"rules": rules or []}})  # fmt: skip
    approver = QueueApprover()
    session = create_session(cwd=ws, settings=settings, provider=ScriptedProvider({"answers": answers}),
                             data_dir=DataDir(tmp_path / "d"), approver=approver, clock=ManualClock(),
                             lines=lambda _l: None)  # fmt: skip
    try:
        for i in range(prompts):
            task = asyncio.ensure_future(session.prompt([{"type": "text", "text": f"go {i}"}]))
            if cancel_when_asked:
                await asyncio.wait_for(approver.asked.wait(), 30)
                session.cancel()
            try:
                await task
            except ProviderError:
                pass
        await session.p.gate.user_hooks.drain()
    finally:
        session.close()
    return [json.loads(p.read_text()) for p in sorted(out.iterdir(), key=lambda p: int(p.name.split("-")[0]))]


READ = {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}]}
WRITE = {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "b.txt", "content": "x"}}}]}
DONE = {"reply": [{"text": "Done."}]}


async def test_after_tool_runs_after_every_call_that_ran_and_never_for_a_refused_one(tmp_path: Path) -> None:
    """docs/hooks.md: `after_tool` runs after the tool ran, with its output; a denied call did not run."""
    events = await _turns(tmp_path, {"after_tool": 1}, [READ, WRITE, DONE],
                          rules=[{"tool": "write_file", "action": "deny"}])  # fmt: skip
    assert [(e["event"], e["tool"], e["isError"], "alpha" in e["output"]) for e in events] == [
        ("after_tool", "read_file", False, True)
    ]


async def test_before_model_runs_before_each_model_request_with_the_message_count(tmp_path: Path) -> None:
    """docs/hooks.md: `before_model` runs before each model request of a turn (three here: after each of
    two tool rounds, and the first), with the number of messages sent."""
    events = await _turns(tmp_path, {"before_model": 1}, [READ, READ, DONE])
    # observing hooks run concurrently: the order their `date` runs in is a race, so sort by what they saw
    events.sort(key=lambda e: e["messages"])
    assert [(e["event"], e["messages"]) for e in events] == [
        ("before_model", 1), ("before_model", 3), ("before_model", 5)]  # fmt: skip


async def test_turn_end_runs_however_the_turn_stops(tmp_path: Path) -> None:
    """docs/hooks.md: `turn_end` runs when the turn stops: at its end, when
    the provider fails for good (`error`; it did not run then) and when the turn is cancelled."""
    ends = await _turns(tmp_path / "end", {"turn_end": 1}, [DONE])
    failed = await _turns(tmp_path / "fail", {"turn_end": 1}, [{"fault": {"http": 400, "message": "bad"}}])
    cancelled = await _turns(tmp_path / "cancel", {"turn_end": 1}, [WRITE], cancel_when_asked=True)
    assert [[e["stopReason"] for e in events] for events in (ends, failed, cancelled)] == [
        ["end_turn"], ["error"], ["cancelled"]]  # fmt: skip
