"""Between one core Session and the LSP connection that holds it (PROTOCOL.md §6.10, §7, §9, §10.2).

Owns: `SessionBridge`, built per session before the session itself and handed to the factory as its
event sink (`emit`), line writer (`line`) and `Approver` (`request`). It frames the core's updates, which
arrive in their wire shape (the core computes every field), as `agentd/session/update` notifications to the
connection that holds the session, forwards operator lines as `window/logMessage` type 4, and asks the
editor: `agentd/session/requestPermission` when the client declared `experimental.agentd.requestPermission`,
else the `window/showMessageRequest` fallback of §9. A withdrawn question (timeout, cancelled turn) is
cancelled with `$/cancelRequest` and a late answer is ignored. A bridge without a connection (a `--resume`
session not yet loaded) drops updates and denies. It reads the session only through its public API.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from typing import TYPE_CHECKING, Any

from agentd.adapters.common import outcome_of, permission_params, shown
from agentd.log import stderr_line
from agentd.text import visible

if TYPE_CHECKING:
    from agentd.adapters.lsp.host import Connection
    from agentd.core.session import Session
    from agentd.permissions.approver import ApprovalOutcome, ApprovalRequest

log = logging.getLogger("agentd.lsp.bridge")

_ids = itertools.count(1)
FALLBACK_ACTIONS = (("Allow once", "allow_once"), ("Always allow", "allow_always"), ("Deny", "reject_once"))
DIFF_MAX_LINES = 200


def _diff_counts(diff: str | None) -> tuple[int, int]:
    added = removed = 0
    for line in (diff or "").splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


class SessionBridge:
    """The sink, line writer and approver of one session (see the module docstring). `on_state`: called
    with a short text while a turn waits for something (work-done progress), set per turn."""

    def __init__(self) -> None:
        self.conn: Connection | None = None
        self.session: Session | None = None
        self.on_state: Any = None
        self._titles: dict[str, str] = {}

    def attach(self, conn: Connection | None, session: Session) -> None:
        self.conn, self.session = conn, session

    # ---- updates ------------------------------------------------------------------------------------
    def emit(self, update: dict[str, Any]) -> None:
        """The Session's event sink: notify the holding connection of the update as the core built it."""
        self._progress(update)
        if self.conn is not None and self.session is not None:
            self.conn.notify_update(self.session.id, update)

    def _progress(self, update: dict[str, Any]) -> None:
        """Work-done progress reports name the running tool (the core's `tool_call` titles)."""
        kind = update.get("sessionUpdate")
        if kind == "tool_call":
            self._titles[update["toolCallId"]] = update.get("title", "")
        elif (
            kind == "tool_call_update" and update.get("status") == "in_progress" and self.on_state is not None
        ):
            tid = update["toolCallId"]
            self.on_state(f"Running: {self._titles.get(tid, tid)}")

    # ---- operator lines -----------------------------------------------------------------------------
    def line(self, text: str) -> None:
        """stderr, and the same text as `window/logMessage` type 4 (Log) to the holding client (§10.2)."""
        stderr_line(text)
        if self.conn is not None:
            self.conn.log_message(text, 4)

    # ---- approvals (Approver protocol) ---------------------------------------------------------------
    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        from agentd.permissions.approver import ApprovalOutcome

        conn = self.conn
        if conn is None or not conn.open:
            return ApprovalOutcome(
                option="reject_once", decided_by="timeout", detail="no editor is connected"
            )
        if self.on_state is not None:
            self.on_state(f"Waiting for approval: {req.title}")
        if conn.caps.agentd_permission:
            outcome = await self._ask_agentd(conn, req)
        else:
            outcome = await self._ask_fallback(conn, req)
        if outcome.option == "cancelled" and self.session is not None:
            # a `cancelled` outcome is the user aborting the turn: handled exactly like session/cancel
            self.session.cancel()
            await asyncio.Event().wait()  # the turn's cancellation reaches the gate before any result
        return outcome

    async def _ask(self, conn: Connection, method: str, params: Any) -> Any:
        msg_id = f"agentd-{next(_ids)}"
        fut = conn.protocol.send_request(method, params, msg_id=msg_id)
        conn.outstanding[msg_id] = self.session.id if self.session else ""
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            conn.withdraw(msg_id)
            raise
        finally:
            conn.outstanding.pop(msg_id, None)

    def permission_params(self, req: ApprovalRequest) -> dict[str, Any]:
        """The params of `agentd/session/requestPermission` (PROTOCOL.md §6.10; agentd.adapters.common)."""
        assert self.session is not None
        return permission_params(self.session, req)

    async def _ask_agentd(self, conn: Connection, req: ApprovalRequest) -> ApprovalOutcome:
        from agentd.permissions.approver import ApprovalOutcome

        try:
            result = await self._ask(conn, "agentd/session/requestPermission", self.permission_params(req))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an error response counts as reject_once (§6.10)
            log.info("requestPermission for %s answered with an error: %s", req.tool_use_id, exc)
            return ApprovalOutcome(option="reject_once")
        return outcome_of(result, req)

    async def _ask_fallback(self, conn: Connection, req: ApprovalRequest) -> ApprovalOutcome:
        from agentd.permissions.approver import ApprovalOutcome

        s = self.session
        assert s is not None
        ws = os.path.basename(str(s.cwd)) or str(s.cwd)
        p = req.preview
        details = [f"agentd ({ws}): approval requested for {req.tool_name} ({req.title})",
                   "input: " + json.dumps(req.raw_input, ensure_ascii=False)]  # fmt: skip
        if p.diff:
            details.extend(p.diff.splitlines()[:DIFF_MAX_LINES])
        conn.log_message(visible("\n".join(details)), 3)  # what the user reads is escaped (H20)
        if p.command is not None:
            message = f"agentd ({ws}): {req.tool_name} wants to run `{p.command}` in {p.cwd or s.cwd}. Allow?"
        else:
            added, removed = _diff_counts(p.diff)
            what = (f"wants to write {p.path} (+{added} -{removed} lines)" if req.tool_name == "write_file"
                    else f"wants to edit {p.path} (+{added} -{removed} lines)" if req.tool_name == "edit_file"
                    else f"wants to run: {req.title}")  # fmt: skip
            message = f"agentd ({ws}): {req.tool_name} {what}. Details are in the agentd log. Allow?"
        message = shown(message)
        actions = [
            {"title": t, **({"optionId": o} if conn.caps.action_item_props else {})}
            for t, o in FALLBACK_ACTIONS
        ]
        try:
            answer = await self._ask(
                conn, "window/showMessageRequest", {"type": 2, "message": message, "actions": actions}
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("showMessageRequest for %s answered with an error: %s", req.tool_use_id, exc)
            return ApprovalOutcome(option="reject_once")
        return _fallback_outcome(answer)


def _fallback_outcome(answer: Any) -> ApprovalOutcome:
    from agentd.permissions.approver import ApprovalOutcome

    if not isinstance(answer, dict):
        return ApprovalOutcome(option="reject_once")  # dismissed (null)
    by_option = {o: o for _, o in FALLBACK_ACTIONS}
    by_title = {t: o for t, o in FALLBACK_ACTIONS}
    option = by_option.get(answer.get("optionId")) or by_title.get(answer.get("title"))  # type: ignore[arg-type]
    return ApprovalOutcome(option=option or "reject_once")  # type: ignore[arg-type]
