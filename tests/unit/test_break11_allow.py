"""`agentd run --allow` takes the rule syntax config rules take (issue 11, break11, finding 7)."""

from __future__ import annotations

import pytest

from agentd.config import Settings, tool_name_problem
from agentd.permissions.approver import ApprovalOutcome, ApprovalRequest, PresetApprover, QueueApprover
from agentd.permissions.rules import is_mcp_target
from agentd.tools.base import Preview

pytestmark = pytest.mark.unit


def _req(tool: str) -> ApprovalRequest:
    return ApprovalRequest("sess_1", "toolu_01", tool, f"Approve {tool}", Preview(summary=tool), 120)


async def test_allow_names_every_tool_of_a_server() -> None:
    """break11, finding 7: `--allow 'mcp__evil__*'` passed the CLI's check but answered no approval (the
    approver compared names exactly); it now covers every tool of that server, as a config rule does, and
    no other server's."""
    fallback = QueueApprover.of("reject_once", "reject_once")
    preset = PresetApprover(yes=False, allow=["mcp__evil__*"], fallback=fallback)
    outcomes = [await preset.request(_req(t)) for t in ("mcp__evil__drop", "mcp__evil2__drop", "mcp__evilx")]
    rule = "--allow mcp__evil__*"
    assert outcomes == [
        ApprovalOutcome(option="allow_once", rule=rule, note=f"auto-answered by {rule}"),
        ApprovalOutcome(option="reject_once"),
        ApprovalOutcome(option="reject_once"),
    ]


def test_one_syntax_for_cli_and_config() -> None:
    """break11, finding 7: the CLI's check and config rules accept and refuse the same names (one parser,
    permissions.rules)."""
    for name in ("mcp__evil__*", "mcp__my-srv__read.file", "mcp__a__b"):
        assert tool_name_problem(name) is None and is_mcp_target(name)
        Settings.model_validate({"permissions": {"rules": [{"tool": name, "action": "deny"}]}})
    for name in ("mcp__évil__*", "mcp__a__b c", "mcp____*"):
        assert tool_name_problem(name) is not None and not is_mcp_target(name)
        with pytest.raises(ValueError):
            Settings.model_validate({"permissions": {"rules": [{"tool": name, "action": "deny"}]}})
