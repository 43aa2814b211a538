"""The permission gate: decision order, answers, grants, timeout, presets, texts (CONTRACTS.md §5, §11; B12)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.core.hooks import Hooks, HookVerdict
from agentd.permissions.approver import (
    ApprovalOutcome,
    ApprovalRequest,
    PresetApprover,
    QueueApprover,
)
from agentd.permissions.gate import Decision, Gate, Grants, Mode, denial_text
from agentd.permissions.rules import DEFAULT_RULES, Rule, strictest
from agentd.protocol.approvals import permission_options
from agentd.tools.base import Preview

PREVIEW = Preview(summary="Write CHANGELOG.md", path="CHANGELOG.md", diff="--- a\n+++ b\n")
ARGS = {"path": "CHANGELOG.md", "content": "x"}


def deny(by: str, rule: str | None, detail: str, **kw: Any) -> Decision:
    return Decision(decision="deny", decided_by=by, rule=rule, detail=detail, **kw)  # type: ignore[arg-type]


def allow(by: str, rule: str | None, detail: str, **kw: Any) -> Decision:
    return Decision(decision="allow", decided_by=by, rule=rule, detail=detail, **kw)  # type: ignore[arg-type]


def hooks_with(verdict: HookVerdict | None, lines: list[str] | None = None) -> Hooks:
    hooks = Hooks(line_writer=(lines.append if lines is not None else lambda _l: None))
    hooks.add_before_tool("policy", lambda _tool, _args: verdict)
    return hooks


def make_gate(
    rules: tuple[Rule, ...] = (),
    grants: Grants | None = None,
    mode: Mode = "default",
    hooks: Hooks | None = None,
    approver: Any = None,
    lines: list[str] | None = None,
) -> Gate:
    return Gate(
        rules,
        grants,
        mode,
        hooks,
        approver if approver is not None else QueueApprover(),
        120,
        ManualClock(),
        session_id="sess_1",
        line_writer=(lines.append if lines is not None else lambda _l: None),
    )


async def decide(gate: Gate, tool: str = "write_file") -> Decision:
    return await gate.decide(tool, ARGS, PREVIEW, "toolu_01")


# -- rules -------------------------------------------------------------------------------------------


def test_default_rules() -> None:
    assert [(r.tool, r.action) for r in DEFAULT_RULES] == [
        ("read_file", "allow"),
        ("list_dir", "allow"),
        ("grep", "allow"),
        ("glob", "allow"),
        ("todo_write", "allow"),
        ("write_file", "ask"),
        ("edit_file", "ask"),
        ("run_command", "ask"),
    ]


def test_strictest_rule_wins_exact_name_only() -> None:
    rules = (
        Rule(tool="run_command", action="allow"),
        Rule(tool="run_command", action="ask"),
        Rule(tool="run_commands", action="deny"),
        Rule(tool="write_file", action="deny"),
        Rule(tool="write_file", action="allow"),
    )
    assert [strictest(rules, t) for t in ("run_command", "write_file", "read_file")] == [
        Rule(tool="run_command", action="ask"),
        Rule(tool="write_file", action="deny"),
        None,
    ]


# -- the decision order, row by row --------------------------------------------------------------------


async def test_row1_config_deny_beats_everything() -> None:
    gate = make_gate(
        rules=(Rule(tool="write_file", action="allow"), Rule(tool="write_file", action="deny")),
        grants=Grants(allow_always={"write_file"}),
        mode="acceptEdits",
        hooks=hooks_with(HookVerdict(allow=True, reason="trusted")),
    )
    assert await decide(gate) == deny("rule", "write_file=deny", "write_file=deny")


async def test_row2_reject_always_grant_beats_allow_rule_hook_allow_and_accept_edits() -> None:
    gate = make_gate(
        rules=(Rule(tool="write_file", action="allow"),),
        grants=Grants(allow_always={"x"}, reject_always={"write_file"}),
        mode="acceptEdits",
        hooks=hooks_with(HookVerdict(allow=True, reason="trusted")),
    )
    assert await decide(gate) == deny("grant", "reject_always", "reject_always")


async def test_row3_hook_block_beats_mode_and_allow_rule() -> None:
    lines: list[str] = []
    gate = make_gate(
        rules=(Rule(tool="read_file", action="allow"),),
        mode="readOnly",
        hooks=hooks_with(HookVerdict(block=True, reason="no reading secrets"), lines),
    )
    assert await decide(gate, "read_file") == deny("hook", "policy", "no reading secrets")
    assert lines == ["[Hook] before_tool policy: blocked read_file: no reading secrets"]


@pytest.mark.parametrize("tool", ["write_file", "edit_file", "run_command"])
async def test_row4_read_only_denies_writes_and_commands_even_with_allow_grant(tool: str) -> None:
    gate = make_gate(
        rules=(Rule(tool=tool, action="allow"),),
        grants=Grants(allow_always={tool}),
        mode="readOnly",
        hooks=hooks_with(HookVerdict(allow=True, reason="trusted")),
    )
    assert await decide(gate, tool) == deny("mode", "readOnly", "readOnly")


async def test_row4_read_only_keeps_reads() -> None:
    gate = make_gate(mode="readOnly")
    assert [await decide(gate, t) for t in ("read_file", "todo_write")] == [
        allow("rule", "default:read_file=allow", "default:read_file=allow"),
        allow("rule", "default:todo_write=allow", "default:todo_write=allow"),
    ]


async def test_row5_allow_always_grant_skips_the_question() -> None:
    approver = QueueApprover()
    gate = make_gate(grants=Grants(allow_always={"run_command"}), approver=approver)
    assert await decide(gate, "run_command") == allow("grant", "allow_always", "allow_always")
    assert approver.requests == []


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_row6_accept_edits_allows_edits(tool: str) -> None:
    gate = make_gate(mode="acceptEdits")
    assert await decide(gate, tool) == allow("mode", "acceptEdits", "acceptEdits")


async def test_row6_accept_edits_still_asks_for_commands() -> None:
    approver = QueueApprover.of("allow_once")
    gate = make_gate(mode="acceptEdits", approver=approver)
    assert await decide(gate, "run_command") == allow(
        "user", "default:run_command=ask", "allow_once", option="allow_once"
    )
    assert [r.tool_name for r in approver.requests] == ["run_command"]


async def test_row6_auto_allows_edits_and_sandboxed_commands_only() -> None:
    """Issue 12: the `auto` mode runs commands that stay in the sandbox without asking; a command outside
    the sandbox, or one asking for the network, still asks."""
    approver = QueueApprover.of("reject_once", "reject_once", "reject_once")
    gate = make_gate(mode="auto", approver=approver)
    boxed = Preview(summary="Run `ls`", command="ls", sandboxed=True)
    assert await gate.decide("run_command", {"command": "ls"}, boxed, "t1") == allow("mode", "auto", "auto")
    assert await decide(gate, "edit_file") == allow("mode", "auto", "auto")
    for preview in (
        Preview(summary="Run `ls`", command="ls", sandboxed=False),
        Preview(summary="Run `curl x`", command="curl x", sandboxed=True, escalation="network"),
        Preview(summary="Run `ls`", command="ls", escalation="outside the sandbox"),
    ):
        decision = await gate.decide("run_command", {"command": preview.command}, preview, "t2")
        assert decision.decided_by == "user"
    assert len(approver.requests) == 3


async def test_row7_configured_rules() -> None:
    approver = QueueApprover.of("allow_once")
    gate = make_gate(
        rules=(Rule(tool="run_command", action="allow"), Rule(tool="read_file", action="ask")),
        approver=approver,
    )
    assert [await decide(gate, "run_command"), await decide(gate, "read_file")] == [
        allow("rule", "run_command=allow", "run_command=allow"),
        allow("user", "read_file=ask", "allow_once", option="allow_once"),
    ]
    assert [r.tool_name for r in approver.requests] == ["read_file"]


async def test_row8_defaults_and_unnamed_tools_ask() -> None:
    approver = QueueApprover.of("allow_once", "allow_once")
    gate = make_gate(approver=approver)
    assert [
        await decide(gate, "list_dir"),
        await decide(gate, "edit_file"),
        await decide(gate, "web_fetch"),
    ] == [
        allow("rule", "default:list_dir=allow", "default:list_dir=allow"),
        allow("user", "default:edit_file=ask", "allow_once", option="allow_once"),
        allow("user", None, "allow_once", option="allow_once"),
    ]


# -- hooks: an allow only waives an ask (B12) -----------------------------------------------------------


async def test_hook_allow_waives_an_ask() -> None:
    lines: list[str] = []
    approver = QueueApprover()
    gate = make_gate(hooks=hooks_with(HookVerdict(allow=True, reason="ci sandbox"), lines), approver=approver)
    assert await decide(gate, "run_command") == allow("hook", "policy", "ci sandbox")
    assert (approver.requests, lines) == ([], ["[Hook] before_tool policy: allowed run_command: ci sandbox"])


async def test_hook_allow_never_beats_deny_b12() -> None:
    trusted = HookVerdict(allow=True, reason="trusted")
    results = [
        await decide(make_gate(rules=(Rule(tool="write_file", action="deny"),), hooks=hooks_with(trusted))),
        await decide(make_gate(grants=Grants(reject_always={"write_file"}), hooks=hooks_with(trusted))),
        await decide(make_gate(mode="readOnly", hooks=hooks_with(trusted))),
    ]
    assert results == [
        deny("rule", "write_file=deny", "write_file=deny"),
        deny("grant", "reject_always", "reject_always"),
        deny("mode", "readOnly", "readOnly"),
    ]


async def test_block_wins_over_another_hooks_allow_and_failing_hook_blocks() -> None:
    hooks = Hooks(line_writer=lambda _l: None)
    hooks.add_before_tool("allower", lambda _t, _a: HookVerdict(allow=True, reason="ok"))
    hooks.add_before_tool("blocker", lambda _t, _a: HookVerdict(block=True, reason="nope"))
    broken = Hooks(line_writer=lambda _l: None)

    def boom(_t: str, _a: Any) -> HookVerdict:
        raise RuntimeError("bug")

    broken.add_before_tool("broken", boom)
    assert [await decide(make_gate(hooks=hooks)), await decide(make_gate(hooks=broken))] == [
        deny("hook", "blocker", "nope"),
        deny("hook", "broken", "hook broken failed: RuntimeError('bug')"),
    ]


# -- answers and grants ----------------------------------------------------------------------------------


async def test_allow_always_adds_a_grant_used_next_time() -> None:
    granted: list[tuple[str, str]] = []
    approver = QueueApprover.of("allow_always")
    gate = make_gate(approver=approver)
    gate._on_grant = lambda tool, kind: granted.append((tool, kind))
    first, second = await decide(gate), await decide(gate)
    assert (first, second) == (
        allow("user", "default:write_file=ask", "allow_always", option="allow_always"),
        allow("grant", "allow_always", "allow_always"),
    )
    assert (gate.grants, granted, len(approver.requests)) == (
        Grants(allow_always={"write_file"}),
        [("write_file", "allow_always")],
        1,
    )


async def test_reject_always_adds_a_deny_grant() -> None:
    approver = QueueApprover.of(ApprovalOutcome(option="reject_always", reason="not today"))
    gate = make_gate(approver=approver)
    first, second = await decide(gate, "run_command"), await decide(gate, "run_command")
    assert (first, second) == (
        deny("user", "default:run_command=ask", "reject_always", option="reject_always", reason="not today"),
        deny("grant", "reject_always", "reject_always"),
    )
    assert gate.grants.to_record() == {"allowAlways": [], "rejectAlways": ["run_command"]}


async def test_reject_once_with_reason_and_the_request_sent() -> None:
    approver = QueueApprover.of(ApprovalOutcome(option="reject_once", reason="Keep entries under ## 0.3.1."))
    gate = make_gate(approver=approver)
    decision = await gate.decide("write_file", ARGS, PREVIEW, "toolu_07", title="Write CHANGELOG.md")
    assert decision == deny(
        "user",
        "default:write_file=ask",
        "reject_once",
        option="reject_once",
        reason="Keep entries under ## 0.3.1.",
    )
    assert approver.requests == [
        ApprovalRequest(
            session_id="sess_1",
            tool_use_id="toolu_07",
            tool_name="write_file",
            title="Write CHANGELOG.md",
            preview=PREVIEW,
            timeout_s=120,
            raw_input=ARGS,
            options=tuple(permission_options("write_file")),
        )
    ]
    assert gate.grants == Grants()


async def test_cancelled_outcome_denies_with_cancel() -> None:
    gate = make_gate(approver=QueueApprover.of("cancelled"))
    assert await decide(gate) == deny("cancel", "default:write_file=ask", "cancelled")


async def test_cancelling_the_turn_while_asking_propagates() -> None:
    approver = QueueApprover()
    gate = Gate(approver=approver, approval_timeout_s=120, line_writer=lambda _l: None)  # real clock, 120 s
    task = asyncio.ensure_future(decide(gate))
    await asyncio.wait_for(approver.asked.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert Decision.cancelled() == deny("cancel", None, "cancelled")


async def test_no_answer_times_out_and_a_late_answer_is_ignored() -> None:
    clock = ManualClock()
    approver = QueueApprover()  # never answers
    gate = Gate(approver=approver, approval_timeout_s=120, clock=clock, line_writer=lambda _l: None)
    decision = await decide(gate)
    approver.answer("allow_always")  # too late
    assert decision == deny("timeout", "default:write_file=ask", "timed out after 120 s")
    assert (clock.sleeps, gate.grants, len(approver.requests)) == ([120], Grants(), 1)
    assert (
        denial_text("write_file", decision)
        == "No approval was given (timed out after 120 s); the call was not run."
    )


async def test_nobody_to_ask_is_a_timeout() -> None:
    gate = Gate(line_writer=lambda _l: None)
    assert await decide(gate, "run_command") == deny(
        "timeout", "default:run_command=ask", "no terminal to ask"
    )


async def test_a_failing_approver_counts_as_reject_once() -> None:
    class Broken:
        async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
            raise ConnectionError("client went away")

    gate = make_gate(approver=Broken())
    assert await decide(gate) == deny("user", "default:write_file=ask", "reject_once", option="reject_once")


async def test_mode_change_applies_to_the_next_decision() -> None:
    gate = make_gate(mode="default", approver=QueueApprover.of("reject_once"))
    first = await decide(gate)
    gate.mode = "acceptEdits"
    assert [first, await decide(gate)] == [
        deny("user", "default:write_file=ask", "reject_once", option="reject_once"),
        allow("mode", "acceptEdits", "acceptEdits"),
    ]


# -- presets: agentd run --yes / --allow TOOL -----------------------------------------------------------


async def test_yes_answers_every_ask_as_the_user() -> None:
    fallback = QueueApprover()
    gate = make_gate(approver=PresetApprover(yes=True, allow=(), fallback=fallback))
    assert [await decide(gate, "run_command"), await decide(gate, "write_file")] == [
        allow("user", "--yes", "allow_once", option="allow_once", note="auto-answered by --yes"),
        allow("user", "--yes", "allow_once", option="allow_once", note="auto-answered by --yes"),
    ]
    assert fallback.requests == []


async def test_yes_never_overrides_a_deny() -> None:
    gate = make_gate(
        rules=(Rule(tool="run_command", action="deny"),),
        approver=PresetApprover(yes=True, allow=(), fallback=QueueApprover()),
    )
    assert await decide(gate, "run_command") == deny("rule", "run_command=deny", "run_command=deny")


async def test_allow_tool_answers_only_that_tool() -> None:
    fallback = QueueApprover.of("reject_once")
    gate = make_gate(approver=PresetApprover(yes=False, allow={"run_command"}, fallback=fallback))
    assert [await decide(gate, "run_command"), await decide(gate, "write_file")] == [
        allow(
            "user",
            "--allow run_command",
            "allow_once",
            option="allow_once",
            note="auto-answered by --allow run_command",
        ),
        deny("user", "default:write_file=ask", "reject_once", option="reject_once"),
    ]
    assert [r.tool_name for r in fallback.requests] == ["write_file"]


# -- texts and lines -------------------------------------------------------------------------------------


async def test_permission_lines_one_per_decision() -> None:
    lines: list[str] = []
    gate = make_gate(approver=QueueApprover.of("reject_once"), lines=lines)
    await decide(gate, "read_file")
    await decide(gate, "write_file")
    gate.log("nope", Decision.unknown_tool('unknown tool "nope"; available tools: read_file'))
    assert lines == [
        "[Permission] read_file -> allow (rule)",
        "[Permission] write_file -> deny (user)",
        "[Permission] nope -> deny (unknown_tool)",
    ]


def test_denial_texts() -> None:
    texts = [
        denial_text("write_file", deny("mode", "readOnly", "readOnly")),
        denial_text("run_command", deny("rule", "run_command=deny", "run_command=deny")),
        denial_text("run_command", deny("grant", "reject_always", "reject_always")),
        denial_text("read_file", deny("hook", "policy", "no reading secrets")),
        denial_text("write_file", deny("user", None, "reject_once")),
        denial_text("write_file", deny("user", None, "reject_once", reason="Not here.")),
        denial_text("write_file", deny("user", None, "reject_once"), reason="Use docs/."),
        denial_text("write_file", deny("timeout", None, "timed out after 120 s")),
        denial_text("write_file", deny("timeout", None, "no terminal to ask")),
        denial_text("todo_write", Decision.invalid_input("invalid_arguments: todos: required")),
        denial_text("nope", Decision.unknown_tool('unknown tool "nope"; available tools: read_file')),
    ]
    assert texts == [
        "write_file was denied (mode: readOnly); the call was not run.",
        "run_command was denied (rule: run_command=deny); the call was not run.",
        "run_command was denied (grant: reject_always); the call was not run.",
        "read_file was denied (hook: no reading secrets); the call was not run.",
        "The user rejected this call; it was not run.",
        "The user rejected this call; it was not run. Reason: Not here.",
        "The user rejected this call; it was not run. Reason: Use docs/.",
        "No approval was given (timed out after 120 s); the call was not run.",
        "No approval was given (no terminal to ask); the call was not run.",
        "invalid_arguments: todos: required",
        'unknown tool "nope"; available tools: read_file',
    ]
    with pytest.raises(ValueError):
        denial_text("read_file", allow("rule", None, "x"))


def test_grants_round_trip() -> None:
    grants = Grants()
    added = [grants.add("write_file", "allow_always"), grants.add("write_file", "allow_always")]
    grants.add("run_command", "reject_always")
    grants.add("edit_file", "allow_always")
    grants.add("edit_file", "reject_always")  # the later answer replaces the earlier one
    record = grants.to_record()
    assert (added, record) == (
        [True, False],
        {"allowAlways": ["write_file"], "rejectAlways": ["edit_file", "run_command"]},
    )
    assert Grants.from_record(record) == grants
