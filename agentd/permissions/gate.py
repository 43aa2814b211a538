"""The permission gate: the decision order of CONTRACTS.md §5 and the denial texts of §11.

Owns: `Decision` (the one vocabulary: `decision` allow|deny, `decided_by` rule|grant|mode|user|timeout|
hook|cancel|invalid_input|unknown_tool), `Grants` (this session's "always" answers, by exact tool name),
`Gate.decide()` and `denial_text()`. One `Gate` per session, built by the composition root; the mode may
change between decisions (`Gate.mode`). Each decision writes one line
`[Permission] <tool> -> <decision> (<decided_by>)` (or `(<note>)`, see `Decision`) through the line writer.

The audit record is written by the caller (agentd.audit) from the returned `Decision`; `unknown_tool` and
`invalid_input` decisions are made before the gate (`Decision.unknown_tool()`, `Decision.invalid_input()`).

Imports agentd.clock, agentd.core.hooks, agentd.tools.base and this package; never pygls, lsprotocol,
acp or agentd.adapters.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from agentd.clock import Clock, SystemClock
from agentd.core.hooks import Hooks, HookVerdict
from agentd.permissions.approver import (
    NO_TERMINAL,
    ApprovalOption,
    ApprovalOutcome,
    ApprovalRequest,
    Approver,
    timed_out_text,
)
from agentd.permissions.prefix import command_prefix
from agentd.permissions.protected import READ_PROTECTED, ProtectedPaths
from agentd.permissions.signing import RecordSigner

if TYPE_CHECKING:
    from agentd.core.user_hooks import HookAnswer, UserHooks
from agentd.permissions.rules import (
    PATH_TOOLS,
    PartVerdict,
    Rule,
    Subject,
    subject_of,
    verdicts,
)
from agentd.protocol.approvals import permission_options
from agentd.tools.base import Preview, visible

_log = logging.getLogger("agentd")

DecisionValue = Literal["allow", "deny"]
DecidedBy = Literal[
    "rule", "grant", "mode", "user", "timeout", "hook", "cancel", "invalid_input", "unknown_tool"
]
Mode = Literal["default", "acceptEdits", "readOnly", "auto"]
GrantKind = Literal["allow_always", "reject_always"]

READ_ONLY_DENIED = frozenset({"write_file", "edit_file", "run_command"})  # step 4, with every mcp__ tool
ACCEPT_EDITS_ALLOWED = frozenset({"write_file", "edit_file"})  # step 6


class Decision(BaseModel):
    """The gate's answer for one tool_use.

    `rule`: what matched (`run_command=deny`, `default:read_file=allow`, `allow_always`, the mode, the hook
    name, `--yes`, `--allow <tool>`), or None; `detail`: the text shown in a denial (`readOnly`, a hook's
    reason, `timed out after 120 s`, `no terminal to ask`, the option id the user chose, or the whole
    model-facing text for `invalid_input` / `unknown_tool`); `option`: the approval option id when the user
    answered; `reason`: the user's rejection reason, if any; `note`: the front end's words for who answered
    (`auto-answered by --yes`, `no terminal to ask; use --yes or --allow write_file`), shown in the
    `[Permission]` line in place of `decided_by` and never audited.
    `hooks`: what each user hook answered (`{"hook", "decision", "reason", "failed"}`), for the audit log.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision: DecisionValue
    decided_by: DecidedBy
    rule: str | None = None
    detail: str = ""
    option: str | None = None
    reason: str | None = None
    note: str | None = None
    hooks: list[dict[str, Any]] | None = None

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"

    @classmethod
    def invalid_input(cls, text: str) -> Decision:
        """Denied before the order: the input failed its schema or path containment; `text` is the
        model-facing error (`invalid_arguments: ...` or the path-refused text)."""
        return cls(decision="deny", decided_by="invalid_input", detail=text)

    @classmethod
    def unknown_tool(cls, text: str) -> Decision:
        """Denied before the order: no registered tool has this name; `text` is the model-facing error."""
        return cls(decision="deny", decided_by="unknown_tool", detail=text)

    @classmethod
    def cancelled(cls) -> Decision:
        """The turn was cancelled while the call waited for its decision."""
        return cls(decision="deny", decided_by="cancel", detail="cancelled")


def denial_text(tool_name: str, decision: Decision, reason: str | None = None) -> str:
    """The `is_error` tool_result text for a denied call (CONTRACTS.md §11).

    rule/grant/mode/hook/cancel: `<tool> was denied (<decided_by>: <detail>); the call was not run.`;
    user: `The user rejected this call; it was not run.` (+ ` Reason: <reason>`); timeout:
    `No approval was given (<detail>); the call was not run.`; invalid_input/unknown_tool: the detail as is.
    Raises ValueError for an allow decision.
    """
    if decision.decision != "deny":
        raise ValueError("denial_text() needs a deny decision")
    by = decision.decided_by
    if by == "user":
        why = reason if reason is not None else decision.reason
        text = "The user rejected this call; it was not run."
        return f"{text} Reason: {why}" if why else text
    if by == "timeout":
        return f"No approval was given ({decision.detail}); the call was not run."
    if by in ("invalid_input", "unknown_tool"):
        return decision.detail
    return f"{tool_name} was denied ({by}: {decision.detail}); the call was not run."


class Grants:
    """The session's "always" answers by exact tool name (CONTRACTS.md §5), persisted with the session.

    Adding one kind for a tool removes the other kind for it."""

    def __init__(self, allow_always: Iterable[str] = (), reject_always: Iterable[str] = ()) -> None:
        self.allow_always: set[str] = set(allow_always)
        self.reject_always: set[str] = set(reject_always)

    def add(self, tool_name: str, kind: GrantKind) -> bool:
        """Add a grant; True if it was new."""
        mine, other = (
            (self.allow_always, self.reject_always)
            if kind == "allow_always"
            else (self.reject_always, self.allow_always)
        )
        other.discard(tool_name)
        if tool_name in mine:
            return False
        mine.add(tool_name)
        return True

    def to_record(self) -> dict[str, list[str]]:
        """`{"allowAlways": [...], "rejectAlways": [...]}`, sorted (deterministic bytes)."""
        return {"allowAlways": sorted(self.allow_always), "rejectAlways": sorted(self.reject_always)}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Grants:
        return cls(data.get("allowAlways", ()), data.get("rejectAlways", ()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grants):
            return NotImplemented
        return self.to_record() == other.to_record()

    def __repr__(self) -> str:
        return f"Grants({self.to_record()!r})"


def _log_line(line: str) -> None:
    _log.info(line)


def _first(parts: list[PartVerdict], action: str, source: str) -> PartVerdict | None:
    return next((v for v in parts if v.action == action and v.source == source), None)


def _label(parts: list[PartVerdict]) -> str | None:
    """The `rule` of a decision: the one label of a single-part call, else the distinct labels joined."""
    labels = list(dict.fromkeys(v.label for v in parts if v.label))
    return "; ".join(labels) if labels else None


def _offered(req: ApprovalRequest, outcome: ApprovalOutcome) -> dict[str, Any] | None:
    """The offered option the answer picked: by option id, else the first of that kind."""
    options = list(req.options) or permission_options(req.tool_name)
    wanted = outcome.option_id or outcome.option
    found = next((o for o in options if o["optionId"] == wanted), None)
    return found or next((o for o in options if o["kind"] == outcome.option), None)


class Gate:
    """Decides allow or deny for one tool_use of one session (CONTRACTS.md §5, decision order 1-8).

    `rules`: the configured `permissions.rules` (the defaults apply at step 8 when no configured rule names
    the tool); `approval_timeout_s`: seconds to wait for an answer, measured on `clock` (tests pass a
    `ManualClock`, whose sleep returns at once); `on_grant(tool_name, kind)`: called when an answer adds a
    grant, so the session can persist it; `line_writer`: receives the `[Permission]` lines.
    """

    def __init__(
        self,
        rules: Iterable[Rule] = (),
        grants: Grants | None = None,
        mode: Mode = "default",
        hooks: Hooks | None = None,
        approver: Approver | None = None,
        approval_timeout_s: float = 120.0,
        clock: Clock | None = None,
        *,
        session_id: str = "",
        line_writer: Callable[[str], None] | None = None,
        on_grant: Callable[[str, GrantKind], None] | None = None,
        roots: Sequence[Path] = (),
        protected: ProtectedPaths | None = None,
        signer: RecordSigner | None = None,
        user_hooks: UserHooks | None = None,
    ) -> None:
        self.signer = signer
        self.user_hooks = user_hooks
        self._answers: list[HookAnswer] = []
        self.rules = tuple(rules)
        self.roots = tuple(roots)
        self.protected = protected
        self.grants = grants if grants is not None else Grants()
        self.mode: Mode = mode
        self.hooks = hooks
        self.approver = approver
        self.approval_timeout_s = approval_timeout_s
        self.clock: Clock = clock or SystemClock()
        self.session_id = session_id
        self._write = line_writer or _log_line
        self._on_grant = on_grant

    def permission_record(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """A `grant` or `mode` record's payload as agentd writes it: signed (issue 12 §3)."""
        return self.signer.sign(kind, payload) if self.signer is not None else payload

    def accept_record(self, kind: str, record: Mapping[str, Any]) -> bool:
        """Whether replay may honour a `grant` or `mode` record: agentd signed it, in this place."""
        if self.signer is not None and not self.signer.accept(kind, record):
            _log.warning(
                "session %s: ignored a %s record that agentd did not write (no valid signature): %s",
                self.session_id,
                kind,
                visible(json.dumps({k: v for k, v in record.items() if k != "mac"})[:200], one_line=True),
            )
            return False
        return True

    async def decide(
        self,
        tool_name: str,
        args: Any,
        preview: Preview,
        tool_use_id: str,
        title: str | None = None,
        kind: str = "other",
    ) -> Decision:
        """The decision for a validated call; asks the approver when the order ends in "ask" (`title` and
        the tool's ACP `kind` go into the question).

        Raises `asyncio.CancelledError` if the turn is cancelled while waiting (see `Decision.cancelled`)."""
        self._answers = []
        decision = await self._decide(tool_name, args, preview, tool_use_id, title, kind)
        if self._answers:
            decision = decision.model_copy(update={"hooks": [a.to_json() for a in self._answers]})
        self.log(tool_name, decision)
        return decision

    def log(self, tool_name: str, decision: Decision) -> None:
        """Write `[Permission] <tool> -> <decision> (<decided_by>)`, or `(<note>)` when the front end
        described the answer (`auto-answered by --yes`); also used for decisions made before the gate
        (unknown_tool, invalid_input)."""
        name = visible(tool_name, one_line=True)  # an unknown tool's name comes from the model
        why = visible(decision.note, one_line=True) if decision.note else decision.decided_by
        self._write(f"[Permission] {name} -> {decision.decision} ({why})")

    async def _decide(
        self, tool_name: str, args: Any, preview: Preview, tool_use_id: str, title: str | None, kind: str
    ) -> Decision:
        subject = self._subject(tool_name, preview)
        allow_grants = [Rule(tool=t, action="allow") for t in sorted(self.grants.allow_always)]
        reject_grants = [Rule(tool=t, action="deny") for t in sorted(self.grants.reject_always)]
        network = preview.escalation == "network"
        parts = verdicts(subject, self.rules, allow_grants, reject_grants, network=network)
        denied = _first(parts, "deny", "rule") or _first(parts, "deny", "grant")
        if denied is not None:  # 1, 2
            by: DecidedBy = "grant" if denied.source == "grant" else "rule"
            return Decision(decision="deny", decided_by=by, rule=denied.label, detail=denied.label or "deny")
        verdict = await self._hook_verdict(tool_name, args, preview, tool_use_id)
        if verdict.block:  # 3
            return Decision(
                decision="deny", decided_by="hook", rule=verdict.hook or None, detail=verdict.reason
            )
        if self.mode == "readOnly" and (tool_name in READ_ONLY_DENIED or tool_name.startswith("mcp__")):  # 4
            return Decision(decision="deny", decided_by="mode", rule="readOnly", detail="readOnly")
        forced = self._forced_ask(tool_name, preview, subject)  # 4b: protected paths, leaving the sandbox
        asked_by_hook = next((a for a in self._answers if a.decision == "ask"), None)
        if forced is None and asked_by_hook is not None:  # a hook that asks (or failed): a person decides
            forced = f"hook:{asked_by_hook.hook}"
        label = _label(parts)
        if forced is None:
            if all(v.action == "allow" and v.source == "grant" for v in parts):  # 5
                return Decision(
                    decision="allow", decided_by="grant", rule=label, detail=label or "allow_always"
                )
            explicit_ask = any(v.action == "ask" and v.source == "rule" for v in parts)
            if not explicit_ask and self._mode_allows(tool_name, preview):  # 6
                return Decision(decision="allow", decided_by="mode", rule=self.mode, detail=self.mode)
            if all(v.action == "allow" for v in parts):  # 7, 8
                by = "grant" if all(v.source == "grant" for v in parts) else "rule"
                return Decision(decision="allow", decided_by=by, rule=label, detail=label or "allow")
            if verdict.allow:  # a hook's allow waives an ask, nothing more
                return Decision(
                    decision="allow",
                    decided_by="hook",
                    rule=verdict.hook or None,
                    detail=verdict.reason or "allowed",
                )
        asking = [v for v in parts if v.action != "allow"]
        ask_label = forced or _label(asking) or label
        return await self._ask(tool_name, args, preview, tool_use_id, title, ask_label, subject, forced, kind)

    async def _hook_verdict(
        self, tool_name: str, args: Any, preview: Preview, tool_use_id: str
    ) -> HookVerdict:
        """The in-process hooks' verdict, then the user hooks' answers (kept in `_answers` for the audit
        log): a user hook's deny blocks (step 3), its allow only waives an ask."""
        verdict = self.hooks.before_tool(tool_name, args) if self.hooks else HookVerdict()
        if verdict.block or self.user_hooks is None:
            return verdict
        raw = args.model_dump() if isinstance(args, BaseModel) else args
        event = {"event": "before_tool", "sessionId": self.session_id, "toolUseId": tool_use_id,
                 "tool": tool_name, "input": raw, "cwd": str(self.roots[0]) if self.roots else None,
                 "mode": self.mode}  # fmt: skip
        self._answers = await self.user_hooks.before_tool(event, tool_name, preview)
        denied = next((a for a in self._answers if a.decision == "deny"), None)
        if denied is not None:
            return HookVerdict(
                block=True, reason=denied.reason or f"denied by hook {denied.hook}", hook=denied.hook
            )
        allowed = next((a for a in self._answers if a.decision == "allow"), None)
        if allowed is not None and not verdict.allow:
            return HookVerdict(allow=True, reason=allowed.reason or "allowed", hook=allowed.hook)
        return verdict

    def _subject(self, tool_name: str, preview: Preview) -> Subject:
        command = preview.command if tool_name == "run_command" else None
        path = preview.path if tool_name in PATH_TOOLS else None
        return subject_of(tool_name, command=command, path=path, roots=self.roots)

    def _forced_ask(self, tool_name: str, preview: Preview, subject: Subject) -> str | None:
        """Asks that no rule, mode, grant or hook answers (issue 12 §1, §3): a write to a protected path
        (and a read of agentd's data dir or a credential store), a command run outside the sandbox that
        names a protected path in any word (`git diff --output=.git/hooks/x`), or a command that leaves
        the sandbox.
        Returns the label (`protected:git_internals`, `unsandboxed`) or None."""
        if self.protected is not None:
            for item in subject.items:
                if item.path is None:
                    continue
                cls = self.protected.classify(item.path)
                writes = item.tool in ("write_file", "edit_file")
                if cls is not None and (writes or cls in READ_PROTECTED):
                    return f"protected:{cls}"
        if (
            self.protected is not None
            and tool_name == "run_command"
            and preview.command
            and not preview.sandboxed
        ):
            cwd = preview.cwd or (str(self.roots[0]) if self.roots else os.getcwd())
            cls = self.protected.named_in(preview.command, cwd)  # a program's own writes (break12 P1)
            if cls is not None:
                return f"protected:{cls}"
        if preview.escalation == "outside the sandbox":
            return "unsandboxed"
        return None

    def _mode_allows(self, tool_name: str, preview: Preview) -> bool:
        """Step 6: `acceptEdits` allows edits; `auto` also allows a command that runs in the sandbox and
        asks for nothing beyond it (no network, not outside), as Codex's workspace-write mode."""
        if self.mode in ("acceptEdits", "auto") and tool_name in ACCEPT_EDITS_ALLOWED:
            return True
        return self.mode == "auto" and preview.sandboxed and preview.escalation is None

    async def _ask(
        self,
        tool_name: str,
        args: Any,
        preview: Preview,
        tool_use_id: str,
        title: str | None,
        label: str | None,
        subject: Subject,
        forced: str | None,
        kind: str = "other",
    ) -> Decision:
        raw = args.model_dump() if isinstance(args, BaseModel) else args
        protected = forced.removeprefix("protected:") if forced and forced.startswith("protected:") else None
        req = ApprovalRequest(
            session_id=self.session_id,
            tool_use_id=tool_use_id,
            tool_name=tool_name,
            title=title or preview.summary or tool_name,
            preview=preview,
            timeout_s=self.approval_timeout_s,
            raw_input=raw,
            options=tuple(self._options(tool_name, preview, subject, protected)),
            protected=protected,
            kind=kind,
        )
        outcome = await self._wait_for_answer(req)
        return self._from_outcome(tool_name, outcome, label, req)

    @staticmethod
    def _options(
        tool_name: str, preview: Preview, subject: Subject, protected: str | None
    ) -> list[dict[str, Any]]:
        """The answers offered (PROTOCOL.md §6.10): a protected path is asked every time (no "always");
        a command's "always" is its prefix (`run_command(npm test)`), and a command with no single prefix
        gets no "always" (it would allow every command)."""
        if protected is not None:
            return [o for o in permission_options(tool_name) if o["kind"] in ("allow_once", "reject_once")]
        if tool_name != "run_command" or preview.command is None:
            return permission_options(tool_name)
        prefix = command_prefix(preview.command) if subject.complete else None
        if prefix is not None:
            return permission_options(tool_name, prefix)
        return [o for o in permission_options(tool_name) if o["kind"] != "allow_always"]

    async def _wait_for_answer(self, req: ApprovalRequest) -> ApprovalOutcome:
        if self.approver is None:
            return ApprovalOutcome(option="reject_once", decided_by="timeout", detail=NO_TERMINAL)
        answer = asyncio.ensure_future(self.approver.request(req))
        timer = asyncio.ensure_future(self.clock.sleep(self.approval_timeout_s))
        try:
            done, _ = await asyncio.wait({answer, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (answer, timer):
                if not task.done():
                    task.cancel()  # a late answer is ignored
        if answer in done:
            if answer.cancelled():
                return ApprovalOutcome(option="cancelled", decided_by="cancel")
            exc = answer.exception()
            if exc is None:
                return answer.result()
            _log.warning("approval request for %s failed: %r; treated as reject_once", req.tool_name, exc)
            return ApprovalOutcome(option="reject_once")  # an error response counts as reject_once (§6.10)
        return ApprovalOutcome(
            option="reject_once", decided_by="timeout", detail=timed_out_text(self.approval_timeout_s)
        )

    def _from_outcome(
        self, tool_name: str, outcome: ApprovalOutcome, label: str | None, req: ApprovalRequest
    ) -> Decision:
        rule = outcome.rule or label
        if outcome.decided_by == "timeout":
            detail = outcome.detail or timed_out_text(self.approval_timeout_s)
            return Decision(
                decision="deny", decided_by="timeout", rule=rule, detail=detail, note=outcome.note
            )
        if outcome.decided_by == "cancel" or outcome.option == "cancelled":
            return Decision(decision="deny", decided_by="cancel", rule=rule, detail="cancelled")
        chosen = _offered(req, outcome)
        if chosen is None:  # an answer that was not offered (an "always" for a protected path): once only
            option: ApprovalOption = "allow_once" if outcome.option.startswith("allow") else "reject_once"
            chosen = {"optionId": option, "kind": option}
        kind = chosen["kind"]
        if kind in ("allow_always", "reject_always"):
            target = str(chosen.get("_meta", {}).get("agentd", {}).get("rule") or tool_name)
            self._add_grant(target, kind)
        allowed = kind in ("allow_once", "allow_always")
        return Decision(
            decision="allow" if allowed else "deny",
            decided_by="user",
            rule=rule,
            detail=chosen["optionId"],
            option=chosen["optionId"],
            reason=None if allowed else outcome.reason,
            note=outcome.note,
        )

    def _add_grant(self, tool_name: str, kind: GrantKind) -> None:
        if self.grants.add(tool_name, kind) and self._on_grant is not None:
            self._on_grant(tool_name, kind)
