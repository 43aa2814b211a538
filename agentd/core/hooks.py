"""In-process hooks of one session (CONTRACTS.md §5: v1 has no user-configured hooks).

Owns: `Hooks`, the per-session registry of callables the composition root registers, and `HookVerdict`.
Hook points:
- `before_model(request_messages) -> request_messages`: may return a changed COPY for this request only
  (the TodoTracker's reminder); returning the same list object means "nothing done".
- `before_tool(tool_name, args) -> HookVerdict | None`: `block=True` denies the call (decision step 3);
  `allow=True` may only waive an "ask" (never overrides steps 1-4; the gate enforces that).
- `after_tool(tool_name, output) -> str | None` and `on_turn_end(stop_reason) -> str | None`: observers;
  a returned text is logged as what the hook did. An `after_tool` hook may append to `output.content`
  before the result is stored (the nested-instructions notes of `core/instructions.py` do). Such a hook
  may come with an async `prepare(tool_name, output)`, awaited first (`prepare_after_tool`), that does its
  slow work (files, a subprocess) in a worker thread, so the synchronous hook never blocks the event loop
  (break11: listing the workspace's AGENTS.md files took 15.8 s of the loop on a 100k-file tree).

Every invocation that does something writes one line `[Hook] <hook point> <name>: <detail>` through the
line writer (default: the `agentd` logger). A hook that raises is logged; a raising `before_tool` hook blocks
the call (fail closed). Created per session; no module-level state. Imports nothing from agentd;
never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

_log = logging.getLogger("agentd")

Messages = list[dict[str, Any]]
BeforeModel = Callable[[Messages], Messages]
BeforeTool = Callable[[str, Any], "HookVerdict | None"]
AfterTool = Callable[[str, Any], "str | None"]
OnTurnEnd = Callable[[str], "str | None"]
LineWriter = Callable[[str], None]


@dataclass(frozen=True)
class HookVerdict:
    """A `before_tool` answer: `block` denies the call with `reason`; `allow` waives an "ask" only.

    `hook` names the hook that gave it (filled in by `Hooks.before_tool`)."""

    block: bool = False
    reason: str = ""
    allow: bool = False
    hook: str = ""


def log_line(line: str) -> None:
    """Default line writer: the `agentd` logger (stderr or the log file, never stdout)."""
    _log.info(line)


class Hooks:
    """The hooks of one session, run in registration order."""

    def __init__(self, line_writer: LineWriter | None = None) -> None:
        self._write = line_writer or log_line
        self._before_model: list[tuple[str, BeforeModel]] = []
        self._before_tool: list[tuple[str, BeforeTool]] = []
        self._after_tool: list[tuple[str, AfterTool]] = []
        self._prepare: list[tuple[str, Callable[[str, Any], Awaitable[None]]]] = []
        self._on_turn_end: list[tuple[str, OnTurnEnd]] = []

    def add_before_model(self, name: str, fn: BeforeModel) -> None:
        self._before_model.append((name, fn))

    def add_before_tool(self, name: str, fn: BeforeTool) -> None:
        self._before_tool.append((name, fn))

    def add_after_tool(
        self, name: str, fn: AfterTool, prepare: Callable[[str, Any], Awaitable[None]] | None = None
    ) -> None:
        self._after_tool.append((name, fn))
        if prepare is not None:
            self._prepare.append((name, prepare))

    async def prepare_after_tool(self, tool_name: str, output: Any) -> None:
        """Await every `after_tool` hook's `prepare` (module docstring); one that raises is logged."""
        for name, prep in self._prepare:
            try:
                await prep(tool_name, output)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._line("after_tool", name, f"prepare failed: {exc!r}")

    def add_on_turn_end(self, name: str, fn: OnTurnEnd) -> None:
        self._on_turn_end.append((name, fn))

    def _line(self, point: str, name: str, detail: str) -> None:
        self._write(f"[Hook] {point} {name}: {detail}")

    def before_model(self, request_messages: Messages) -> Messages:
        """Pass the request messages through every `before_model` hook; each gets the previous result."""
        messages = request_messages
        for name, fn in self._before_model:
            try:
                result = fn(messages)
            except Exception as exc:
                self._line("before_model", name, f"failed: {exc!r}; request unchanged")
                continue
            if result is not messages:
                self._line("before_model", name, f"changed the request ({len(result)} messages)")
                messages = result
        return messages

    def before_tool(self, tool_name: str, args: Any) -> HookVerdict:
        """The combined verdict: the first block wins; else an allow if any hook allowed; else no opinion."""
        allowed: HookVerdict | None = None
        for name, fn in self._before_tool:
            try:
                verdict = fn(tool_name, args)
            except Exception as exc:
                verdict = HookVerdict(block=True, reason=f"hook {name} failed: {exc!r}")
            if verdict is None:
                continue
            if verdict.block:
                self._line("before_tool", name, f"blocked {tool_name}: {verdict.reason}")
                return HookVerdict(block=True, reason=verdict.reason, hook=name)
            if verdict.allow and allowed is None:
                allowed = HookVerdict(allow=True, reason=verdict.reason, hook=name)
        if allowed is not None:
            self._line("before_tool", allowed.hook, f"allowed {tool_name}: {allowed.reason}")
            return allowed
        return HookVerdict()

    def after_tool(self, tool_name: str, output: Any) -> None:
        """Notify every `after_tool` hook; a returned text is logged."""
        for name, fn in self._after_tool:
            self._observe("after_tool", name, functools.partial(fn, tool_name, output))

    def on_turn_end(self, stop_reason: str) -> None:
        """Notify every `on_turn_end` hook with the turn's stop reason; a returned text is logged."""
        for name, fn in self._on_turn_end:
            self._observe("on_turn_end", name, functools.partial(fn, stop_reason))

    def _observe(self, point: str, name: str, call: Callable[[], str | None]) -> None:
        try:
            detail = call()
        except Exception as exc:
            self._line(point, name, f"failed: {exc!r}")
            return
        if detail:
            self._line(point, name, detail)

    def counts(self) -> Mapping[str, int]:
        """How many hooks each point has (for status and tests)."""
        return {
            "before_model": len(self._before_model),
            "before_tool": len(self._before_tool),
            "after_tool": len(self._after_tool),
            "on_turn_end": len(self._on_turn_end),
        }
