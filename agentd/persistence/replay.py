"""Replay: rebuild a session's state from its log (CONTRACTS.md §3, §9; cases C01, C09, C10).

Owns: `replay_into(session, records)` and `rebuild_history(records, read_blob)`. Rebuilds, in log order,
the Context (messages exactly as sent, compaction applied), the TodoTracker (last snapshot and the
recomputed stale-round counter), the "always" grants, the mode, the title, turns and token totals.
Nothing is written: synthetic results for tool_uses left open are added in memory for the check only and
persisted with the next prompt, so resuming any number of times leaves the log byte-identical.
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentd.core.replies import IdRepair, cut_note
from agentd.core.validate import validate_messages
from agentd.errors import StorageError
from agentd.providers.base import Usage

if TYPE_CHECKING:
    from agentd.core.session import Session


def restore_message(payload: dict[str, Any], read_blob: Callable[[str], bytes]) -> dict[str, Any]:
    """The API message of a `message` record, with blob-backed tool_result texts read back.

    Read-only for the caller: the record is not copied (the Context copies what it stores), except the
    blocks whose text comes from a blob, so the record itself never changes. No deep copy: a resume
    must cost a small constant times parsing the log (TESTING.md §5.2 `resume_ratio`)."""
    msg = payload["message"]
    blobs = payload.get("blobs")
    if blobs:
        content = list(msg["content"])
        for j, ref in blobs.items():
            content[int(j)] = {**content[int(j)], "content": read_blob(ref).decode("utf-8")}
        msg = {**msg, "content": content}
    return msg


class _Rounds:
    """Recomputes the stale-round counter: per stored assistant message, the check and reset made before
    its request, then the count of its reply once its tool_results are known (CONTRACTS.md §3)."""

    def __init__(self, session: Session) -> None:
        self.todos = session.p.todos
        self.pending: dict[str, Any] | None = None
        self.todo_ids: set[str] = set()
        self.todo_ok = False

    def flush(self) -> None:
        if self.pending is not None:
            self.todos.replay_reply(self.pending, self.todo_ok)
        self.pending, self.todo_ids, self.todo_ok = None, set(), False

    def assistant(self, msg: dict[str, Any]) -> None:
        self.flush()
        self.pending = msg
        self.todo_ids = {
            b["id"] for b in msg["content"] if b.get("type") == "tool_use" and b.get("name") == "todo_write"
        }

    def user(self, msg: dict[str, Any]) -> None:
        for b in msg["content"]:
            if (
                b.get("type") == "tool_result"
                and b.get("tool_use_id") in self.todo_ids
                and not b.get("is_error")
            ):
                self.todo_ok = True


def replay_into(session: Session, records: list[dict[str, Any]]) -> None:
    """Apply `records` (decoded log lines, in order) to a freshly built session. Raises StorageError when
    the rebuilt history cannot be made valid (CONTRACTS.md §8 validator)."""
    p = session.p
    ctx = p.context
    rounds = _Rounds(session)
    ids = IdRepair()  # a log written before case C16 was fixed may repeat tool_use ids
    measured: Usage | None = None  # the last response's usage, applied once its reply is in the Context
    last_todos: list[dict[str, Any]] | None = None
    cut: dict[str, str] | None = None  # tool_uses of the last reply cut off at max_tokens (H3)
    prompts: dict[str, list[dict[str, Any]]] = {}  # the last prompt's blocks by messageId (for `withdrawn`)
    for rec in records:
        kind = rec.get("kind")
        if kind == "message":
            msg = restore_message(rec, p.store.read_blob)
            if msg["role"] == "assistant":
                msg = {**msg, "content": ids.assistant(msg["content"], ctx.tool_use_ids())}
                extra = {k: v for k, v in msg.items() if k not in ("role", "content")}
                ctx.add_assistant(msg["content"], extra or None, adopt=True)
                rounds.assistant(msg)
                _apply_usage(ctx, measured)
                measured = None
                cut = rec.get("cut") or None
            else:
                _apply_usage(ctx, measured)  # the reply of that request was empty
                measured = None
                msg = {**msg, "content": ids.user(msg["content"])}
                prompts = {rec.get("messageId", ""): copy.deepcopy(msg["content"])}
                ctx.add_user(msg["content"], adopt=True)
                rounds.user(msg)
                cut = None
        elif kind == "prompt":
            session.turns += 1
        elif kind == "tool_started":
            session.started_tool_ids.add(rec["toolCallId"])
        elif kind == "todos":
            last_todos = rec["todos"]
            p.todos.restore(last_todos, p.todos.stale_count)
        elif kind == "grant" and p.gate.accept_record("grant", rec):  # only what agentd signed (issue 12)
            p.gate.grants.add(rec["tool"], rec["grant"])
        elif kind == "mode" and p.gate.accept_record("mode", rec):
            p.gate.mode = rec["mode"]
        elif kind == "title":
            session.title = rec.get("title")
        elif kind == "usage":
            measured = Usage.from_json(rec.get("usage") or {})
            session.totals.add(measured, rec.get("model", ""))
        elif kind == "withdrawn":  # a failed turn's unanswered prompt (issue 17)
            ctx.withdraw(prompts.get(rec.get("messageId", ""), []))
        elif kind == "compaction":
            measured = None  # that usage was the summary request's
            ctx.replace_prefix(rec["replaced"], rec["summary"], rec.get("ack"))
    _apply_usage(ctx, measured)
    rounds.flush()
    if cut:  # the turn ended on a reply whose calls were cut off: the note goes with the next prompt
        session.pending_notes = [cut_note(cut.values())]
    if last_todos is not None:
        p.todos.restore(last_todos, p.todos.stale_count)
    check_history(session)


def _apply_usage(ctx: Any, usage: Usage | None) -> None:
    """The exact context size after a response, as the live loop recorded it (no recalibration)."""
    if usage is not None:
        ctx.record_usage(usage, 0)


def check_history(session: Session) -> None:
    """Run the validator on the rebuilt history as the next request would see it (open tool_uses answered
    by their synthetic results). An empty history is fine (a session with no prompt yet)."""
    messages = list(session.p.context.view())  # shared messages, never mutated here: no deep copy
    if not messages:
        return
    synthetic = session.synthetic_results()
    if synthetic:
        if messages[-1]["role"] == "user":
            messages[-1] = {**messages[-1], "content": synthetic + messages[-1]["content"]}
        else:
            messages.append({"role": "user", "content": synthetic})
    if messages[-1]["role"] == "assistant":
        messages.append({"role": "user", "content": [{"type": "text", "text": "continue"}]})
    err = validate_messages(messages)
    if err:
        raise StorageError(
            f"Session {session.id} cannot be resumed: its history is invalid ({err}). Read it with "
            f"agentd sessions show {session.id}, or start a new session."
        )
