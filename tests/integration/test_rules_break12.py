"""A deny rule on `rm` holds through `run_command` in the auto mode (break12): the review's forms go through
the session's toolbox (validation, the sandboxed preview, the gate, the audit record, the run) with the
sandbox active and `permissions.default_mode = "auto"`, which runs sandboxed commands without asking; none
deletes the file. A command whose program only a run reveals asks instead; with nobody to answer, it is
refused. Without the rule the same harness does delete it (the check can fail)."""

from __future__ import annotations

import json

import pytest

from agentd.audit import AuditLog
from agentd.clock import ManualClock
from agentd.core.hooks import Hooks
from agentd.core.toolbox import Toolbox
from agentd.permissions.gate import Gate
from agentd.permissions.rules import Rule
from agentd.tools.base import ToolOutput
from agentd.tools.registry import ToolRegistry
from agentd.tools.shell import RunCommand
from tests.sandbox_fixtures import Box, needs_bwrap

FORMS = [
    'bash -c "rm f"', "sh -c 'rm f'", 'eval "rm f"', "R=rm; $R f", "${R:-rm} f", "/bin/rm f",
    "command rm f", "env rm f", "echo f | xargs rm", "find . -name f -delete", "find . -name f -exec rm {} +",
    'sh <<< "rm f"', "echo cm0gZgo= | base64 -d | sh", "nice rm f", "timeout 5 rm f", "sudo rm f",
    "busybox rm f", "python3 -c \"import os; os.remove('f')\"", "X=1 rm f", "{r,}m f",
]  # fmt: skip


@pytest.fixture
def auto_box(box: Box) -> Box:
    needs_bwrap()
    return box


def toolbox(box: Box, *rules: Rule) -> Toolbox:
    gate = Gate(rules, None, "auto", None, None, 120, ManualClock(), session_id="s", line_writer=lambda _l: None,
                roots=[box.ws], protected=box.protected())  # fmt: skip
    audit = AuditLog(box.data / "audit.jsonl")
    return Toolbox(ToolRegistry([RunCommand()]), box.ctx("auto"), gate, audit, Hooks(lambda _l: None), "s")


async def call(tb: Toolbox, command: str, n: int) -> tuple[str, str, ToolOutput]:
    """One run_command tool_use through the toolbox: (decision, decided_by, output)."""
    c = tb.prepare({"id": f"toolu_{n}", "name": "run_command", "input": {"command": command}})
    await tb.check(c)
    assert c.preview is not None and c.preview.sandboxed, c.preview
    d = await tb.decide(c)
    out = await tb.run(c) if d.allowed else tb.refused(c, d)
    return d.decision, d.decided_by, out


@pytest.mark.parametrize("action", ["deny", "ask"])
async def test_break12_no_form_of_rm_runs_under_a_rule_in_auto_mode(auto_box: Box, action: str) -> None:
    """break12: `run_command(rm)` as deny (or ask) rule, the auto mode, the sandbox: 0 files deleted."""
    tb = toolbox(auto_box, Rule(tool="run_command(rm)", action=action))  # type: ignore[arg-type]
    target = auto_box.ws / "f"
    outcomes = {}
    for n, command in enumerate(FORMS):
        target.write_text("keep\n")
        decision, by, out = await call(tb, command, n)
        outcomes[command] = (decision, by, target.exists())
        assert out.is_error, (command, out.content)
    assert {c: o for c, o in outcomes.items() if o[0] != "deny" or not o[2]} == {}
    by = {c: o[1] for c, o in outcomes.items()}
    if action == "deny":  # what names rm is denied by the rule; what only a run reveals asks (refused here)
        assert by["sudo rm f"] == by["find . -name f -delete"] == by['bash -c "rm f"'] == "rule"
    assert by["R=rm; $R f"] == by["echo cm0gZgo= | base64 -d | sh"] == "timeout"
    records = [json.loads(line) for line in (auto_box.data / "audit.jsonl").read_text().splitlines()]
    assert len(records) == len(FORMS)


async def test_break12_without_the_rule_the_auto_mode_runs_them(auto_box: Box) -> None:
    """The control: no rule on rm, the auto mode runs the same forms in the sandbox, and the file goes."""
    tb = toolbox(auto_box)
    target = auto_box.ws / "f"
    for n, command in enumerate(('bash -c "rm f"', "R=rm; $R f", "find . -name f -delete")):
        target.write_text("keep\n")
        decision, by, out = await call(tb, command, n)
        assert (decision, by, out.is_error, target.exists()) == ("allow", "mode", False, False), command


SECOND_REVIEW = [
    "rm{,} f", "r\\\nm f", "time { rm f; }", "trap -- 'rm f' EXIT", "env - rm f", "x='a[$(rm f)]'; echo $((x))",
    "let 'x=a[$(rm f)]'", "declare -a 'x=($(rm f))'", "PS4='$(rm f)'; set -x; true", "mapfile -C 'rm f #' -c 1 a <<< x",
    "printf -v 'a[$(rm f)]' x", "x='$(rm f)'; echo ${x@P}",
]  # fmt: skip


async def test_break12_second_review_forms_do_not_run_rm(auto_box: Box) -> None:
    """break12 R1/R2 through run_command: the sandbox, the auto mode, deny `run_command(rm)` and an allow for
    every builtin used (`printf *`, `echo *`...): the forms bash reads as rm, or that keep rm in a string it
    evaluates, never delete the file."""
    allows = [Rule(tool=f"run_command({n} *)", action="allow") for n in ("printf", "echo", "let", "declare",
                                                                         "mapfile", "set", "true", "trap", "time")]  # fmt: skip
    tb = toolbox(auto_box, Rule(tool="run_command(rm)", action="deny"), *allows)
    target = auto_box.ws / "f"
    left = {}
    for n, command in enumerate(SECOND_REVIEW):
        target.write_text("keep\n")
        decision, _by, _ = await call(tb, command, n)
        left[command] = (decision, target.exists())
    assert {c: o for c, o in left.items() if o != ("deny", True)} == {}
