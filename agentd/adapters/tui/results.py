"""What a finished tool call's line says about its result in the terminal client (docs/terminal.md).

Owns `result_summary(raw_output)` (`exit 0 · 3 lines of output`, `120 lines`, `4 entries`, `2 matches`: the
counts a tool reports in its `rawOutput`, PROTOCOL.md §7.3) and `output_tail(update, keep)` (the last lines
a command printed, for the dim lines under its tool line). Pure functions over the update's JSON; the view
escapes what it shows. Imports nothing of prompt_toolkit or rich; never pygls, lsprotocol or acp.
"""

from __future__ import annotations

import re
from typing import Any

# a command's result ends with its status line (agentd.tools.shell): shown in the summary instead
_STATUS_LINE = re.compile(r"^\[(exit code -?\d+|timed out after .*|killed by signal .*)\]$")
# rawOutput counts, by precedence (todo_write's `items` is left out: its title counts them)
_COUNTS = (("lines", "line"), ("entries", "entry"), ("matches", "match"), ("files", "file"))


def _plural(n: int, many: str, one: str) -> str:
    return f"{n} {one if n == 1 else many}"


def result_text(update: dict[str, Any]) -> str:
    """The text of a `tool_call_update`'s content blocks (not its diffs), joined by newlines."""
    return "\n".join(
        str((c.get("content") or {}).get("text") or "")
        for c in update.get("content") or []
        if isinstance(c, dict) and c.get("type") == "content"
    )


def output_lines(update: dict[str, Any]) -> list[str]:
    """A command's output lines (its status line and trailing blank lines left out); [] for another tool."""
    raw = update.get("rawOutput")
    if not isinstance(raw, dict) or "exitCode" not in raw:
        return []
    lines = result_text(update).rstrip("\n").split("\n")
    if lines and _STATUS_LINE.match(lines[-1].strip()):
        lines.pop()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _size(n: int) -> str:
    """`812 bytes`, `48.9 kB`, `3.2 MB` (powers of 1000)."""
    if n < 1000:
        return _plural(n, "bytes", "byte")
    return f"{n / 1000:.1f} kB" if n < 1_000_000 else f"{n / 1_000_000:.1f} MB"


def result_summary(raw_output: Any, output: list[str] | None = None) -> str:
    """A few words about a completed call's result from its `rawOutput` (`exit 0 · 3 lines of output`,
    `120 lines`, `4 entries`); "" when the tool reports no count. `output`: a command's output lines. An
    output longer than `tools.output_max_bytes` is told by its size (`exit 0 · 48.9 kB of output, its middle
    left out for the agent`): the lines kept are not all of it."""
    if not isinstance(raw_output, dict):
        return ""
    if "exitCode" in raw_output:
        size = raw_output.get("bytes")
        if raw_output.get("truncated") and isinstance(size, int):  # the lines kept are not the whole output
            return (
                f"exit {raw_output['exitCode']} · {_size(size)} of output, its middle left out for the agent"
            )
        n = len(output or [])
        return f"exit {raw_output['exitCode']} · " + (
            _plural(n, "lines", "line") + " of output" if n else "no output"
        )
    for key, one in _COUNTS:
        value = raw_output.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return _plural(value, key, one) + (" (truncated)" if raw_output.get("truncated") else "")
    return ""


def output_tail(lines: list[str], keep: int) -> tuple[int, list[str]]:
    """(how many lines are left out, the last `keep` lines) of a command's output."""
    if len(lines) <= keep:
        return 0, lines
    return len(lines) - keep, lines[-keep:]
