"""The toolbox: what it takes to run one tool_use (CONTRACTS.md §5, §11; ARCHITECTURE.md "One turn").

Owns: `Toolbox` (one per session: the tool registry, the tools' `ToolContext`, the permission gate, the audit
log, the `after_tool` hooks) and its steps for one call, in order: `prepare` (registry lookup and input
validation: the title and kind are known), `check` (path containment and the preview), `decide` (the gate,
or the refusal decided before it: unknown tool, invalid input, a repeated tool_use id) and `run`.
`audit_once` is the one place that writes an audit record: every tool_use gets exactly one, whether it ran,
was refused, was cancelled or was cut off by a crash (`started` and `audited` say what happened to whom).
Persisting results and notifying belong to the loop (agentd.core.loop). Must not import pygls, lsprotocol,
acp or adapters.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from agentd import failpoints
from agentd.audit import AuditLog
from agentd.core.hooks import Hooks
from agentd.core.replies import repeat_text
from agentd.permissions.gate import Decision, Gate, denial_text
from agentd.persistence.paths import off_loop
from agentd.tools.base import PathRefused, Preview, Tool, ToolContext, ToolOutput
from agentd.tools.registry import ToolRegistry

log = logging.getLogger("agentd.loop")


@dataclass
class Call:
    """One tool_use on its way through the toolbox. `refusal`: the decision made before the gate (set by
    `prepare` or `check`), with `outcome` for the audit record (`refused_outside_workspace`)."""

    id: str
    name: str
    raw: Any
    title: str
    kind: str
    tool: Tool | None = None
    args: Any = None
    preview: Preview | None = None
    refusal: Decision | None = None
    outcome: str | None = None


class Toolbox:
    """The tools of one session and the rules around running them (module docstring)."""

    def __init__(
        self,
        registry: ToolRegistry,
        ctx: ToolContext,
        gate: Gate,
        audit: AuditLog,
        hooks: Hooks,
        session_id: str,
    ) -> None:
        self.registry = registry
        self.ctx = ctx
        self.gate = gate
        self.audit = audit
        self.hooks = hooks
        self.session_id = session_id
        self.started: set[str] = set()  # tool_use ids whose tool began running (`tool_started` records)
        self.audited: set[str] = set()  # tool_use ids audited by this process
        self.invalid_inputs: dict[
            str, str
        ] = {}  # tool_use id -> invalid_arguments text (a reply's odd input, H19)

    # ---- the steps of one call ---------------------------------------------------------------------
    def prepare(self, tu: dict[str, Any], repeat_of: str | None = None) -> Call:
        """Look the tool up and validate the input (no I/O). `repeat_of`: the id this tool_use repeated in
        its reply (case C16): refused, never run."""
        tid, name, raw = str(tu["id"]), str(tu.get("name", "")), tu.get("input")
        tool = self.registry.get(name)
        call = Call(id=tid, name=name, raw=raw, title=name, kind=tool.kind if tool else "other", tool=tool)
        if repeat_of is not None:
            call.refusal = Decision.invalid_input(repeat_text(repeat_of))
        elif tool is None:  # a call recovered from text says so its own way (counted as a malformed round)
            names = ", ".join(self.registry.names())
            text = self.invalid_inputs.pop(tid, None)
            call.refusal = Decision.unknown_tool(text or f'unknown tool "{name}"; available tools: {names}')
        else:
            args, err = tool.validate(raw, self.ctx)
            if tid in self.invalid_inputs:
                args, err = None, self.invalid_inputs.pop(tid)
            call.args = args
            call.title = tool.title(args) if args is not None else name
            if args is None or err is not None:
                call.refusal = Decision.invalid_input(err or "invalid_arguments")
        return call

    async def check(self, call: Call) -> None:
        """Path containment and the preview the approval shows. A refused path, or a failure here (a path
        swapped for a link between the two, H19), refuses the call; odd input never ends the turn."""
        if call.refusal is not None or call.tool is None:
            return
        try:
            call.tool.check(call.args, self.ctx)
            call.preview = await call.tool.preview(call.args, self.ctx)
        except PathRefused as refused:
            call.refusal, call.outcome = Decision.invalid_input(refused.text()), "refused_outside_workspace"
        except Exception as exc:  # the details are in the log
            log.exception("tool %s: preparing the call failed", call.name)
            text = f"{call.name} could not prepare the call: {type(exc).__name__}: {exc}"
            call.refusal = Decision.invalid_input(text)

    async def decide(self, call: Call) -> Decision:
        """The decision (the refusal, or the gate's, which may ask the user), audited once before anything
        runs. A cancel while waiting is audited as `cancel` and re-raised."""
        if call.refusal is not None:
            self.gate.log(call.name, call.refusal)
            await self._audit_off_loop(call, call.refusal, call.outcome)
            return call.refusal
        assert call.preview is not None
        try:
            decision = await self.gate.decide(
                call.name, call.args, call.preview, call.id, title=call.title, kind=call.kind
            )
        except asyncio.CancelledError:
            self.gate.log(call.name, Decision.cancelled())
            self.audit_once(call.id, call.name, call.raw, Decision.cancelled())
            raise
        await self._audit_off_loop(call, decision)
        return decision

    async def _audit_off_loop(self, call: Call, decision: Decision, outcome: str | None = None) -> None:
        """`audit_once` with the write and fsync in a worker thread (issue 16: nothing blocks the event loop);
        returns once the record is durable. The id is claimed first, so a cancel meanwhile does not audit
        it again (the thread still finishes the record); a failed write releases it and raises."""
        if call.id in self.audited:
            return
        self.audited.add(call.id)
        write = asyncio.ensure_future(off_loop(self.audit.record, self.session_id, call.id, call.name, call.raw, decision,
                                  outcome=outcome))  # fmt: skip
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:
            raise
        except BaseException:
            self.audited.discard(call.id)
            raise

    def refused(self, call: Call, decision: Decision) -> ToolOutput:
        """The `is_error` output of a call that does not run (CONTRACTS.md §11 texts)."""
        return ToolOutput(content=denial_text(call.name, decision), is_error=True)

    async def run(self, call: Call) -> ToolOutput:
        """Run an allowed call. A tool's own failure becomes the model's error (details in the log); the
        `after_tool` hooks see the output."""
        assert call.tool is not None
        try:
            out = await call.tool.run(call.args, self.ctx)
        except PathRefused as refused:
            out = ToolOutput(content=refused.text(), is_error=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("tool %s failed", call.name)
            out = ToolOutput(content=f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        failpoints.hit("loop.after_tool_exec", f"{self.session_id}/{call.id}")
        await self.hooks.prepare_after_tool(call.name, out)
        self.hooks.after_tool(call.name, out)
        return out

    # ---- the audit rule ------------------------------------------------------------------------------
    def audit_once(
        self, tool_use_id: str, name: str, raw: Any, decision: Decision, outcome: str | None = None
    ) -> None:
        """Append the audit record of one tool_use (fsynced) unless it has one: every tool_use gets exactly
        one (CONTRACTS.md §5), also one cut off by a cancel or a crash before its decision (`cancel`)."""
        if tool_use_id in self.audited:
            return
        self.audit.record(self.session_id, tool_use_id, name, raw, decision, outcome=outcome)
        self.audited.add(tool_use_id)

    def audit_interrupted(self, uses: dict[str, dict[str, Any]], ids: list[str]) -> None:
        """Audit, as cancelled, the tool_uses among `ids` (found in `uses`, id -> block) that have no record
        yet, in this process or on disk (a crash before their decision)."""
        on_disk = self.audit.tool_use_ids() if ids else set()
        self.audited |= on_disk
        for tid in ids:
            if tid in uses:
                self.audit_once(tid, uses[tid].get("name", ""), uses[tid].get("input"), Decision.cancelled())
