"""Permission rules: exact tool name -> allow | ask | deny (CONTRACTS.md §5; PROTOCOL.md §4.3 `permissions.rules`).

Owns: `Rule`, `DEFAULT_RULES`, `strictest()` and `rule_label()`. Rules match the exact tool name, never the
tool's effect, so `todo_write` (effect `write`) is allowed without asking. Among the rules for one tool:
deny > ask > allow. Imports pydantic only; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Action = Literal["allow", "ask", "deny"]

_STRENGTH: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}


class Rule(BaseModel):
    """One `permissions.rules` entry: `{"tool": "run_command", "action": "ask"}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1, description="The exact tool name.")
    action: Action


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(tool="read_file", action="allow"),
    Rule(tool="list_dir", action="allow"),
    Rule(tool="grep", action="allow"),
    Rule(tool="glob", action="allow"),
    Rule(tool="todo_write", action="allow"),
    Rule(tool="write_file", action="ask"),
    Rule(tool="edit_file", action="ask"),
    Rule(tool="run_command", action="ask"),
)


def strictest(rules: Iterable[Rule], tool_name: str) -> Rule | None:
    """The rule for `tool_name` (exact match) with the strongest action (deny > ask > allow), or None.

    Among equally strong rules the first one wins."""
    best: Rule | None = None
    for rule in rules:
        if rule.tool == tool_name and (best is None or _STRENGTH[rule.action] > _STRENGTH[best.action]):
            best = rule
    return best


def rule_label(rule: Rule, default: bool = False) -> str:
    """The `rule` value of a decision: `run_command=ask`, or `default:run_command=ask` for a default rule."""
    label = f"{rule.tool}={rule.action}"
    return f"default:{label}" if default else label
