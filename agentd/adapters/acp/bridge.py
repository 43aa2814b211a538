"""Between one core Session and the ACP client (PROTOCOL.md §4.5, §6.10, §7, §10.2).

Owns: `AcpBridge`, built per session before the session itself and handed to the factory as its event sink
(`emit`), line writer (`line`) and `Approver` (`request`). It sends the core's updates as they come, in their
wire shape (the core computes every field), as `session/update` notifications (an agentd-only variant such as
`retry` is not sent: ACP v1 has none; a `current_mode_update` is followed by the `config_option_update` of
the mode, `config_options()`, for clients that show modes as config options); the accounting and permission lines go to stderr only (ACP has no log
channel); and it asks the client with `session/request_permission`, the params built by
`agentd.adapters.common.permission_params` from the options the gate offered. An answer that picks an option
offered is the user's decision; an error answer, or one of the wrong shape, is `reject_once`; `cancelled`
is a turn cancel (as `session/cancel`). A question the core withdraws (the approval timeout, a cancelled
turn) is cancelled with `$/cancel_request` and a late answer is ignored. A bridge without a client (a
`--resume` session not yet loaded) drops updates and denies. It reads the session only through its public
API.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentd.adapters.common import outcome_of, permission_params
from agentd.log import stderr_line
from agentd.protocol import session as ps

if TYPE_CHECKING:
    from agentd.adapters.acp.host import AcpHost
    from agentd.core.session import Session
    from agentd.permissions.approver import ApprovalOutcome, ApprovalRequest

log = logging.getLogger("agentd.acp.bridge")

ACP_UPDATES = frozenset({  # the session/update variants of ACP v1 agentd sends (AcpHost.notify)
    "user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update",
    "plan", "available_commands_update", "current_mode_update", "config_option_update", "session_info_update",
    "usage_update",
})  # fmt: skip


class AcpBridge:
    """The sink, line writer and approver of one session (see the module docstring)."""

    def __init__(self, host: AcpHost | None) -> None:
        self.host = host
        self.session: Session | None = None

    def attach(self, host: AcpHost | None, session: Session) -> None:
        self.host, self.session = host, session

    # ---- updates ------------------------------------------------------------------------------------
    def emit(self, update: dict[str, Any]) -> None:
        """The Session's event sink: one `session/update` notification, now."""
        if self.host is None or self.session is None:  # the host drops what ACP v1 has no variant for
            return
        self.host.notify(self.session.id, update)
        if update.get("sessionUpdate") == "current_mode_update":  # clients of config options see it there too
            options = config_options(update["currentModeId"])
            self.host.notify(
                self.session.id, {"sessionUpdate": "config_option_update", "configOptions": options}
            )

    # ---- operator lines -----------------------------------------------------------------------------
    def line(self, text: str) -> None:
        """The accounting and permission lines (§10.2): stderr only; ACP has no log channel."""
        stderr_line(text)

    # ---- approvals (Approver protocol) ---------------------------------------------------------------
    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        from agentd.permissions.approver import ApprovalOutcome

        host, session = self.host, self.session
        if host is None or session is None or not host.serving:
            return ApprovalOutcome(
                option="reject_once", decided_by="timeout", detail="no editor is connected"
            )
        try:
            result = await host.ask("session/request_permission", permission_params(session, req))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an error answer counts as reject_once (§6.10)
            log.info("session/request_permission for %s answered with an error: %s", req.tool_use_id, exc)
            return ApprovalOutcome(option="reject_once")
        outcome = outcome_of(result, req)
        if outcome.option == "cancelled":
            # the user aborted the turn: handled exactly like session/cancel
            session.cancel()
            await asyncio.Event().wait()  # the turn's cancellation reaches the gate before any result
        return outcome


def config_options(mode: str) -> list[dict[str, Any]]:
    """The session's ACP config options (`configOptions`): the permission mode as a select of category
    `mode`, for clients that set modes through `session/set_config_option` rather than `session/set_mode`."""
    return [{"type": "select", "id": "mode", "name": "Mode", "category": "mode", "currentValue": mode,
             "options": [{"value": i, "name": n, "description": d} for i, n, d in ps.MODES]}]  # fmt: skip
