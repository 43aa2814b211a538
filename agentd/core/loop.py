"""The agent loop: one turn as small named steps on one object (ARCHITECTURE.md "One turn"; CONTRACTS.md §2-§9).

Owns: `Turn` and `run_turn(session, prompt_blocks) -> stop_reason`. The steps: `start` (synthetic results for
tool_uses left open, notes owed to the model, the prompt: persisted together, then applied), per request
`compress` (agentd.core.compaction), `build` (`Context.to_request()`, the `before_model` hooks, the
validator), `stream` (the provider with agentd's retries; text chunks go out as they arrive), `account`,
`store_reply`; per tool_use `tool` (the toolbox's prepare -> check -> decide (audited) -> `tool_started`
(fsynced) -> run) and `finish` (the tool_result, the `tool_call` record, the terminal update); `cancelled`
keeps what finished of a cancelled turn. Persist before notify; every update is built once, here, with the
values of agentd.core.events. Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentd import failpoints
from agentd.core import compaction, events, fit
from agentd.core.journal import new_message_id
from agentd.core.replies import NOT_AN_OBJECT, cut_note, object_input, unique_tool_use_ids
from agentd.core.toolbox import Call
from agentd.core.validate import validate_request
from agentd.core.window import learn_window
from agentd.errors import AgentdError, ContextExceeded, InvalidHistory, ProviderError
from agentd.log import failure_reason
from agentd.permissions.gate import Decision
from agentd.persistence.records import TodosRecord, ToolCallRecord, ToolStartedRecord, WithdrawnRecord
from agentd.protocol import updates
from agentd.providers.base import ModelRequest, ModelResponse, StreamEvent, run_with_retries
from agentd.text import MAX_JSON_DEPTH, deeper_than, scrub_surrogates, surrogate_error, surrogate_problems
from agentd.tools.base import ToolOutput, model_text, visible

if TYPE_CHECKING:
    from agentd.core.session import Session

log = logging.getLogger("agentd.loop")

Block = dict[str, Any]

STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}


async def run_turn(s: Session, prompt_blocks: list[Block]) -> str:
    """Run one turn to its stop reason (see Session.prompt). Cancellation returns `cancelled` with the
    history valid and persisted (PROTOCOL.md §12.2)."""
    return await Turn(s).run(prompt_blocks)


class Turn:
    """One turn of one session. `inflight`: the finished blocks of the reply being streamed (kept when the
    turn is cancelled); `tool_started_at`: clock time per running tool_use (for `durationMs`)."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self.inflight: list[Block] | None = None
        self.tool_started_at: dict[str, float] = {}
        self.void: str | None = (
            None  # the messageId of text a failed request streamed: the next one retracts it
        )

    async def run(self, prompt_blocks: list[Block]) -> str:
        s = self.s
        s.state = "running"
        await learn_window(s)  # the window the server serves, asked once (issue 17)
        prompt_id = new_message_id()
        await self.checkpoint("prompt", message_id=prompt_id, text=_title_of(prompt_blocks))
        prompt_id, prompt_blocks = self.start(prompt_blocks, prompt_id)
        await s.save_meta()  # a crash in this turn still leaves the title and turn count in meta.json
        stop = "max_turn_requests"
        answered = False  # did the model answer any of this prompt (a reply stored)?
        try:
            for _ in range(s.settings.max_turn_requests):
                await self.compress()
                response, message_id = await self.fitted_request()
                stored, repeats = self.store_reply(response, message_id)
                answered = answered or bool(stored)
                tool_uses = [b for b in stored if b.get("type") == "tool_use"]
                if tool_uses:
                    await self.tools(tool_uses, repeats)
                    continue
                stop = STOP_REASONS.get(response.stop_reason, "end_turn")
                break
        except asyncio.CancelledError:
            self.cancelled()
            stop = "cancelled"
        except Exception as exc:
            s.state = "idle"
            self.failed(prompt_id, prompt_blocks, answered, exc)
            s.hooks.on_turn_end("error")  # the turn stopped too (docs/hooks.md): observers hear of it
            raise
        finally:
            s.state = "idle"
            await self.end_checkpoint()
            try:
                await s.save_meta()
            except AgentdError as exc:  # never hide the error that ended the turn behind a meta.json one
                log.warning("session %s: meta.json not updated: %s", s.id, exc.message)
        s.hooks.on_turn_end(stop)
        return stop

    # ---- checkpoints (issue 13) ----------------------------------------------------------------------
    async def checkpoint(self, before: str, **fields: Any) -> None:
        """A checkpoint of the workspace (agentd.core.checkpoints; a failure is recorded, never raised), then
        its `checkpoint` update."""
        record = await self.s.checkpointer.take(before, **fields)
        if record is not None:
            self.s.emit(events.checkpoint(record))

    async def end_checkpoint(self) -> None:
        """The workspace as the turn left it (`N.end`); a failure to log it is logged, never the turn's end."""
        try:
            await self.checkpoint("turn_end")
        except AgentdError as exc:
            log.warning("session %s: the end-of-turn checkpoint was not recorded: %s", self.s.id, exc.message)

    # ---- start ---------------------------------------------------------------------------------------
    def start(self, prompt_blocks: list[Block], prompt_id: str) -> tuple[str, list[Block]]:
        """Persist, then apply: synthetic results for open tool_uses (audited as interrupted), the notes
        owed to the model (H3), the prompt (`prompt_id` its messageId); the title on the first turn (`run`
        then refreshes meta.json, CONTRACTS.md §9). Returns the prompt's messageId and blocks as stored."""
        s = self.s
        prompt_blocks = scrub_surrogates(prompt_blocks)  # e.g. undecodable bytes on argv (H19)
        synthetic = s.synthetic_results()
        notes = list(s.pending_notes)
        s.persist_prompt(prompt_blocks, prompt_id, synthetic, notes)
        s.pending_notes.clear()
        s.toolbox.audit_interrupted(_tool_uses(s), [b["tool_use_id"] for b in synthetic])
        for block in synthetic:
            s.context.add_user([block])
        if notes:
            s.context.add_user(notes)
        s.context.add_user(prompt_blocks)
        s.turns += 1
        if s.title is None:
            s.set_title(_title_of(prompt_blocks))
        return prompt_id, prompt_blocks

    def failed(self, prompt_id: str, prompt_blocks: list[Block], answered: bool, exc: Exception) -> None:
        """A turn that failed (issue 17 part 4): unanswered, the prompt is withdrawn from the history (a
        `withdrawn` record; replay does the same), so the next prompt does not repeat it; answered in part, or
        no longer at the tail (compressed to fit into a summary during the turn), the history keeps it and the
        model gets a note that the turn stopped there."""
        s = self.s
        reason = exc.message if isinstance(exc, AgentdError) else f"{type(exc).__name__}: {exc}"
        try:
            if not answered and s.context.withdraw(prompt_blocks):
                try:
                    s.journal.write(WithdrawnRecord(message_id=prompt_id, reason=reason))
                except AgentdError:  # memory never differs from the log: the prompt stays in both
                    s.context.add_user(prompt_blocks)
                    raise
                return
            note = {"type": "text", "text": failed_note(reason)}
            s.persist_message({"role": "user", "content": [note]}, new_message_id())
            s.context.add_user([note])
        except AgentdError as err:  # never hide the turn's error behind a storage one
            log.warning("session %s: the failed turn could not be recorded: %s", s.id, err.message)

    # ---- one request ---------------------------------------------------------------------------------
    async def compress(self) -> None:
        """Compress when the context reached the threshold; a failed summary request only skips it."""
        try:
            await compaction.compress(self.s)
        except ProviderError as exc:
            log.warning("compression skipped: the summary request failed: %s", exc.message)

    async def fitted_request(self) -> tuple[ModelResponse, str]:
        """One request that fits the window (issue 17): the history is compressed first when the estimate
        says it would not fit; a provider's `ContextExceeded` compresses once more and the request is retried
        once."""
        if not fit.fits(self.s):
            await self._room(None)
        try:
            return await self.stream(self.build())
        except ContextExceeded as exc:
            log.warning("the request did not fit the window: %s", exc.message)
            if not await self._room(exc):
                raise fit.no_room(self.s, exc) from None
        try:
            return await self.stream(self.build())
        except ContextExceeded as exc:
            raise fit.no_room(self.s, exc) from None

    async def _room(self, exc: ContextExceeded | None) -> bool:
        try:
            return await fit.make_room(self.s, exc)
        except ProviderError as err:  # the summary request failed too: the original error says more
            log.warning("compression to fit the window failed: %s", err.message)
            return False

    def build(self) -> ModelRequest:
        """The next request: the history with breakpoints, the request-only hooks (the blocks the reminder
        added are counted), then the validator (from the end of the Context's checked prefix on, unless a hook
        changed more than the last message; issue 16)."""
        s = self.s
        request = s.context.to_request(
            model=s.provider.model,
            system=s.system,
            tools=s.tool_defs,
            max_tokens=s.settings.max_output_tokens,
        )
        plain = request.messages
        request.messages = s.hooks.before_model(plain)
        if request.messages is not plain and plain and request.messages:
            request.reminder_blocks = max(0, len(request.messages[-1]["content"]) - len(plain[-1]["content"]))
            if len(request.messages) != len(plain) or request.messages[:-1] != plain[:-1]:
                request.checked = request.images = None  # a hook changed more than the last message: all
        err = validate_request(request.body(), request.checked, request.marked)
        if err:
            raise InvalidHistory(
                f"agentd refused to send an invalid request ({err}); this is a bug, please report it"
            )
        return request

    async def stream(self, request: ModelRequest) -> tuple[ModelResponse, str]:
        """Stream the reply with agentd's retries. Text chunks go out at once; a retry voids the partial
        reply (its text is retracted by the next reply's first chunk, CONTRACTS.md §6). Returns the
        response and the messageId its text streamed under."""
        s = self.s
        finished: list[Block] = []
        ids = [new_message_id()]
        streamed = [False]  # did the current attempt emit text under ids[-1]?
        retract: list[str | None] = [self.void]  # the messageId the next first chunk retracts
        self.void = None

        def on_event(ev: StreamEvent) -> None:
            if ev.kind == "text_delta" and ev.text:
                s.emit(updates.agent_message_chunk(ids[-1], ev.text, retracts=retract[0]))
                retract[0], streamed[0] = None, True
            elif ev.kind == "block_done" and ev.block is not None:
                finished.append(ev.block)

        def on_retry(attempt: int, delay: float, err: ProviderError) -> None:
            s.emit(updates.retry(attempt, delay, err.message, err.http_status))
            finished.clear()
            if streamed[0]:
                retract[0] = ids[-1]
                ids.append(new_message_id())
                streamed[0] = False

        async def attempt(n: int) -> ModelResponse:
            finished.clear()
            return await s.provider.stream(request, on_event)

        self.inflight = finished
        try:
            response = await run_with_retries(
                attempt, clock=s.clock, max_total_s=s.settings.retries.max_total_s, on_retry=on_retry
            )
        except asyncio.CancelledError:
            raise  # cancelled() keeps the finished blocks of this reply
        except BaseException:
            self.inflight = None  # a failed reply is never stored later
            self.void = ids[-1] if streamed[0] else retract[0]  # a request sent again retracts what it showed
            raise
        self.inflight = None
        s.account(response)
        return response, ids[-1]

    def store_reply(self, response: ModelResponse, message_id: str) -> tuple[list[Block], dict[str, str]]:
        """Store the assistant message: never empty, never a truncated tool_use, never a repeated tool_use
        id (case C16: a repeat gets a fresh id and is refused, not run). Returns the stored blocks and the
        repeats (original id by fresh id). A truncated call is reported to the model (issue 9 H3)."""
        s = self.s
        cut = {tid: response.truncated_tool_names.get(tid, "") for tid in response.truncated_tool_use_ids}
        # A cut call is never in `content` (ModelResponse): a complete call that shares its id runs (break9).
        blocks, renames = unique_tool_use_ids(response.content, s.context.tool_use_ids())
        s.toolbox.invalid_inputs.update(
            response.invalid_tool_inputs
        )  # malformed calls written as text (issue 17)
        blocks = self._valid_unicode(blocks)
        runs = any(b.get("type") == "tool_use" for b in blocks)
        stored = self._store_assistant(
            blocks, message_id, response.extra or None, cut if cut and not runs else None
        )
        if not stored:
            s.journal.sync()
        s.context.record_usage(response.usage, s.context.last_request_estimate)
        if cut:
            self._note_cut(list(cut.values()), now=runs or not stored)
        return (blocks if stored else []), {r.new: r.old for r in renames if r.repeat}

    def _store_assistant(
        self, blocks: list[Block], message_id: str, extra: dict[str, Any] | None, cut: dict[str, str] | None
    ) -> bool:
        """Apply, persist, and roll back when persisting failed (memory never gets ahead of the log)."""
        ctx = self.s.context
        if not ctx.add_assistant(blocks, extra):
            return False
        try:
            self.s.persist_message(ctx.last() or {}, message_id, cut=cut)
        except BaseException:  # e.g. a full disk
            ctx.drop_last()
            raise
        return True

    def _note_cut(self, names: list[str], *, now: bool) -> None:
        """Tell the model which calls were cut off at max_tokens (issue 9 H3). `now`: the note joins the user
        message that follows the reply at once (this round's tool_results, or the last user message when
        nothing was stored); else the turn ends on the assistant's reply and the note goes with the next
        prompt (`Session.pending_notes`; replay restores it from the reply's `cut` field)."""
        note = cut_note(names)
        if not now:
            self.s.pending_notes.append(note)
            return
        self.s.persist_message({"role": "user", "content": [note]}, new_message_id())
        self.s.context.add_user([note])

    def _valid_unicode(self, blocks: list[Block]) -> list[Block]:
        """What a reply may hold (H19): lone surrogates become U+FFFD and an input nested too deeply or not an
        object (H1 class, break9) becomes `{}`, so the reply can be stored and sent again; such a tool_use is
        answered with `invalid_arguments` instead of running (`Toolbox.invalid_inputs`)."""
        invalid = self.s.toolbox.invalid_inputs
        out = []
        for b in blocks:
            b, changed = object_input(b)
            if changed:
                invalid[str(b.get("id"))] = NOT_AN_OBJECT
            if b.get("type") == "tool_use" and deeper_than(b.get("input")):
                invalid[str(b.get("id"))] = (
                    f"invalid_arguments: input: nested deeper than {MAX_JSON_DEPTH} levels; send a flatter input"
                )
                b = {**b, "input": {}}
            problems = surrogate_problems(b.get("input")) if b.get("type") == "tool_use" else []
            if problems:
                invalid[str(b.get("id"))] = surrogate_error(problems)
            out.append(scrub_surrogates(b))
        return out

    # ---- tools -------------------------------------------------------------------------------------
    async def tools(self, tool_uses: list[Block], repeats: dict[str, str]) -> None:
        """One round: each tool_use in order; the round counts for the stale-plan reminder even when it is
        cancelled, exactly as replay counts it (CONTRACTS.md §3)."""
        failpoints.hit("loop.after_tool_use_persisted")
        todo_ok = False
        try:
            for tu in tool_uses:
                ok = await self.tool(tu, repeats.get(tu["id"]))
                todo_ok = todo_ok or (ok and tu.get("name") == "todo_write")
        finally:
            self.s.tracker.end_round(todo_ok)

    async def tool(self, tu: Block, repeat_of: str | None) -> bool:
        """prepare -> `tool_call` (pending) -> check -> decide (audited) -> `tool_started` (fsynced) ->
        `in_progress` -> run -> finish. Returns True when the call ran and succeeded."""
        s, box = self.s, self.s.toolbox
        call = box.prepare(tu, repeat_of)
        s.emit(updates.tool_call(call.id, call.title, call.kind, call.raw))
        await box.check(call)
        await s.settled()  # the editor has the `tool_call` before any approval request about it
        s.state = "running" if call.refusal else "awaiting_permission"
        try:
            decision = await box.decide(call)
        finally:
            s.state = "running"
        if not decision.allowed:
            self.finish(call, box.refused(call, decision), decision)
            return False
        if call.name == "run_command":  # what a command changes is beyond any diff: a checkpoint first
            await self.checkpoint("run_command", tool_call_id=call.id, text=_command_of(call.raw))
        s.journal.write(ToolStartedRecord(tool_call_id=call.id))
        box.started.add(call.id)
        self.tool_started_at[call.id] = s.clock.now()
        failpoints.hit("loop.after_tool_started")
        s.emit(updates.tool_call_update(call.id, "in_progress"))
        await s.journal.durable()  # `tool_started` is on disk before the tool runs (CONTRACTS.md §9)
        out = await box.run(call)
        self.finish(call, out, decision)
        if call.name == "todo_write" and not out.is_error:
            s.journal.write(TodosRecord(todos=s.tracker.as_dicts()))
            s.emit(events.plan(s.tracker))
        return not out.is_error

    def finish(self, call: Call, out: ToolOutput, decision: Decision) -> None:
        """Persist the tool_result (fsynced) and the `tool_call` record, apply, then notify: the terminal
        update with its decision and duration, and the `[Tool]` line. What the tool reports beside its text
        (a listing's names, locations, a diff's path, the title) may hold lone surrogates (a file name that is
        not UTF-8): they become U+FFFD like the text, so the record and the update can be written (H19 class,
        break9)."""
        s = self.s
        out.raw_output, out.diff = scrub_surrogates(out.raw_output), scrub_surrogates(out.diff)
        out.locations, call.title = scrub_surrogates(out.locations), scrub_surrogates(call.title)
        full = model_text(out.content, secrets=s.secrets)
        output_blob = s.journal.large_output(full)  # C07: the whole output stays on disk
        # what the model sees: at most a quarter of the window in bytes, and in pessimistic tokens (issue 17)
        cap = fit.tool_output_bytes(full, s.window_tokens)
        out.content = model_text(full, max_bytes=min(max(8192, s.window_tokens), cap or 1 << 62))
        block: Block = {"type": "tool_result", "tool_use_id": call.id, "content": out.content}
        if out.images:  # an MCP tool's pictures follow its text (the OpenAI provider turns them into text)
            block["content"] = [{"type": "text", "text": out.content or "(image)"}, *out.images]
        if out.is_error:
            block["is_error"] = True
        s.persist_message({"role": "user", "content": [block]}, new_message_id())
        s.context.add_user([block])
        status = "failed" if out.is_error else "completed"
        record = ToolCallRecord(
            tool_call_id=call.id, status=status, title=call.title, tool_kind=call.kind, raw_input=call.raw,
            raw_output=out.raw_output, diff=s.journal.diff(out.diff), locations=out.locations,
            decided_by=decision.decided_by,
        )  # fmt: skip
        if output_blob:
            record.output_blob = output_blob
        s.journal.write(record)
        started = call.id in self.tool_started_at
        meta = events.tool_outcome(decision, started=started, duration_ms=self._ms(call.id))
        content = updates.tool_content(out.diff, out.content)
        s.emit(updates.tool_call_update(call.id, status, content=content, rawOutput=out.raw_output,
                                        locations=out.locations, meta=meta))  # fmt: skip
        line = f"[Tool] {visible(call.title, one_line=True)} -> {status}"
        if out.is_error:  # the reason in one line (H9)
            line += ": " + visible(failure_reason(out.content, out.raw_output), one_line=True)
        s.lines(line)

    def _ms(self, tool_use_id: str) -> int:
        started = self.tool_started_at.pop(tool_use_id, None)
        return int((self.s.clock.now() - started) * 1000) if started is not None else 0

    # ---- cancel ------------------------------------------------------------------------------------
    def cancelled(self) -> None:
        """After a cancel: keep the finished blocks of the reply in flight (ids made unique); audit and mark
        failed every tool_use left open. Their synthetic results go with the next prompt (CONTRACTS.md §9)."""
        s = self.s
        if self.inflight:
            blocks = [b for b in self.inflight if b.get("type") in ("text", "tool_use")]
            blocks, _ = unique_tool_use_ids(blocks, s.context.tool_use_ids())
            blocks = self._valid_unicode(blocks)  # never run, but stored and sent again (H19, break9)
            self._store_assistant(blocks, new_message_id(), None, None)
            self.inflight = None
        open_ids = s.context.open_tool_use_ids()
        s.toolbox.audit_interrupted(_tool_uses(s, last_only=True), open_ids)
        for tid in open_ids:
            meta = events.tool_outcome(None, started=False, duration_ms=self._ms(tid), cancelled=True)
            s.emit(updates.tool_call_update(tid, "failed", meta=meta))
        s.journal.sync()
        log.info("session %s: turn cancelled; open tool uses: %s", s.id, open_ids)


def failed_note(reason: str) -> str:
    """The note the model gets after a turn that stopped on an error (issue 17 part 4)."""
    return f"[agentd: the previous turn stopped before it was finished: {reason}]"


def _tool_uses(s: Session, *, last_only: bool = False) -> dict[str, Block]:
    """The tool_use blocks of the active history (or of its last assistant message) by id."""
    assistants = [m for m in s.context.view() if m["role"] == "assistant"]
    if last_only:
        assistants = assistants[-1:]
    return {b["id"]: b for m in assistants for b in m["content"] if b.get("type") == "tool_use"}


def _command_of(raw: Any) -> str | None:
    command = raw.get("command") if isinstance(raw, dict) else None
    return command if isinstance(command, str) else None


def _title_of(blocks: list[Block]) -> str:
    """PROTOCOL.md §7.2: the first line of the first prompt, whitespace collapsed, cut to 80 characters
    (not the text of every block: an attached file would fill the title)."""
    lines = (ln for b in blocks if b.get("type") == "text" for ln in str(b.get("text", "")).splitlines())
    text = " ".join(next((ln for ln in lines if ln.strip()), "").split())
    return (text[:77] + "...") if len(text) > 80 else text
