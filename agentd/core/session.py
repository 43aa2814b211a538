"""Session: one isolated unit of state bound to one workspace (CONTRACTS.md §1, §9).

Owns: the wiring of one session's Context, TodoTracker, tools, gate, audit log, store handle and provider;
the persistence helpers the loop calls (persist before notify); the turn state (`idle`, `running`,
`awaiting_permission`); cancellation. One turn at a time. Built only by `core/factory.py`.
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ulid import ULID

from agentd.audit import AuditLog
from agentd.clock import Clock
from agentd.config import Settings
from agentd.core.context import Context
from agentd.core.hooks import Hooks
from agentd.core.instructions import Instructions
from agentd.core.todos import TodoTracker
from agentd.core.tokens import TokenTotals
from agentd.errors import UsageError
from agentd.log import LineWriter
from agentd.permissions.gate import Gate
from agentd.persistence.store import SessionStore
from agentd.providers.base import Provider
from agentd.tools.base import ToolContext, model_text
from agentd.tools.registry import ToolRegistry

log = logging.getLogger("agentd.session")

EventSink = Callable[[dict[str, Any]], None]

INTERRUPTED_BEFORE = "interrupted before completion; the tool did not run"
INTERRUPTED_AFTER = (
    "interrupted after the tool started; its outcome is unknown, check the workspace before retrying"
)


class SessionBusyError(RuntimeError):
    """A turn is already running in this session (PROTOCOL.md §11 `SessionBusy`)."""


def clean_prompt(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompt as it will be stored and sent: text made encodable (lone surrogates from undecodable
    terminal input become U+FFFD). Raises UsageError when nothing but empty or whitespace text is left: such a
    prompt would leave the history ending with the assistant's message, which the API rejects."""
    out = []
    for b in blocks:
        if b.get("type") == "text":
            b = {**b, "text": model_text(str(b.get("text") or ""))}
            if not b["text"].strip():
                continue
        out.append(b)
    if not out:
        raise UsageError(
            'The prompt is empty; give the agent something to do (e.g. --prompt "fix the failing test").'
        )
    return out


def new_message_id() -> str:
    """A time-sortable id for a message, stable across replay (it is stored in the log)."""
    return "msg_" + str(ULID()).lower()


@dataclass
class SessionParts:
    """Everything a Session owns, created per session by the factory (no module-level state)."""

    session_id: str
    cwd: Path
    settings: Settings
    provider: Provider
    registry: ToolRegistry
    context: Context
    todos: TodoTracker
    hooks: Hooks
    gate: Gate
    audit: AuditLog
    store: SessionStore
    tool_ctx: ToolContext
    system: list[dict[str, Any]]
    tool_defs: list[dict[str, Any]]
    clock: Clock
    model_window: int
    lines: LineWriter
    secrets: list[str] = field(default_factory=list)
    instructions: Instructions = field(default_factory=Instructions)
    mcp: Any = None  # agentd.mcp.manager.MCPManager: the session's MCP servers, stopped with it


class Session:
    """A session. `prompt()` runs one turn (see core/loop.py); `cancel()` stops it.

    `sink` receives session updates (PROTOCOL.md §7 shapes, agentd.protocol.updates); set it per connection.
    """

    def __init__(self, parts: SessionParts, sink: EventSink | None = None) -> None:
        self.p = parts
        self.id = parts.session_id
        self.sink: EventSink = sink or (lambda _u: None)
        self.totals = TokenTotals()
        self.state = "idle"
        self.started_tool_ids: set[str] = set()
        self.audited_ids: set[str] = set()
        self.invalid_inputs: dict[str, str] = {}  # tool_use id -> invalid_arguments text (loop, H19)
        self.turns = 0
        self.title: str | None = None
        self.pending_notes: list[dict[str, Any]] = []  # text blocks that go with the next prompt (H3)
        self._task: asyncio.Task[str] | None = None

    # ---- events and persistence -------------------------------------------------------------------
    def emit(self, update: dict[str, Any]) -> None:
        """Send one update to the connection's sink. Callers persist first (persist before notify)."""
        try:
            self.sink(update)
        except Exception:  # a broken sink must not break the turn
            log.exception("session %s: update sink failed", self.id)

    def persist_message(
        self,
        message: dict[str, Any],
        message_id: str,
        *,
        fsync: bool = True,
        cut: dict[str, str] | None = None,
    ) -> None:
        """Append one API message as sent (a `message` record). Large tool_result texts go to blobs.
        `cut`: the tool_uses of this assistant reply cut off at max_tokens (name by id), recorded so that
        replay restores the note owed to the model with the next prompt (issue 9 H3)."""
        payload = self._message_payload(message, message_id)
        if cut:
            payload["cut"] = cut
        self.p.store.append("message", payload, fsync=fsync)

    def _message_payload(self, message: dict[str, Any], message_id: str) -> dict[str, Any]:
        msg = copy.deepcopy(message)
        blobs: dict[str, str] = {}
        limit = self.p.settings.store.blob_min_bytes
        for j, block in enumerate(msg.get("content", [])):
            content = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(content, str) and len(content.encode("utf-8")) >= limit:
                blobs[str(j)] = self.p.store.write_blob(content.encode("utf-8"))
                block["content"] = ""
        payload: dict[str, Any] = {"messageId": message_id, "message": msg}
        if blobs:
            payload["blobs"] = blobs
        return payload

    def persist_prompt(
        self,
        blocks: list[dict[str, Any]],
        message_id: str,
        synthetic: list[dict[str, Any]],
        notes: list[dict[str, Any]] | None = None,
    ) -> None:
        """Synthetic results for open tool_uses, the notes owed to the model (H3), then the prompt, in one
        write and one fsync (CONTRACTS §9)."""
        records: list[tuple[str, dict[str, Any]]] = []
        for block in synthetic:
            msg = {"role": "user", "content": [block]}
            records.append(("message", self._message_payload(msg, new_message_id())))
        if notes:
            msg = {"role": "user", "content": copy.deepcopy(notes)}
            records.append(("message", self._message_payload(msg, new_message_id())))
        records.append(("prompt", {"messageId": message_id, "content": copy.deepcopy(blocks)}))
        records.append(
            (
                "message",
                {"messageId": message_id, "message": {"role": "user", "content": copy.deepcopy(blocks)}},
            )
        )
        self.p.store.append_many(records, fsync=True)

    def synthetic_results(self) -> list[dict[str, Any]]:
        """`is_error` tool_results for every tool_use left open by a cancel or crash (CONTRACTS §9, §11)."""
        out = []
        for tool_use_id in self.p.context.open_tool_use_ids():
            text = INTERRUPTED_AFTER if tool_use_id in self.started_tool_ids else INTERRUPTED_BEFORE
            out.append({"type": "tool_result", "tool_use_id": tool_use_id, "content": text, "is_error": True})
        return out

    def update_meta(self) -> None:
        """Refresh meta.json (temp file, fsync, rename): turns, tokens, title, model."""
        t = self.totals
        self.p.store.update_meta(
            turns=self.turns,
            title=self.title,
            model=self.p.provider.model,
            tokens={
                "input": t.input_tokens,
                "output": t.output_tokens,
                "cacheRead": t.cache_read_input_tokens,
                "cacheWrite": t.cache_creation_input_tokens,
            },
        )

    # ---- turns ------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    async def prompt(self, blocks: list[dict[str, Any]]) -> str:
        """Run one turn for a user prompt (content blocks). Returns the ACP stop reason:
        `end_turn`, `max_tokens`, `max_turn_requests`, `refusal` or `cancelled`.
        Raises `ProviderError` when the provider fails for good, `RuntimeError` when a turn is running."""
        from agentd.core.loop import run_turn

        blocks = clean_prompt(blocks)
        if self.busy:
            raise SessionBusyError(f"A prompt is still running in {self.id}; wait for it or cancel it.")
        self._task = asyncio.ensure_future(run_turn(self, blocks))
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if self._task.done() and not self._task.cancelled():
                return self._task.result()
            self._task.cancel()
            try:
                return await self._task
            except asyncio.CancelledError:
                return "cancelled"
        finally:
            self.state = "idle"

    def cancel(self) -> None:
        """Cancel the running turn (if any); the prompt then answers `cancelled` (PROTOCOL.md §12.2)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def close(self) -> None:
        """Release the lock and close the store; ask the session's MCP servers to stop (`aclose` waits for
        them). The session object is unusable afterwards."""
        self.cancel()
        if self.p.mcp is not None:
            self.p.mcp.close_soon()
        self.p.store.close()

    async def aclose(self) -> None:
        """`close()`, then wait until the session's MCP servers have stopped."""
        self.close()
        if self.p.mcp is not None:
            await self.p.mcp.aclose()
