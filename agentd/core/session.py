"""Session: one isolated unit of state bound to one workspace, and the API every front end uses
(CONTRACTS.md §1, §9; PROTOCOL.md §6; issue 10 Part 1).

Owns: `Session`, built only by `core/factory.py`. Adapters (LSP, ACP), the CLI and in-process clients use the
public API below and nothing else (tests/unit/test_architecture.py checks the adapters and the CLI); the
core's own modules (loop, toolbox, compaction, replay, history) use the declared parts.

Public API (`Session.PUBLIC`):
- identity and views: `id`, `cwd`, `title`, `turns`, `mode`, `model`, `provider_name`, `accepts_images`,
  `created_at`, `updated_at`, `busy`, `closed`, `totals`; `status()` (the `agentd/session/status` result),
  `todos()` (`agentd/session/todos`).
- turns: `await prompt(blocks) -> stop_reason` (`end_turn`, `max_tokens`, `max_turn_requests`, `refusal`,
  `cancelled`; one turn at a time, SessionBusyError otherwise), `cancel()`, `await compact()` (the
  `agentd/session/compact` result).
- settings that persist: `set_mode(mode_id)` (a signed `mode` record, then a `current_mode_update`);
  `reload_instructions()` (read AGENTS.md files again: an `instructions` record and a new system prompt);
  `instructions` (the project instructions in force).
- the editor: `attach_editor(roots, documents, editor)` (the roots the tools may use, the open-buffer overlay,
  the apply-edit bridge of the connection that holds the session).
- events: `sink` (a callable receiving each session update, a dict in the wire shape of
  `agentd.protocol.updates`, exactly once; an adapter frames and routes it) and `replay_updates()` (every
  update of a `session/load` replay, built by the same builders as a live turn: from the last compaction
  on) and `history(before)` (`agentd/session/history`: the pages before it).
- checkpoints (issue 13; docs/checkpoints.md; agentd.core.checkpoints, rewind, fork): a checkpoint is taken
  before each prompt and each `run_command` (the `checkpoint` update, its `messageId` the prompt's).
  `checkpoints()` -> the `agentd/session/checkpoints` result (PROTOCOL.md §6.12: `{checkpoints[], rewinds[],
  pendingRewind}`); `await rewind(to, files=True, conversation=True, overwrite=False, dry_run=False)` -> the
  `agentd/session/rewind` result (§6.13: `{to, done, files?: {restored, removed, kept[{path, reason}]},
  conversation?: {messagesBefore, messagesAfter, abandonedPrompts}, checkpoint?}`); `to` is a checkpoint id
  or a prompt number; files the user changed after the checkpoint are kept (`changed_by_user`) unless
  `overwrite` is True or lists them: ask the user, then call again. After a conversation rewind the session
  holds the rewound conversation and plan (a client re-renders it from `replay_updates()`). `fork(at=None)`
  -> the `agentd/session/fork` result (§6.14: `{sessionId, forkedFrom, at, title, messages}`; the fork is
  created, not opened: open it as any stored session). Errors: SessionBusyError (a turn runs),
  CheckpointError (a UsageError: unknown target, or one that cannot serve; the text says what to do). For a
  session no client holds open: agentd.core.stored (`stored_checkpoints`, `rewind_stored`, `fork_stored`).
- `close()`: flush and release the lock, ask the MCP servers to stop; idempotent. `await aclose()` also waits
  for the MCP servers.
Updates are emitted after what they report is persisted (persist before notify): while a log write waits
for its deferred fsync (`Journal.durable`, issue 16), `emit` queues updates in an outbox that one task
delivers, in order, once the fsync has covered them; `prompt` returns after the outbox is empty. The
transport libraries (pygls, lsprotocol, acp) and the adapters are never imported here.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agentd import heap
from agentd.checkpoints.restore import read_intent
from agentd.clock import Clock
from agentd.config import Settings
from agentd.core import events
from agentd.core.checkpoints import Checkpointer
from agentd.core.compaction import compress
from agentd.core.context import Context
from agentd.core.fork import fork_session
from agentd.core.history import last_page_updates, replay_updates
from agentd.core.hooks import Hooks
from agentd.core.instructions import Instructions, user_instructions_dir
from agentd.core.instructions import load as load_instructions
from agentd.core.journal import Journal, new_message_id
from agentd.core.loop import run_turn
from agentd.core.pages import PAGE_BYTES, read_page
from agentd.core.prompts import system_blocks
from agentd.core.replay import replay_branch
from agentd.core.rewind import listing, rewind
from agentd.core.todos import TodoTracker
from agentd.core.tokens import TokenTotals, price_known
from agentd.core.toolbox import Toolbox
from agentd.core.window import learn_window
from agentd.errors import UsageError
from agentd.log import LineWriter
from agentd.persistence.records import (
    InstructionsRecord,
    ModeRecord,
    PromptRecord,
    Record,
    TitleRecord,
    UsageRecord,
)
from agentd.protocol import updates
from agentd.protocol.session import MODE_IDS
from agentd.providers.base import ModelResponse, Provider
from agentd.sandbox import wire_state
from agentd.tools.base import DocumentOverlay, EditorBridge, model_text

log = logging.getLogger("agentd.session")

EventSink = Callable[[dict[str, Any]], None]
Block = dict[str, Any]

INTERRUPTED_BEFORE = "interrupted before completion; the tool did not run"
INTERRUPTED_AFTER = (
    "interrupted after the tool started; its outcome is unknown, check the workspace before retrying"
)


class SessionBusyError(RuntimeError):
    """A turn or a compaction is already running in this session (PROTOCOL.md §11 `SessionBusy`)."""


def clean_prompt(blocks: list[Block]) -> list[Block]:
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


class Session:
    """A session (see the module docstring for the public API). Built by `agentd.core.factory`."""

    PUBLIC = frozenset(
        {
            "id", "cwd", "title", "turns", "mode", "model", "provider_name", "accepts_images", "created_at",
            "updated_at", "busy", "closed", "totals", "status", "todos", "prompt", "cancel", "compact",
            "set_mode", "attach_editor", "sink", "replay_updates", "history", "close", "aclose", "instructions",
            "reload_instructions", "learn_window", "checkpoints", "rewind", "fork",
        }
    )  # fmt: skip

    def __init__(
        self,
        *,
        session_id: str,
        cwd: Path,
        settings: Settings,
        provider: Provider,
        clock: Clock,
        window_tokens: int,
        system: list[Block],
        tool_defs: list[dict[str, Any]],
        context: Context,
        tracker: TodoTracker,
        hooks: Hooks,
        toolbox: Toolbox,
        journal: Journal,
        checkpointer: Checkpointer,
        lines: LineWriter,
        secrets: list[str],
        instructions: Instructions | None = None,
        mcp: Any = None,
        sink: EventSink | None = None,
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        self.settings = settings
        self.provider = provider
        self.clock = clock
        self.window_tokens = window_tokens  # the model's context window in use, tokens
        self.system = system  # the static `system` blocks (CONTRACTS.md §4)
        self.tool_defs = tool_defs  # the static `tools` definitions
        self.context = context
        self.tracker = tracker
        self.hooks = hooks
        self.toolbox = toolbox
        self.journal = journal
        self.checkpointer = checkpointer  # the workspace's checkpoints (issue 13)
        self._line_writer = lines
        self.lines: LineWriter = self._ordered_line  # operator lines keep their order with the updates
        self.secrets = secrets
        self.instructions = instructions or Instructions()  # the project instructions in the system prompt
        self.mcp = mcp  # agentd.mcp.manager.MCPManager: the session's MCP servers, stopped with it
        self.sink: EventSink = sink or (lambda _u: None)
        self._outbox: list[Callable[[], None]] = []  # updates (and lines) waiting for a deferred fsync
        self._flusher: asyncio.Task[None] | None = None
        self.totals = TokenTotals()
        self.state = "idle"  # idle | running | awaiting_permission
        self.turns = 0
        self.title: str | None = None
        self.pending_notes: list[Block] = []  # text blocks owed to the model with the next prompt (H3)
        self._task: asyncio.Task[str] | None = None
        self._compacting = False

    # ---- views ---------------------------------------------------------------------------------------
    @property
    def p(self) -> SimpleNamespace:
        """The parts by their first-milestone names, for in-process tests only (adapters and the CLI never
        use it: tests/unit/test_architecture.py)."""
        box = self.toolbox
        return SimpleNamespace(
            session_id=self.id, cwd=self.cwd, settings=self.settings, provider=self.provider, registry=box.registry,
            context=self.context, todos=self.tracker, hooks=self.hooks, gate=box.gate, audit=box.audit,
            tool_ctx=box.ctx, system=self.system, tool_defs=self.tool_defs, clock=self.clock,
            model_window=self.window_tokens, lines=self.lines, secrets=self.secrets, store=self.journal.store,
            instructions=self.instructions, mcp=self.mcp,
        )  # fmt: skip

    @property
    def mode(self) -> str:
        """The permission mode: `default`, `acceptEdits` or `readOnly` (PROTOCOL.md §6.1)."""
        return self.toolbox.gate.mode

    @property
    def model(self) -> str:
        return self.provider.model

    @property
    def provider_name(self) -> str:
        return self.provider.name

    @property
    def accepts_images(self) -> bool:
        """Whether prompts may carry images (`Settings.accepts_images`: the `images` setting, else the model
        table), for the model this session runs."""
        from agentd.providers.models import accepts_images

        return accepts_images(self.provider.name, self.provider.model, self.settings.images)

    @property
    def created_at(self) -> str | None:
        return self.journal.meta.get("createdAt")

    @property
    def updated_at(self) -> str | None:
        return self.journal.meta.get("updatedAt")

    @property
    def busy(self) -> bool:
        """A turn or a compaction is running."""
        return self._compacting or (self._task is not None and not self._task.done())

    @property
    def closed(self) -> bool:
        return self.journal.closed

    def status(self) -> dict[str, Any]:
        """The `agentd/session/status` result (PROTOCOL.md §6.8)."""
        t = self.totals
        totals: dict[str, Any] = {"requests": t.requests, "inputTokens": t.input_tokens, "outputTokens": t.output_tokens,
                                  "cacheReadTokens": t.cache_read_input_tokens,
                                  "cacheWriteTokens": t.cache_creation_input_tokens}  # fmt: skip
        if not t.cache_read_known:
            totals["cacheReadKnown"] = False
        ctx = self.context
        out: dict[str, Any] = {
            "sessionId": self.id, "cwd": str(self.cwd), "state": self.state if self.busy else "idle",
            "mode": self.mode, "provider": self.provider_name, "model": self.model,
            "context": {"usedTokens": ctx.estimated_tokens(), "windowTokens": self.window_tokens,
                        "compressThresholdTokens": self.settings.compress_threshold(self.window_tokens),
                        "messages": len(ctx), "compactions": ctx.compaction.compactions},
            "totals": totals,
        }  # fmt: skip
        if price_known(self.model):
            out["costEstimate"] = {"amount": round(t.cost_usd, 6), "currency": "USD"}
        out["turns"] = self.turns
        out["updatedAt"] = self.updated_at
        out["sandbox"] = wire_state(self.toolbox.ctx.launcher)  # issue 12: what protects its commands
        out["instructions"] = [f.to_json() for f in self.instructions.files]
        hooks = getattr(self.toolbox.gate, "user_hooks", None)
        if hooks is not None:
            out["trust"] = hooks.trust_json()  # issue 12 §5: whether the workspace's own hooks run, and why
        return out

    def todos(self) -> dict[str, Any]:
        """The `agentd/session/todos` result (PROTOCOL.md §6.7): the list in agentd's statuses, the snapshot
        bytes, and `updatedAt` once a snapshot was written."""
        out: dict[str, Any] = {"todos": self.tracker.as_dicts(), "snapshot": self.tracker.snapshot_json()}
        if self.tracker.written and self.journal.todos_at:
            out["updatedAt"] = self.journal.todos_at
        return out

    # ---- commands ------------------------------------------------------------------------------------
    def set_mode(self, mode_id: str) -> None:
        """Change the permission mode (PROTOCOL.md §6.6): persisted (signed), then a `current_mode_update`.
        Raises ValueError for an id that is not a mode (`MODE_IDS`), StorageError."""
        if mode_id not in MODE_IDS:
            raise ValueError(f"unknown mode {mode_id!r}; use one of {', '.join(MODE_IDS)}")
        gate = self.toolbox.gate
        self.journal.write(
            ModeRecord(**gate.permission_record("mode", {"mode": mode_id}))
        )  # signed (issue 12)
        gate.mode = mode_id  # type: ignore[assignment]
        self.emit(updates.current_mode_update(mode_id))

    def attach_editor(
        self, roots: list[Path], documents: DocumentOverlay | None = None, editor: EditorBridge | None = None
    ) -> None:
        """The connection that holds the session: `roots` the tools may use (the session's root first;
        pinned from now on, H18), the open-buffer overlay and the apply-edit bridge (None: the disk)."""
        ctx = self.toolbox.ctx
        ctx.roots = list(roots)
        ctx.documents = documents
        ctx.editor = editor

    def reload_instructions(self) -> Instructions:
        """Read the project instructions again (issue 11): an `instructions` record, then the new system
        prompt (one cache write on the next request). Raises UsageError while a turn runs, StorageError."""
        if self.busy:
            raise UsageError(f"A prompt is running in {self.id}; reload the instructions when it has ended.")
        fresh = load_instructions(self.cwd, user_instructions_dir())
        self.journal.write(InstructionsRecord(**fresh.record()))
        self.instructions = fresh
        self.system = system_blocks(self.cwd, fresh.text)
        return fresh

    async def learn_window(self) -> int:
        """Ask the provider once for the window it serves (local servers, issue 17) and use it; returns the
        window in tokens (`status()` and every `usage_update` report it)."""
        return await learn_window(self)

    def replay_updates(self) -> list[dict[str, Any]]:
        """Every update of a `session/load` replay (PROTOCOL.md §6.2), read from the log on disk now; the
        same builders as a live turn. Adapter-neutral: the caller frames and sends them. Reads only the last
        page (from the turn of the last compaction, found through the index) when there is one."""
        store = self.journal.store
        branch = store.active_branch()
        last = next((e for e in reversed(store.entries) if e.seq in branch), None)
        turn = int(last.counts["turn"]) if last is not None else 0
        if last is None or turn == last.counts["firstTurn"] or not store.starts_on_branch(turn, branch):
            return replay_updates(self, self.journal.all_records())
        todos = any(x.kind == "todos" and x.seq in branch for x in store.tally.sparse)
        records = (rec for _, rec in store.iter_records(turn))
        return last_page_updates(self, records, branch, todos=todos)

    def history(self, before: int, max_bytes: int = PAGE_BYTES) -> dict[str, Any]:
        """The `agentd/session/history` result (PROTOCOL.md §6.15): the replay updates of the records before
        record `before`, at most `max_bytes` of them, back to the start of their page (a compaction's turn,
        its summary first), and the `before` to go on with (None at the log's start); read through the
        log's index, not the whole log (agentd/core/pages.py). Blocking file reads: the adapters call it in
        a worker thread. Raises UsageError for a `before` that is no turn's start or assistant message."""
        return read_page(self, before, max_bytes).result()

    # ---- checkpoints (issue 13) ----------------------------------------------------------------------
    def checkpoints(self) -> dict[str, Any]:
        """The `agentd/session/checkpoints` result (PROTOCOL.md §6.12), read from the log now."""
        return listing(
            self.journal.all_records(), pending=read_intent(self.checkpointer.store.root) is not None
        )

    async def rewind(
        self, to: int | str, *, files: bool = True, conversation: bool = True,
        overwrite: bool | list[str] = False, dry_run: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """Go back to checkpoint `to` (agentd.core.rewind): the `agentd/session/rewind` result (PROTOCOL.md
        §6.13). Raises SessionBusyError while a turn runs, CheckpointError, UsageError, OSError, StorageError."""
        if self.busy:
            raise SessionBusyError(f"A prompt is still running in {self.id}; wait for it or cancel it.")
        self._compacting = True  # busy meanwhile: no prompt starts during a rewind
        try:
            return await rewind(self, to, files=files, conversation=conversation, overwrite=overwrite,
                                dry_run=dry_run)  # fmt: skip
        finally:
            self._compacting = False

    def fork(self, at: int | str | None = None) -> dict[str, Any]:
        """A new session holding this one's history up to checkpoint `at` (default: the end); the
        `agentd/session/fork` result (agentd.core.fork). Raises SessionBusyError, CheckpointError,
        StorageError."""
        if self.busy:
            raise SessionBusyError(f"A prompt is still running in {self.id}; fork it when it has ended.")
        self.journal.sync()
        signer = self.toolbox.gate.signer
        if signer is None:
            raise UsageError("This session cannot sign permission records, so it cannot be forked.")
        return fork_session(self.journal.data_dir, self.id, at, signer=signer,
                            blob_min_bytes=self.journal.blob_min_bytes)  # fmt: skip

    def rebuild_branch(self) -> None:
        """After a conversation rewind: the conversation, plan, reminder counter and system prompt as the
        active branch of the log has them (agentd.core.replay.replay_branch)."""
        replay_branch(self, self.journal.all_records())

    # ---- turns ---------------------------------------------------------------------------------------
    async def prompt(self, blocks: list[Block]) -> str:
        """Run one turn for a user prompt (content blocks). Returns the stop reason (see module docstring);
        a turn that gave the session its title ends with a `session_info_update`. Raises UsageError for an
        empty prompt, SessionBusyError while a turn or compaction runs, ProviderError when the provider
        fails for good, StorageError when the log cannot be written."""
        blocks = clean_prompt(blocks)
        if self.busy:
            raise SessionBusyError(f"A prompt is still running in {self.id}; wait for it or cancel it.")
        titled = self.title is not None
        heap.settle()  # the history so far is frozen: collections during the turn do not walk it
        try:
            self.journal.defer_fsync = True  # the turn's fsyncs run off the loop (Journal)
            self._task = asyncio.ensure_future(run_turn(self, blocks))
            try:
                stop = await asyncio.shield(self._task)
            except asyncio.CancelledError:
                stop = await self._finish_cancelled()
            finally:
                self.state = "idle"
            if not titled and self.title is not None:
                self.emit(updates.session_info_update(self.title, self.updated_at))
        finally:
            self.journal.defer_fsync = False
            try:
                await self.settled()  # the answer goes after every update of the turn, all durable
            finally:
                heap.turn_ended()
        return stop

    async def _finish_cancelled(self) -> str:
        assert self._task is not None
        if self._task.done() and not self._task.cancelled():
            return self._task.result()
        self._task.cancel()
        try:
            return await self._task
        except asyncio.CancelledError:
            return "cancelled"

    def cancel(self) -> None:
        """Cancel the running turn (if any); the prompt then answers `cancelled` (PROTOCOL.md §12.2)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def compact(self) -> dict[str, Any]:
        """Compress now (PROTOCOL.md §6.9): `{compacted: false, reason: "too_short"}` when nothing can be cut;
        otherwise the sizes before and after, and a `usage_update`. A cancel or a provider failure leaves the
        history unchanged. Raises SessionBusyError while a turn runs, ProviderError."""
        if self.busy:
            raise SessionBusyError(f"A prompt is still running in {self.id}; wait for it or cancel it.")
        ctx = self.context
        self._compacting = True
        heap.settle()  # a compaction streams as a turn does: the idle pass waits for it (recheck of break16 F5)
        try:
            tokens_before, messages_before = ctx.estimated_tokens(), len(ctx)
            if not await compress(self, force=True):
                return {"compacted": False, "reason": "too_short"}
            await self.save_meta()
            self.emit(
                events.context_usage(ctx.estimated_tokens(), self.totals, self.window_tokens, self.model)
            )
            return {"compacted": True, "tokensBefore": tokens_before, "tokensAfter": ctx.estimated_tokens(),
                    "messagesBefore": messages_before, "messagesAfter": len(ctx)}  # fmt: skip
        finally:
            self._compacting = False
            heap.turn_ended()

    def close(self) -> None:
        """Cancel a running turn, ask the session's MCP servers to stop (`aclose` waits for them), flush the
        log and release the lock; the session is unusable afterwards. Idempotent; a failed final fsync is
        logged (closing still releases the lock)."""
        self.cancel()
        heap.release()
        if self.mcp is not None:
            self.mcp.close_soon()
        self.checkpointer.close()
        if self.journal.closed:
            return
        try:
            self.journal.sync()
        except Exception:
            log.warning("session %s: final fsync failed", self.id, exc_info=True)
        else:
            self._deliver(len(self._outbox))
        self.journal.close()

    async def aclose(self) -> None:
        """Wait for the observing user hooks (after_tool, turn_end) to finish, `close()`, then wait until the
        session's MCP servers have stopped."""
        hooks = getattr(self.toolbox.gate, "user_hooks", None)
        if hooks is not None:
            await hooks.drain()
        self.close()
        if self.mcp is not None:
            await self.mcp.aclose()

    # ---- the core's own steps (loop, compaction, replay) ----------------------------------------------
    def emit(self, update: dict[str, Any]) -> None:
        """Send one update to the sink, once what it reports is durable: callers persist first (persist
        before notify); while a write waits for its deferred fsync the update queues behind it, in order."""
        self._in_order(lambda: self._send(update))

    def _ordered_line(self, line: str) -> None:
        self._in_order(lambda: self._line_writer(line))

    def _in_order(self, send: Callable[[], None]) -> None:
        if not self._outbox and not self.journal.pending:
            send()
            return
        self._outbox.append(send)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def settled(self) -> None:
        """Return once every write so far is fsynced and every update emitted so far is sent. Raises
        StorageError when the fsync fails (the queued updates are then never sent)."""
        await self.journal.durable()
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)
        self._deliver(len(self._outbox))

    async def _flush(self) -> None:
        while self._outbox:
            n = len(self._outbox)  # the writes behind these updates were all made before this fsync starts
            try:
                await self.journal.durable()
            except Exception:
                log.exception("session %s: the log could not be fsynced; %d update(s) not sent", self.id, n)
                del self._outbox[:n]
                return
            self._deliver(n)

    def _deliver(self, n: int) -> None:
        batch, self._outbox[:n] = self._outbox[:n], []
        for send in batch:
            try:
                send()
            except Exception:  # a broken line writer must not drop the rest
                log.exception("session %s: an update or line could not be sent", self.id)

    def _send(self, update: dict[str, Any]) -> None:
        try:
            self.sink(update)
        except Exception:  # a broken sink must not break the turn
            log.exception("session %s: update sink failed", self.id)

    def account(self, response: ModelResponse) -> None:
        """One model response's usage: totals, a `usage` record, the stderr line, a `usage_update`."""
        usage = response.usage
        self.totals.add(usage, self.model)
        self.journal.write(
            UsageRecord(usage=usage.to_json(), model=response.model or self.model), fsync=False
        )
        self.lines(usage.accounting_line())
        self.emit(events.usage(usage, self.totals, self.window_tokens, self.model))

    def persist_message(self, message: Block, message_id: str, *, cut: dict[str, str] | None = None) -> None:
        """Append one API message as sent (a `message` record, fsynced). Large tool_result texts go to
        blobs; `cut`: this assistant reply's calls cut off at max_tokens (issue 9 H3)."""
        self.journal.write(self.journal.message(message, message_id, cut=cut))

    def persist_prompt(
        self, blocks: list[Block], message_id: str, synthetic: list[Block], notes: list[Block] | None = None
    ) -> None:
        """Synthetic results for open tool_uses, the notes owed to the model (H3), then the prompt, in one
        write and one fsync (CONTRACTS §9)."""
        j = self.journal
        records: list[Record] = [
            j.message({"role": "user", "content": [b]}, new_message_id()) for b in synthetic
        ]
        if notes:
            records.append(j.message({"role": "user", "content": notes}, new_message_id()))
        records.append(PromptRecord(message_id=message_id, content=copy.deepcopy(blocks)))
        records.append(j.message({"role": "user", "content": blocks}, message_id))
        j.write(*records)

    def set_title(self, title: str) -> None:
        self.title = title
        self.journal.write(TitleRecord(title=title))

    def synthetic_results(self) -> list[Block]:
        """`is_error` tool_results for every tool_use left open by a cancel or crash (CONTRACTS §9, §11)."""
        out = []
        for tool_use_id in self.context.open_tool_use_ids():
            text = INTERRUPTED_AFTER if tool_use_id in self.toolbox.started else INTERRUPTED_BEFORE
            out.append({"type": "tool_result", "tool_use_id": tool_use_id, "content": text, "is_error": True})
        return out

    def update_meta(self) -> None:
        """Refresh meta.json (temp file, fsync, rename) on this thread: turns, tokens, title, model."""
        self.journal.update_meta(**self._meta_fields())

    async def save_meta(self) -> None:
        """`update_meta` in a durability thread, off the event loop (issue 16: its two fsyncs took ~9 ms
        of the loop per call); the fields are taken now, on the loop. Raises StorageError."""
        await self.journal.save_meta(**self._meta_fields())

    def _meta_fields(self) -> dict[str, Any]:
        t = self.totals
        tokens = {"input": t.input_tokens, "output": t.output_tokens, "cacheRead": t.cache_read_input_tokens,
                  "cacheWrite": t.cache_creation_input_tokens}  # fmt: skip
        return {"turns": self.turns, "title": self.title, "model": self.model, "tokens": tokens}
