"""The TodoTracker: the session's TODO snapshot, its validation, the stale-round counter and the reminder.

Owns (CONTRACTS.md §2, §3, §7, §11; PROTOCOL.md §7.4):
- `TodoItem` / `TodoWriteInput`: the strict `todo_write` input (`extra="forbid"` everywhere, `content`
  stripped and non-empty, `status` one of pending/in_progress/done, at most `todos.max_items` items).
- `TodoTracker`: one per session, created by the composition root and injected (never a module-level
  instance: a shared tracker lets session A's stale rounds remind session B). Validate everything first,
  then assign once; an invalid call leaves the very same snapshot object in place.
- `REMINDER_TEXT` and `apply_reminder()`: the stale-plan reminder, added to a copy of one request only.

Imports pydantic and `agentd.tools.base` (the `invalid_arguments` formatter) only; never pygls, lsprotocol,
acp or agentd.adapters. Holds no module-level mutable state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from agentd.tools.base import StrictInput, format_validation_error

TodoStatus = Literal["pending", "in_progress", "done"]

DEFAULT_MAX_ITEMS = 50  # `todos.max_items` (PROTOCOL.md §4.3)
STALE_TOOL_ROUNDS = 3  # `todos.stale_rounds`; 0 disables the reminder (CONTRACTS.md §3)

REMINDER_TEXT = (
    "Keep the TODO list current. Call todo_write with the complete task snapshot when the plan changes."
)
CARRY_OVER_HEADER = "\n\nCurrent TODO list (todo_write snapshot):\n"

# ACP plan status for each agentd status (PROTOCOL.md §7.4).
_PLAN_STATUS: dict[str, str] = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}


def _drop_docstring(schema: dict[str, Any]) -> None:
    # Class docstrings are for developers; the model reads only the `Field(description=...)` texts.
    schema.pop("description", None)


class TodoItem(BaseModel):
    """One TODO entry. Frozen: a snapshot is never edited in place, only replaced."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_drop_docstring)

    content: StrictStr = Field(description="What to do, one short line. Must not be empty.")
    status: TodoStatus = Field(description="pending, in_progress or done.")

    @field_validator("content")
    @classmethod
    def _strip_content(cls, value: str) -> str:
        stripped = value.strip()
        if not stripped:
            raise ValueError("must not be empty")
        return stripped


class TodoWriteInput(StrictInput):
    """The whole `todo_write` input: the complete list (CONTRACTS.md §2).

    The item limit comes from the validation context `{"max_items": n}` (the tracker passes its own
    `todos.max_items`); without a context it is `DEFAULT_MAX_ITEMS`. A list that is too long is reported
    together with every invalid item, so the model sees all problems at once.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_drop_docstring)

    todos: list[TodoItem] = Field(
        description=(
            "The COMPLETE TODO list, in order. It replaces the previous list entirely: "
            "an item left out is deleted."
        )
    )

    @field_validator("todos", mode="wrap")
    @classmethod
    def _limit_items(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> list[TodoItem]:
        context = info.context if isinstance(info.context, Mapping) else {}
        limit = int(context.get("max_items", DEFAULT_MAX_ITEMS))
        errors: list[Any] = []
        if isinstance(value, list) and len(value) > limit:
            errors.append(
                {
                    "type": "too_long",
                    "loc": (),
                    "input": value,
                    "ctx": {"field_type": "List", "max_length": limit, "actual_length": len(value)},
                }
            )
        try:
            items: list[TodoItem] = handler(value)
        except ValidationError as exc:
            errors.extend(_init_error(e) for e in exc.errors(include_url=False))
            items = []
        if errors:
            # Re-raised errors get the field's location ("todos") prefixed by pydantic.
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return items


def _init_error(err: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": err["type"], "loc": tuple(err["loc"]), "input": err.get("input")}
    if err.get("ctx") is not None:
        out["ctx"] = err["ctx"]
    return out


Snapshot = tuple[TodoItem, ...]


def snapshot_bytes(items: Sequence[TodoItem]) -> str:
    """The byte-stable snapshot text (CONTRACTS.md §2): compact separators, keys `todos`, `content`,
    `status` in that order, non-ASCII as lowercase `\\uXXXX` escapes."""
    obj = {"todos": [{"content": i.content, "status": i.status} for i in items]}
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))


def plan_entries(items: Sequence[TodoItem]) -> list[dict[str, str]]:
    """ACP `plan` entries (PROTOCOL.md §7.4): priority always `medium`, `done` -> `completed`."""
    return [{"content": i.content, "priority": "medium", "status": _PLAN_STATUS[i.status]} for i in items]


def has_tool_use(message: Mapping[str, Any]) -> bool:
    """True if an assistant message holds at least one `tool_use` block (one *round*, CONTRACTS.md §3)."""
    content = message.get("content")
    if not isinstance(content, list):
        return False
    return any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content)


def apply_reminder(request_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return a NEW message list whose final user message ends with the reminder as its last text block.

    Only that message and its content list are copied; the input list and its messages are never mutated,
    so the stored history never sees the reminder (CONTRACTS.md §3). String content becomes one text block
    followed by the reminder block. Never a system role, never a separate message. Without a user message
    the copy is returned unchanged.
    """
    out = list(request_messages)
    for index in range(len(out) - 1, -1, -1):
        message = out[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}] if content else []
        else:
            blocks = list(content or [])
        blocks.append({"type": "text", "text": REMINDER_TEXT})
        copied = dict(message)
        copied["content"] = blocks
        out[index] = copied
        break
    return out


class TodoTracker:
    """One session's TODO snapshot and stale-round counter (CONTRACTS.md §2, §3).

    `max_items`: `todos.max_items` (> 0); `stale_rounds`: `todos.stale_rounds` (>= 0, 0 disables the
    reminder). The loop calls `before_model()` (or `reminder_due_and_reset()`) before building each
    request and `end_round()` once per assistant message that holds at least one tool_use.
    """

    def __init__(self, max_items: int = DEFAULT_MAX_ITEMS, stale_rounds: int = STALE_TOOL_ROUNDS) -> None:
        if max_items <= 0:
            raise ValueError("max_items must be > 0")
        if stale_rounds < 0:
            raise ValueError("stale_rounds must be >= 0")
        self.max_items = max_items
        self.stale_rounds = stale_rounds
        self._snapshot: Snapshot = ()
        self._written = False
        self._stale = 0

    # -- snapshot -------------------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        """The current list: an immutable tuple of frozen items; `()` before any write."""
        return self._snapshot

    @property
    def written(self) -> bool:
        """True once a `todo_write` succeeded (or a snapshot was restored) in this session."""
        return self._written

    def validate(self, raw: Any) -> tuple[TodoWriteInput | None, str | None]:
        """Validate a raw `todo_write` input with this tracker's `max_items`. Changes nothing.

        Returns `(args, None)` or `(None, "invalid_arguments: ...")` naming every invalid field (§11).
        """
        try:
            return TodoWriteInput.model_validate(raw, context={"max_items": self.max_items}), None
        except ValidationError as exc:
            return None, format_validation_error(exc)

    def apply(self, args: TodoWriteInput) -> str:
        """Replace the whole list with already validated `args` (one assignment); return the snapshot text."""
        self._snapshot = tuple(args.todos)
        self._written = True
        return self.snapshot_json()

    def write(self, raw: Any) -> tuple[bool, str]:
        """Validate everything, then assign once. `(True, snapshot text)` or `(False, invalid_arguments text)`;
        on failure the snapshot object is left untouched (`tracker.snapshot is old`)."""
        args, error = self.validate(raw)
        if args is None:
            return False, error or "invalid_arguments: input: invalid value"
        return True, self.apply(args)

    def snapshot_json(self) -> str:
        """The snapshot bytes of CONTRACTS.md §2, e.g. `{"todos":[{"content":"\\u7f16\\u5199 README","status":"done"}]}`."""
        return snapshot_bytes(self._snapshot)

    def as_dicts(self) -> list[dict[str, str]]:
        """`[{"content", "status"}]` in agentd's own statuses (PROTOCOL.md §6.7)."""
        return [{"content": i.content, "status": i.status} for i in self._snapshot]

    def carry_over_text(self) -> str | None:
        """The compaction summary suffix (CONTRACTS.md §11) when there are todos, else None."""
        if not self._snapshot:
            return None
        return CARRY_OVER_HEADER + self.snapshot_json()

    def plan_entries(self) -> list[dict[str, str]]:
        """ACP `plan` entries (PROTOCOL.md §7.4) of the snapshot (`plan_entries`)."""
        return plan_entries(self._snapshot)

    def plan_meta(self) -> dict[str, str]:
        """`_meta.agentd` of a `plan` update: `{"planId": "main", "snapshot": <snapshot text>}`."""
        return {"planId": "main", "snapshot": self.snapshot_json()}

    # -- stale rounds and the reminder ----------------------------------------------------------------

    @property
    def stale_count(self) -> int:
        """Consecutive tool rounds without a successful `todo_write`, since the last reset."""
        return self._stale

    def end_round(self, todo_write_succeeded: bool) -> None:
        """Count one round (one assistant message with >= 1 tool_use): fresh -> 0, otherwise +1."""
        self._stale = 0 if todo_write_succeeded else self._stale + 1

    def observe_reply(self, message: Mapping[str, Any], todo_write_succeeded: bool) -> None:
        """`end_round()` if the assistant `message` holds at least one tool_use; nothing otherwise."""
        if has_tool_use(message):
            self.end_round(todo_write_succeeded)

    def reminder_due_and_reset(self) -> bool:
        """Called before building each request: True (and the counter reset to 0) when the reminder is due."""
        if self.stale_rounds > 0 and self._stale >= self.stale_rounds:
            self._stale = 0
            return True
        return False

    def before_model(self, request_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A `before_model` hook: the reminder added to a copy when due, else the same list object."""
        if self.reminder_due_and_reset():
            return apply_reminder(request_messages)
        return request_messages

    # -- replay ---------------------------------------------------------------------------------------

    def restore(self, snapshot_items: Iterable[TodoItem | Mapping[str, Any]], counter: int) -> None:
        """Set the state found by replay: the last stored snapshot and the recomputed stale counter."""
        items = tuple(i if isinstance(i, TodoItem) else TodoItem.model_validate(i) for i in snapshot_items)
        self._snapshot = items
        self._written = True
        self._stale = max(0, counter)

    def restore_count(self, counter: int) -> None:
        """Set the stale-round counter a `compaction` record stored (replay, issue 16)."""
        self._stale = max(0, counter)

    def reset(self) -> None:
        """No snapshot and a zero counter, as a new tracker (before a conversation rewind's replay)."""
        self._snapshot, self._written, self._stale = (), False, 0

    def replay_reply(self, message: Mapping[str, Any], todo_write_succeeded: bool) -> None:
        """Replay one stored assistant message: the check and reset made before its request, then the
        count of its reply (CONTRACTS.md §3, "Replay recomputes it")."""
        self.reminder_due_and_reset()
        self.observe_reply(message, todo_write_succeeded)
