"""The static system prompt (CONTRACTS.md §4; issue 11): it names every built-in tool, says when to prefer
grep/glob to run_command, and carries the session's instructions as a second block, byte-stable."""

from __future__ import annotations

import re

from agentd.core.prompts import SYSTEM_TEMPLATE, system_blocks
from agentd.tools.registry import default_tools


def test_every_built_in_tool_is_named_and_search_is_preferred() -> None:
    names = {"todo_write", *(t.name for t in default_tools())}
    named = set(re.findall(r"\b[a-z]+_[a-z_]+\b|\bgrep\b|\bglob\b", SYSTEM_TEMPLATE))
    assert names <= named, names - named
    assert (
        "To search code or find files, use grep and glob, not run_command with grep, rg, find or ls"
        in SYSTEM_TEMPLATE
    )
    assert "mcp__<server>__<tool>" in SYSTEM_TEMPLATE


def test_blocks_are_fixed_and_instructions_come_second() -> None:
    base = {"type": "text", "text": SYSTEM_TEMPLATE.format(root="/w")}
    assert system_blocks("/w") == [base]
    assert system_blocks("/w", "## AGENTS.md\n\nUse tabs.") == [
        base,
        {"type": "text", "text": "## AGENTS.md\n\nUse tabs."},
    ]
    assert system_blocks("/w", "x") == system_blocks("/w", "x")
    assert "{" not in SYSTEM_TEMPLATE.replace("{root}", "")  # no other field: nothing dynamic
