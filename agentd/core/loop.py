"""The agent loop: one turn, as data (ARCHITECTURE.md "One turn"; CONTRACTS.md §2-§9).

Owns: `run_turn(session, prompt_blocks) -> stop_reason`. Per request: hooks `before_model` (the stale-plan
reminder, request-only), compaction check, `Context.to_request()`, the validator, the provider stream with
agentd's retries, the stored assistant message; per tool_use: validate -> gate -> audit (fsynced) ->
`tool_started` (fsynced) -> run -> tool_result (fsynced) -> update. Persist before notify.
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from agentd import failpoints
from agentd.core import compaction, fit
from agentd.core.replies import cut_note, repeat_text, unique_tool_use_ids
from agentd.core.session import Session, new_message_id
from agentd.core.validate import validate_messages, validate_request
from agentd.core.window import learn_window
from agentd.errors import AgentdError, ContextExceeded, ProviderError
from agentd.log import failure_reason
from agentd.permissions.gate import Decision, denial_text
from agentd.protocol import updates
from agentd.providers.base import ModelRequest, ModelResponse, StreamEvent, run_with_retries
from agentd.text import (
    MAX_JSON_DEPTH,
    deeper_than,
    scrub_surrogates,
    surrogate_error,
    surrogate_problems,
)
from agentd.tools.base import PathRefused, ToolOutput, model_text, visible

log = logging.getLogger("agentd.loop")

STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}


class InvalidHistory(AgentdError):
    """agentd built a request its own validator rejects: a bug; nothing is sent (CONTRACTS.md §8)."""

    rpc_code = -32603


async def run_turn(s: Session, prompt_blocks: list[dict[str, Any]]) -> str:
    """Run one turn to its stop reason (see Session.prompt). Cancellation returns `cancelled` with the
    history valid and persisted (PROTOCOL.md §12.2)."""
    s.state = "running"
    await learn_window(s.p)  # the window the server serves, asked once (issue 17)
    prompt_blocks = scrub_surrogates(prompt_blocks)  # e.g. undecodable bytes on argv (H19)
    synthetic = s.synthetic_results()
    notes = list(s.pending_notes)
    prompt_id = new_message_id()
    s.persist_prompt(prompt_blocks, prompt_id, synthetic, notes)
    s.pending_notes.clear()
    _audit_interrupted(s, synthetic)
    for block in synthetic:
        s.p.context.add_user([block])
    if notes:
        s.p.context.add_user(notes)
    s.p.context.add_user(prompt_blocks)
    s.turns += 1
    if s.title is None:
        s.title = _title_of(prompt_blocks)
        s.p.store.append("title", {"title": s.title})
    s.update_meta()  # a crash in this turn still leaves the title and turn count in meta.json
    stop = "max_turn_requests"
    answered = False  # did the model answer any of this prompt (a reply stored)?
    try:
        for _ in range(s.p.settings.max_turn_requests):
            await _maybe_compress(s)
            response, message_id = await _fitted_request(s)
            stored, repeats = _store_reply(s, response, message_id)
            answered = answered or bool(stored)
            tool_uses = [b for b in stored if b.get("type") == "tool_use"]
            if tool_uses:
                await _run_tools(s, tool_uses, repeats)
                continue
            stop = STOP_REASONS.get(response.stop_reason, "end_turn")
            break
    except asyncio.CancelledError:
        _cancelled(s)
        stop = "cancelled"
    except Exception as exc:
        s.state = "idle"
        _failed(s, prompt_id, prompt_blocks, answered, exc)
        raise
    finally:
        s.state = "idle"
        try:
            s.update_meta()
        except AgentdError as exc:  # never hide the error that ended the turn behind a meta.json one
            log.warning("session %s: meta.json not updated: %s", s.id, exc.message)
    s.p.hooks.on_turn_end(stop)
    return stop


async def _fitted_request(s: Session) -> tuple[ModelResponse, str]:
    """One request that fits the window (issue 17): the history is compressed first when the estimate says it
    would not fit; a provider's `ContextExceeded` compresses once more and the request is retried once."""
    if not fit.fits(s):
        await _room(s, None)
    try:
        return await _request(s)
    except ContextExceeded as exc:
        log.warning("the request did not fit the window: %s", exc.message)
        if not await _room(s, exc):
            raise
        return await _request(s)


async def _room(s: Session, exc: ContextExceeded | None) -> bool:
    try:
        return await fit.make_room(s, exc)
    except ProviderError as err:  # the summary request failed too: the original error says more
        log.warning("compression to fit the window failed: %s", err.message)
        return False


def _failed(
    s: Session, prompt_id: str, prompt_blocks: list[dict[str, Any]], answered: bool, exc: Exception
) -> None:
    """A turn that failed (issue 17 part 4): unanswered, the prompt is withdrawn from the history (a
    `withdrawn` record; replay does the same), so the next prompt does not repeat it; answered in part, the
    history keeps the prompt and the model gets a note that the turn stopped there."""
    reason = exc.message if isinstance(exc, AgentdError) else f"{type(exc).__name__}: {exc}"
    try:
        if not answered:
            if s.p.context.withdraw(prompt_blocks):
                try:
                    s.p.store.append("withdrawn", {"messageId": prompt_id, "reason": reason})
                except AgentdError:  # memory never differs from the log: the prompt stays in both
                    s.p.context.add_user(prompt_blocks)
                    raise
            return
        note = {"type": "text", "text": failed_note(reason)}
        s.persist_message({"role": "user", "content": [note]}, new_message_id())
        s.p.context.add_user([note])
    except AgentdError as err:  # never hide the turn's error behind a storage one
        log.warning("session %s: the failed turn could not be recorded: %s", s.id, err.message)


def failed_note(reason: str) -> str:
    """The note the model gets after a turn that stopped on an error (issue 17 part 4)."""
    return f"[agentd: the previous turn stopped before it was finished: {reason}]"


def _audit_interrupted(s: Session, synthetic: list[dict[str, Any]]) -> None:
    """Every tool_use gets exactly one audit record (CONTRACTS.md §5): one cut off by a crash before its
    decision is recorded now, as interrupted (`cancel`), when its synthetic result is persisted."""
    if not synthetic:
        return
    audited = s.p.audit.tool_use_ids() | s.audited_ids
    uses = {
        b["id"]: b
        for m in s.p.context.view()
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use"
    }
    for block in synthetic:
        tid = block["tool_use_id"]
        if tid not in audited and tid in uses:
            s.p.audit.record(
                s.id, tid, uses[tid].get("name", ""), uses[tid].get("input"), Decision.cancelled()
            )
            s.audited_ids.add(tid)


def _title_of(blocks: list[dict[str, Any]]) -> str:
    """PROTOCOL.md §7.2: the first line of the first prompt, whitespace collapsed, cut to 80 characters
    (not the text of every block: an attached file would fill the title)."""
    lines = (ln for b in blocks if b.get("type") == "text" for ln in str(b.get("text", "")).splitlines())
    text = " ".join(next((ln for ln in lines if ln.strip()), "").split())
    return (text[:77] + "...") if len(text) > 80 else text


# ---- one request ---------------------------------------------------------------------------------
def _build(s: Session) -> ModelRequest:
    ctx = s.p.context
    request = ctx.to_request(
        model=s.p.provider.model,
        system=s.p.system,
        tools=s.p.tool_defs,
        max_tokens=s.p.settings.max_output_tokens,
    )
    plain = request.messages
    request.messages = s.p.hooks.before_model(plain)
    if request.messages is not plain and plain and request.messages:  # how many blocks the reminder added
        added = len(request.messages[-1]["content"]) - len(plain[-1]["content"])
        request.reminder_blocks = max(0, added)
    err = validate_request(request.body())
    if err:
        raise InvalidHistory(
            f"agentd refused to send an invalid request ({err}); this is a bug, please report it"
        )
    return request


async def _request(s: Session) -> tuple[ModelResponse, str]:
    request = _build(s)
    message_id = new_message_id()
    finished: list[dict[str, Any]] = []
    ids = [message_id]
    streamed = [False]  # did the current attempt emit text under ids[-1]?
    retract: list[str | None] = [None]  # the messageId the next first chunk retracts

    def on_event(ev: StreamEvent) -> None:
        if ev.kind == "text_delta" and ev.text:
            s.emit(updates.agent_message_chunk(ids[-1], ev.text, retracts=retract[0]))
            retract[0], streamed[0] = None, True
        elif ev.kind == "block_done" and ev.block is not None:
            finished.append(ev.block)

    def on_retry(attempt: int, delay: float, err: ProviderError) -> None:
        """A retry voids the partial reply: text shown so far is retracted by the next reply's first chunk.
        The editor hears of the retry at once (a `retry` update: why, and how long until the next try)."""
        s.emit(updates.retry(attempt, delay, err.message, err.http_status))
        finished.clear()
        if streamed[0]:
            retract[0] = ids[-1]
            ids.append(new_message_id())
            streamed[0] = False

    async def attempt(n: int) -> ModelResponse:
        finished.clear()
        return await s.p.provider.stream(request, on_event)

    s._inflight = finished  # type: ignore[attr-defined]
    try:
        response = await run_with_retries(
            attempt, clock=s.p.clock, max_total_s=s.p.settings.retries.max_total_s, on_retry=on_retry
        )
    except asyncio.CancelledError:
        raise  # _cancelled() keeps the finished blocks of this reply
    except BaseException:
        s._inflight = None  # type: ignore[attr-defined]  # a failed reply is never stored later
        raise
    s._inflight = None  # type: ignore[attr-defined]
    _account(s, response)
    return response, ids[-1]


def _account(s: Session, response: ModelResponse) -> None:
    usage = response.usage
    s.totals.add(usage, s.p.provider.model)
    line = usage.accounting_line()
    s.p.store.append(
        "usage", {"usage": usage.to_json(), "model": response.model or s.p.provider.model}, fsync=False
    )
    s.p.lines(line)
    s.emit(updates.usage_update(usage.to_json(), s.totals.to_json(), line))


def _store_reply(
    s: Session, response: ModelResponse, message_id: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Store the assistant message: never empty, never a truncated tool_use, never a repeated tool_use id
    (case C16: a repeat gets a fresh id and is refused, not run). Returns the stored blocks and the
    repeats (original id by fresh id). A truncated call is reported to the model (issue 9 H3)."""
    cut = {tid: response.truncated_tool_names.get(tid, "") for tid in response.truncated_tool_use_ids}
    blocks = [b for b in response.content if not (b.get("type") == "tool_use" and b.get("id") in cut)]
    ctx = s.p.context
    blocks, renames = unique_tool_use_ids(blocks, ctx.tool_use_ids())
    s.invalid_inputs.update(response.invalid_tool_inputs)  # malformed calls written as text (issue 17)
    blocks = _valid_unicode(s, blocks)
    runs = any(b.get("type") == "tool_use" for b in blocks)
    stored = ctx.add_assistant(blocks, response.extra or None)
    if stored:
        try:
            s.persist_message(ctx.last() or {}, message_id, cut=cut if cut and not runs else None)
        except BaseException:  # memory never gets ahead of the log (a failed append, e.g. a full disk)
            ctx.drop_last()
            raise
    else:
        s.p.store.sync()
    ctx.record_usage(response.usage, ctx.last_request_estimate)
    if cut:
        _note_cut(s, list(cut.values()), now=runs or not stored)
    return (blocks if stored else []), {r.new: r.old for r in renames if r.repeat}


def _note_cut(s: Session, names: list[str], *, now: bool) -> None:
    """Tell the model which calls were cut off at max_tokens (issue 9 H3). `now`: the note joins the user
    message that follows the reply at once (the tool_results of this round, or the last user message when
    nothing was stored); else the turn ends on the assistant's reply and the note goes with the next
    prompt (`Session.pending_notes`; replay restores it from the reply's `cut` field)."""
    note = cut_note(names)
    if not now:
        s.pending_notes.append(note)
        return
    s.persist_message({"role": "user", "content": [note]}, new_message_id())
    s.p.context.add_user([note])


def _valid_unicode(s: Session, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a reply may hold (H19): lone surrogates become U+FFFD and an input nested too deeply becomes
    `{}`, so the reply can be stored and sent again; such a tool_use is answered with `invalid_arguments`
    instead of running (`s.invalid_inputs`)."""
    out = []
    for b in blocks:
        if b.get("type") == "tool_use" and deeper_than(b.get("input")):
            s.invalid_inputs[str(b.get("id"))] = (
                f"invalid_arguments: input: nested deeper than {MAX_JSON_DEPTH} levels; send a flatter input"
            )
            b = {**b, "input": {}}
        problems = surrogate_problems(b.get("input")) if b.get("type") == "tool_use" else []
        if problems:
            s.invalid_inputs[str(b.get("id"))] = surrogate_error(problems)
        out.append(scrub_surrogates(b))
    return out


# ---- compaction ----------------------------------------------------------------------------------
async def _maybe_compress(s: Session) -> None:
    try:
        await compress(s)
    except ProviderError as exc:
        log.warning("compression skipped: the summary request failed: %s", exc.message)


async def compress(s: Session, *, force: bool = False, cut: int | None = None) -> bool:
    """Compress the active history (CONTRACTS.md §7): when the estimate reaches the threshold, or at once
    with `force` (agentd/session/compact). Returns True when the history was replaced.

    The summary request and the rebuilt history are validated before anything changes; the original
    messages stay in the log and a `compaction` record says what the summary replaces. Raises
    ProviderError when the summary request fails (the history is then unchanged), InvalidHistory on a bug.
    """
    cfg = s.p.settings.context
    ctx = s.p.context
    threshold = s.p.settings.compress_threshold(s.p.model_window)
    if not force and not compaction.should_compress(
        ctx, threshold_tokens=threshold, keep_recent=cfg.keep_recent_messages
    ):
        return False
    history = ctx.messages
    cut = cut if cut is not None else compaction.find_cut(history, cfg.keep_recent_messages)
    if cut is None or compaction.only_summary(history[:cut]):
        return False
    room = s.p.model_window - cfg.summary_max_tokens - ctx.static_tokens  # the summary request must fit
    request = compaction.summary_request(
        history[:cut],
        model=s.p.provider.model,
        system=s.p.system,
        tools=s.p.tool_defs,
        max_tokens=cfg.summary_max_tokens,
        prompt_caching=s.p.settings.prompt_caching,
        cache_ttl=ctx.stable_prefix_ttl(),
        max_chars=max(2000, room * 2),
    )
    err = validate_request(request.body())
    if err:
        raise InvalidHistory(f"agentd refused to send an invalid summary request ({err}); please report it")
    response = await run_with_retries(
        lambda _n: s.p.provider.stream(request, lambda _e: None),
        clock=s.p.clock,
        max_total_s=s.p.settings.retries.max_total_s,
    )
    _account(s, response)
    rebuilt = compaction.rebuild(
        history, cut, compaction.summary_text_from(response.content), s.p.todos.carry_over_text()
    )
    candidate = [rebuilt.summary, *([rebuilt.ack] if rebuilt.ack else []), *history[cut:]]
    err = validate_messages(candidate)
    if err:
        raise InvalidHistory(f"compaction produced an invalid history ({err}); please report it")
    ctx.replace_prefix(rebuilt.cut, rebuilt.summary, rebuilt.ack)
    s.p.store.append("compaction", {"replaced": rebuilt.cut, "summary": rebuilt.summary, "ack": rebuilt.ack})
    s.p.lines(f"[compressed history · {len(ctx)} messages left]")
    return True


# ---- tools ---------------------------------------------------------------------------------------
async def _run_tools(s: Session, tool_uses: list[dict[str, Any]], repeats: dict[str, str]) -> None:
    failpoints.hit("loop.after_tool_use_persisted")
    todo_ok = False
    try:
        for tu in tool_uses:
            ok = await (_refuse_repeat(s, tu, repeats[tu["id"]]) if tu["id"] in repeats else _run_one(s, tu))
            todo_ok = todo_ok or (ok and tu.get("name") == "todo_write")
    finally:  # a cancelled round counts too, exactly as replay counts it (CONTRACTS.md §3)
        s.p.todos.end_round(todo_ok)


def _diff_record(s: Session, diff: dict[str, Any] | None) -> dict[str, Any] | None:
    """The diff as logged: texts of `store.blob_min_bytes` or more go to blobs (`oldTextBlob`,
    `newTextBlob`), so one edit of a huge file does not put megabytes in the log (case C07)."""
    if not diff:
        return diff
    out = dict(diff)
    for key in ("oldText", "newText"):
        text = out.get(key)
        if isinstance(text, str) and len(text.encode("utf-8")) >= s.p.settings.store.blob_min_bytes:
            out[key + "Blob"] = s.p.store.write_blob(text.encode("utf-8"))
            del out[key]
    return out


def _result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


def _finish(
    s: Session, tu: dict[str, Any], out: ToolOutput, decided_by: str | None, title: str, kind: str
) -> None:
    """Persist the tool_result (fsynced) and the tool_call record, then notify."""
    tid = tu["id"]
    full = model_text(out.content, secrets=s.p.secrets)
    output_blob = None
    if len(full.encode("utf-8")) >= s.p.settings.store.blob_min_bytes:  # C07: the whole output stays on disk
        output_blob = s.p.store.write_blob(full.encode("utf-8"))
    # what the model sees: at most a quarter of the window in bytes, and in pessimistic tokens (issue 17)
    cap = fit.tool_output_bytes(full, s.p.model_window)
    out.content = model_text(full, max_bytes=min(max(8192, s.p.model_window), cap or 1 << 62))
    block = _result(tid, out.content, out.is_error)
    if out.images:  # an MCP tool's pictures follow its text (the OpenAI provider turns them into text)
        block["content"] = [{"type": "text", "text": out.content or "(image)"}, *out.images]
    s.persist_message({"role": "user", "content": [block]}, new_message_id())  # persist, then apply
    s.p.context.add_user([block])
    status = "failed" if out.is_error else "completed"
    s.p.store.append(
        "tool_call",
        {
            "toolCallId": tid,
            "status": status,
            "title": title,
            "toolKind": kind,
            "rawInput": tu.get("input"),
            "rawOutput": out.raw_output,
            "diff": _diff_record(s, out.diff),
            "locations": out.locations,
            "decidedBy": decided_by,
            **({"outputBlob": output_blob} if output_blob else {}),
        },
    )
    content = [{"type": "content", "content": {"type": "text", "text": out.content}}]
    if out.diff:
        content.insert(0, {"type": "diff", **out.diff})
    s.emit(
        updates.tool_call_update(
            tid,
            status,
            content=content,
            rawOutput=out.raw_output,
            locations=out.locations or None,
            meta={"decidedBy": decided_by} if decided_by else None,
        )
    )
    line = f"[Tool] {visible(title, one_line=True)} -> {status}"
    if tu.get("name") == "todo_write" and not out.is_error:
        line += " " + out.content
    elif out.is_error:  # the reason in one line (H9)
        line += ": " + visible(failure_reason(out.content, out.raw_output), one_line=True)
    s.p.lines(line)


async def _refuse_repeat(s: Session, tu: dict[str, Any], old_id: str) -> bool:
    """A tool_use that repeated an id of an earlier call in its reply (case C16): audited once, answered
    with an `is_error` result under its fresh id, never run. Returns False (it did not succeed)."""
    name, raw, tid = tu.get("name", ""), tu.get("input"), tu["id"]
    tool = s.p.registry.get(name)
    kind = tool.kind if tool is not None else "other"
    s.emit(updates.tool_call(tid, name, kind, raw))
    text = repeat_text(old_id)
    d = Decision.invalid_input(text)
    s.p.gate.log(name, d)
    s.p.audit.record(s.id, tid, name, raw, d)
    s.audited_ids.add(tid)
    _finish(s, tu, ToolOutput(content=text, is_error=True), d.decided_by, name, kind)
    return False


async def _run_one(s: Session, tu: dict[str, Any]) -> bool:
    """Run one tool_use through validation, the gate and the audit log. Returns True when it succeeded."""
    name, raw, tid = tu.get("name", ""), tu.get("input"), tu["id"]
    tool = s.p.registry.get(name)
    ctx = s.p.tool_ctx
    if tool is None:
        s.emit(updates.tool_call(tid, name, "other", raw))
        text = f'unknown tool "{name}"; available tools: {", ".join(s.p.registry.names())}'
        d = Decision.unknown_tool(text)
        s.p.gate.log(name, d)
        s.p.audit.record(s.id, tid, name, raw, d)
        s.audited_ids.add(tid)
        _finish(s, tu, ToolOutput(content=text, is_error=True), d.decided_by, name, "other")
        return False
    args, err = tool.validate(raw, ctx)
    if tid in s.invalid_inputs:
        args, err = None, s.invalid_inputs.pop(tid)
    title = tool.title(args) if args is not None else name
    s.emit(updates.tool_call(tid, title, tool.kind, raw))
    outcome, preview = None, None
    if args is not None:
        try:
            tool.check(args, ctx)
            preview = await tool.preview(args, ctx)
        except PathRefused as refused:  # also a path swapped for a link between check and preview (H19)
            err, outcome = refused.text(), "refused_outside_workspace"
        except Exception as exc:  # odd input never ends the turn (H19); the details are in the log
            log.exception("tool %s: preparing the call failed", name)
            err = f"{name} could not prepare the call: {type(exc).__name__}: {exc}"
    if args is None or err is not None or preview is None:
        d = Decision.invalid_input(err or "invalid_arguments")
        s.p.gate.log(name, d)
        s.p.audit.record(s.id, tid, name, raw, d, outcome=outcome)
        s.audited_ids.add(tid)
        _finish(
            s,
            tu,
            ToolOutput(content=err or "invalid_arguments", is_error=True),
            d.decided_by,
            title,
            tool.kind,
        )
        return False
    s.state = "awaiting_permission"
    try:
        decision = await s.p.gate.decide(name, args, preview, tid, title=title)
    except asyncio.CancelledError:
        s.p.gate.log(name, Decision.cancelled())
        s.p.audit.record(s.id, tid, name, raw, Decision.cancelled())
        s.audited_ids.add(tid)
        raise
    finally:
        s.state = "running"
    s.p.audit.record(s.id, tid, name, raw, decision)
    s.audited_ids.add(tid)
    if decision.decision != "allow":
        _finish(
            s,
            tu,
            ToolOutput(content=denial_text(name, decision), is_error=True),
            decision.decided_by,
            title,
            tool.kind,
        )
        return False
    s.p.store.append("tool_started", {"toolCallId": tid}, fsync=True)
    s.started_tool_ids.add(tid)
    failpoints.hit("loop.after_tool_started")
    s.emit(updates.tool_call_update(tid, "in_progress"))
    try:
        out = await tool.run(args, ctx)
    except PathRefused as refused:
        out = ToolOutput(content=refused.text(), is_error=True)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool bug becomes the model's error, with the details in the log
        log.exception("tool %s failed", name)
        out = ToolOutput(content=f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
    failpoints.hit("loop.after_tool_exec")
    s.p.hooks.after_tool(name, out)
    _finish(s, tu, out, decision.decided_by, title, tool.kind)
    if name == "todo_write" and not out.is_error:
        s.p.store.append("todos", {"todos": s.p.todos.as_dicts()})
        s.emit(updates.plan(s.p.todos.plan_entries(), s.p.todos.snapshot_json()))
    return not out.is_error


def _cancelled(s: Session) -> None:
    """After a cancel: keep the finished blocks of the reply in flight; mark unfinished tool calls failed.
    Open tool_uses get their synthetic results with the next prompt (CONTRACTS.md §9)."""
    inflight = getattr(s, "_inflight", None)
    if inflight:
        blocks = [b for b in inflight if b.get("type") in ("text", "tool_use")]
        if s.p.context.add_assistant(blocks):
            try:
                s.persist_message(s.p.context.last() or {}, new_message_id())
            except BaseException:
                s.p.context.drop_last()
                raise
        s._inflight = None  # type: ignore[attr-defined]
    assistant = next((m for m in reversed(s.p.context.view()) if m["role"] == "assistant"), None)
    uses = {b["id"]: b for b in (assistant or {}).get("content", []) if b.get("type") == "tool_use"}
    for tid in s.p.context.open_tool_use_ids():
        if tid not in s.audited_ids and tid in uses:  # every tool_use gets exactly one audit record
            s.p.audit.record(
                s.id, tid, uses[tid].get("name", ""), uses[tid].get("input"), Decision.cancelled()
            )
            s.audited_ids.add(tid)
        s.emit(updates.tool_call_update(tid, "failed", meta={"cancelled": True, "decidedBy": "cancel"}))
    s.p.store.sync()
    log.info(
        "session %s: turn cancelled; open tool uses: %s", s.id, json.dumps(s.p.context.open_tool_use_ids())
    )
