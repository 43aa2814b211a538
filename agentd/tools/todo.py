"""The `todo_write` tool (CONTRACTS.md §2; PROTOCOL.md §7.3).

Owns: `TodoWrite`, the tool the model calls to replace the session's whole TODO list. Its state lives in the
session's `TodoTracker`, found in `ctx.state["todos"]`; this module holds none. Effect `write` (it changes
session state) but it touches no disk, and the default permission rules allow it by exact name (§5).

Validation choice: `TodoWrite.validate(raw, ctx)` (the `Tool.validate` hook of tools/base.py) validates with
the session tracker's `todos.max_items`, so an invalid call is answered with the exact `invalid_arguments`
text before `run()` is ever reached. The class-level `Input` (used by the generic `validate_input`) applies
the default limit of 50.

Imports agentd.core.todos and agentd.tools.base only; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentd.core.todos import TodoTracker, TodoWriteInput
from agentd.tools.base import Effect, Tool, ToolContext, ToolKind, ToolOutput

_DESCRIPTION = (
    "Record the plan for the current task as a TODO list. The input is always the COMPLETE list: each call "
    "replaces the whole list, nothing is merged, and an item you leave out is deleted. Call it when you "
    "start a task with several steps (write the full plan), when an item starts (in_progress) or is "
    "finished (done), and whenever the plan changes. Keep one item in_progress while you work on it. "
    "Statuses: pending, in_progress, done. The result is the stored list as JSON."
)
_TERSE = "Replace the whole TODO list (complete list each time; left out = deleted). Statuses: pending, in_progress, done."


def _tracker(ctx: ToolContext) -> TodoTracker | None:
    tracker = ctx.state.get("todos")
    return tracker if isinstance(tracker, TodoTracker) else None


class TodoWrite(Tool):
    """`todo_write`: whole-list replacement of the session's TODO snapshot; the result is the snapshot text."""

    name: ClassVar[str] = "todo_write"
    description: ClassVar[str] = _DESCRIPTION
    terse_description: ClassVar[str] = _TERSE
    effect: ClassVar[Effect] = "write"
    kind: ClassVar[ToolKind] = "think"
    Input: ClassVar[type[TodoWriteInput]] = TodoWriteInput

    def definition(self, terse: bool = False) -> dict[str, Any]:
        """The tool definition with the item schema inlined and every `title` removed (deterministic)."""
        definition = super().definition(terse)
        definition["input_schema"] = _inline(definition["input_schema"])
        return definition

    def title(self, args: Any) -> str:
        """`Update todos (3 items)` (PROTOCOL.md §7.3)."""
        count = len(args.todos) if isinstance(args, TodoWriteInput) else 0
        return f"Update todos ({count} item{'' if count == 1 else 's'})"

    def validate(self, raw: Any, ctx: ToolContext) -> tuple[TodoWriteInput | None, str | None]:
        """Validate with the session tracker's `max_items` (default limit without a tracker). Runs nothing."""
        tracker = _tracker(ctx)
        if tracker is None:
            return TodoTracker().validate(raw)
        return tracker.validate(raw)

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        """Assign the validated list once; the result text is the snapshot bytes exactly (CONTRACTS.md §2).

        Raises `RuntimeError` if the session put no TodoTracker in `ctx.state["todos"]` (a wiring bug)."""
        tracker = _tracker(ctx)
        if tracker is None:
            raise RuntimeError('todo_write needs the session TodoTracker in ctx.state["todos"]')
        text = tracker.apply(args)
        return ToolOutput(content=text, title=self.title(args), raw_output={"items": len(tracker.snapshot)})


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {k: walk(v) for k, v in node.items() if k not in ("title", "$defs")}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result
