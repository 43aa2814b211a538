"""Replay: rebuild a session's state from its log (CONTRACTS.md §3, §9; cases C01, C09, C10, C16).

Owns: `replay_into(session, records)`, `replay_branch(session, records)`, `preview_branch(session, records)`
(what a conversation rewind would leave, the session untouched) and `check_history(session)`.
Rebuilds, in log order, from the typed records of agentd.persistence.records: the Context (messages exactly as sent, repeated tool_use ids repaired,
compaction applied by agentd.core.compaction), the TodoTracker (last snapshot and the recomputed stale-round
counter), the "always" grants and the mode (only records agentd signed), the title, turns, token totals, the tools that started, the note
owed to the model after a cut-off reply (H3), and when the last todos snapshot was written. Nothing is
written: synthetic results for tool_uses left open are added in memory for the check only and persisted with
the next prompt, so resuming any number of times leaves the log byte-identical. Lives beside the Session it
rebuilds. Must not import pygls, lsprotocol, acp or adapters.

Branches (issue 13, agentd.persistence.branches): the conversation kinds count only on the active branch (a
conversation rewind left the others behind); grants, mode, title, checkpoints, rewinds, the prompt count and
every request's tokens count for the whole session. Every tool_use id in the log stays taken, abandoned
branches' too. `replay_branch` rebuilds only the conversation side (context, plan and reminder counter, open
tools, the owed note, the system prompt's instructions) in place, after a conversation rewind.
"""

from __future__ import annotations

import copy
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

from agentd.core import compaction
from agentd.core.instructions import Instructions
from agentd.core.prompts import system_blocks
from agentd.core.replies import IdRepair, cut_note
from agentd.core.validate import validate_messages
from agentd.errors import StorageError
from agentd.persistence import records as r
from agentd.persistence.branches import BRANCH_KINDS, ActiveBranch, active_seqs
from agentd.persistence.logindex import Entry
from agentd.providers.base import Usage

if TYPE_CHECKING:
    from agentd.core.session import Session
    from agentd.persistence.store import SessionStore


class _Rounds:
    """Recomputes the stale-round counter: per stored assistant message, the check and reset made before
    its request, then the count of its reply once its tool_results are known (CONTRACTS.md §3)."""

    def __init__(self, session: Session) -> None:
        self.todos = session.tracker
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


class _Replay:
    """One pass over a log, one small step per record kind."""

    def __init__(self, session: Session, *, branch_only: bool = False, restart: int | None = None) -> None:
        self.s = session
        self.branch_only = branch_only  # a rewind's rebuild: the session-wide state is kept as it is
        self.restart = restart  # the seq of the compaction record a resume starts at (issue 16)
        self.rounds = _Rounds(session)
        self.ids = IdRepair()  # a log written before case C16 was fixed may repeat tool_use ids
        self.measured: Usage | None = None  # the last response's usage, applied once its reply is stored
        self.last_todos: list[dict[str, Any]] | None = None
        self.cut: dict[str, str] | None = None  # tool_uses of the last reply cut off at max_tokens (H3)
        self.prompts: dict[str, list[dict[str, Any]]] = {}  # the last user message's blocks by messageId
        self.instructions: Instructions | None = None  # branch_only: the last instructions on the branch

    def apply(self, rec: dict[str, Any], model: r.Record, active: Container[int]) -> None:
        if model.kind in BRANCH_KINDS and rec.get("seq") not in active:
            if not self.branch_only:
                self._elsewhere(model)
            return
        if self.branch_only and model.kind not in BRANCH_KINDS:
            return
        step = getattr(self, "_" + model.kind, None)
        if step is not None:
            step(rec, model)

    def _elsewhere(self, m: r.Record) -> None:
        """A record of an abandoned branch: its prompt and its tokens still count for the session."""
        if isinstance(m, r.PromptRecord):
            self.s.turns += 1
        elif isinstance(m, r.UsageRecord) and not m.inherited:
            self.s.totals.add(Usage.from_json(m.usage), m.model)

    def _message(self, rec: dict[str, Any], m: r.MessageRecord) -> None:
        ctx = self.s.context
        msg = m.restore(self.s.journal.read_blob)
        if msg["role"] == "assistant":
            msg = {**msg, "content": self.ids.assistant(msg["content"], ctx.tool_use_ids())}
            extra = {k: v for k, v in msg.items() if k not in ("role", "content")}
            ctx.add_assistant(msg["content"], extra or None, adopt=True)
            self.rounds.assistant(msg)
            self._usage_applied()
            self.cut = m.cut or None
        else:
            self._usage_applied()  # the reply of that request was empty
            msg = {**msg, "content": self.ids.user(msg["content"])}
            self.prompts = {m.message_id: copy.deepcopy(msg["content"])}  # for a `withdrawn` record
            ctx.add_user(msg["content"], adopt=True)
            self.rounds.user(msg)
            self.cut = None

    def _usage_applied(self) -> None:
        """The exact context size after a response, as the live loop recorded it (no recalibration)."""
        if self.measured is not None:
            self.s.context.record_usage(self.measured, 0)
        self.measured = None

    def _prompt(self, rec: dict[str, Any], m: r.PromptRecord) -> None:
        if not self.branch_only:
            self.s.turns += 1

    def _tool_started(self, rec: dict[str, Any], m: r.ToolStartedRecord) -> None:
        self.s.toolbox.started.add(m.tool_call_id)

    def _todos(self, rec: dict[str, Any], m: r.TodosRecord) -> None:
        self.last_todos = m.todos
        self.s.tracker.restore(m.todos, self.s.tracker.stale_count)
        self.s.journal.todos_at = rec.get("at")

    def _grant(self, rec: dict[str, Any], m: r.GrantRecord) -> None:
        gate = self.s.toolbox.gate
        if gate.accept_record("grant", rec):  # only what agentd signed (issue 12)
            gate.grants.add(m.tool, m.grant)  # type: ignore[arg-type]

    def _mode(self, rec: dict[str, Any], m: r.ModeRecord) -> None:
        gate = self.s.toolbox.gate
        if gate.accept_record("mode", rec):
            gate.mode = m.mode  # type: ignore[assignment]

    def _title(self, rec: dict[str, Any], m: r.TitleRecord) -> None:
        self.s.title = m.title

    def _usage(self, rec: dict[str, Any], m: r.UsageRecord) -> None:
        self.measured = Usage.from_json(m.usage)
        if not self.branch_only and not m.inherited:  # a fork's copies were the source's requests
            self.s.totals.add(self.measured, m.model)

    def _checkpoint(self, rec: dict[str, Any], m: r.CheckpointRecord) -> None:
        self.s.checkpointer.observe(rec)

    def _rewind(self, rec: dict[str, Any], m: r.RewindRecord) -> None:
        self.s.checkpointer.observe(rec)

    def _instructions(self, rec: dict[str, Any], m: r.InstructionsRecord) -> None:
        if self.branch_only:  # the branch's own instructions (at open, the factory picked them)
            self.instructions = Instructions.from_record(rec)

    def _withdrawn(self, rec: dict[str, Any], m: r.WithdrawnRecord) -> None:
        """A failed turn's unanswered prompt, taken back out as the live turn did (issue 17)."""
        self.s.context.withdraw(self.prompts.get(m.message_id, []))

    def _compaction(self, rec: dict[str, Any], m: r.CompactionRecord) -> None:
        self.measured = None  # that usage was the summary request's
        if rec.get("seq") == self.restart:
            compaction.restart(self.s.context, m, self.s.journal.read_blob)
        else:
            compaction.replay(self.s.context, m)
        if m.stale is not None:  # the counter as it was then (a resume starting here has no earlier rounds)
            self.rounds.flush()
            self.s.tracker.restore_count(m.stale)

    def finish(self) -> None:
        self._usage_applied()
        self.rounds.flush()
        # only a tool_use still open needs to know whether it started (its synthetic result says so)
        self.s.toolbox.started.intersection_update(self.s.context.open_tool_use_ids())
        if self.cut:  # the turn ended on a reply whose calls were cut off: the note goes with the next prompt
            self.s.pending_notes = [cut_note(self.cut.values())]
        if self.last_todos is not None:
            self.s.tracker.restore(self.last_todos, self.s.tracker.stale_count)


def replay_into(session: Session, records: list[dict[str, Any]]) -> None:
    """Apply `records` (decoded log lines, in order; unknown kinds are skipped) to a freshly built session.
    Raises StorageError when a record is malformed or the rebuilt history cannot be made valid (CONTRACTS.md
    §8 validator)."""
    _run(_Replay(session), session, records, active_seqs(records), _all_tool_use_ids(records))


def replay_branch(session: Session, records: list[dict[str, Any]]) -> None:
    """Rebuild the conversation side of a live session from the active branch of `records` (the whole log,
    after a conversation rewind; module docstring). Raises StorageError as `replay_into`."""
    s = session
    s.context.reset()
    s.tracker.reset()
    s.toolbox.started.clear()
    s.pending_notes = []
    s.journal.todos_at = None
    replay = _Replay(s, branch_only=True)
    _run(replay, s, records, active_seqs(records), _all_tool_use_ids(records))
    meta = records[0].get("instructions") if records and records[0].get("kind") == "meta" else None
    fresh = replay.instructions or (
        Instructions.from_record(meta) if isinstance(meta, dict) else Instructions()
    )
    if fresh.text != s.instructions.text:
        s.instructions = fresh
        s.system = system_blocks(s.cwd, fresh.text)


def preview_branch(session: Session, records: list[dict[str, Any]]) -> int:
    """How many messages the conversation would hold if the active branch of `records` were the session's (a
    dry-run rewind passes the log and the `rewind` record it would write). `replay_branch` runs on stand-ins
    for the parts it rebuilds, so the session is left exactly as it was. Raises StorageError as
    `replay_into`."""
    s = session
    saved = (s.context, s.tracker, s.toolbox.started, s.pending_notes, s.journal.todos_at, s.instructions,
             s.system)  # fmt: skip
    s.context, s.tracker = copy.copy(s.context), copy.copy(s.tracker)  # both reset() to new parts: no sharing
    s.toolbox.started = set()
    try:
        replay_branch(s, records)
        return len(s.context)
    finally:
        (s.context, s.tracker, s.toolbox.started, s.pending_notes, s.journal.todos_at, s.instructions,
         s.system) = saved  # fmt: skip


def _run(
    replay: _Replay,
    session: Session,
    records: Iterable[dict[str, Any]],
    active: Container[int],
    tool_use_ids: set[str],
) -> None:
    for rec in records:
        try:
            model = r.parse_record(rec)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise StorageError(
                f"Session {session.id}: record {rec.get('seq')} ({rec.get('kind')}) is malformed ({exc}). Read "
                f"it with agentd sessions show {session.id}, or start a new session.",
                sessionId=session.id,
            ) from None
        if model is not None:
            replay.apply(rec, model, active)
    replay.finish()
    session.context.remember_tool_use_ids(tool_use_ids)
    check_history(session)


def _all_tool_use_ids(records: list[dict[str, Any]]) -> set[str]:
    """The tool_use ids of every assistant message in the log, on any branch."""
    return {
        str(b.get("id"))
        for rec in records if rec.get("kind") == "message" and (rec.get("message") or {}).get("role") == "assistant"
        for b in rec["message"].get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"
    }  # fmt: skip


def check_history(session: Session) -> None:
    """Run the validator on the rebuilt history as the next request would see it (open tool_uses answered
    by their synthetic results). An empty history is fine (a session with no prompt yet)."""
    messages = list(session.context.view())  # shared messages, never mutated here: no deep copy
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


# ---- resume from the store (issue 16) ---------------------------------------------------------------------
RESTART_KINDS = frozenset(
    {"grant", "mode", "title", "checkpoint", "rewind"}
)  # session-wide, before the start


def resume(session: Session, store: SessionStore) -> None:
    """Rebuild a freshly built `session` from its open store: from the last `compaction` record of the active
    branch that holds its kept messages, with the session-wide records before it read through the index and
    the counts the index keeps; else the whole log, streamed. Either way no list of the log's records is
    made. Raises StorageError as `replay_into`."""
    branch = store.active_branch()
    entry = _restart_entry(store, branch)
    if entry is None:
        records = (rec for _, rec in store.iter_records(0))
        _run(_Replay(session), session, records, branch, store.tally.tool_use_ids)
        return
    replay = _Replay(session, restart=entry.seq)
    before = [e for e in store.entries if e.seq <= entry.seq]
    _seed(replay, session, store, before, branch)
    records = (rec for _, rec in store.iter_records(entry.offset))
    _run(replay, session, records, branch, store.tally.tool_use_ids)
    _count_compactions(session, before, branch)


def _restart_entry(store: SessionStore, branch: ActiveBranch) -> Entry | None:
    """The entry of the last compaction on the active branch, when its record has `kept` (written since issue
    16) and nothing after it needs what precedes it (a `withdrawn` record of a prompt before it)."""
    active = [e for e in store.entries if e.seq in branch]
    if not active or "kept" not in store.read_sparse(active[-1]):
        return None
    if not store.has_kind_after(active[-1].offset, "withdrawn"):
        return active[-1]
    prompts: set[str] = set()
    for _, rec in store.iter_records(active[-1].offset):
        kind = rec.get("kind")
        if kind == "message" and (rec.get("message") or {}).get("role") == "user":
            prompts.add(str(rec.get("messageId")))
        elif kind == "withdrawn" and rec.get("seq") in branch and str(rec.get("messageId")) not in prompts:
            return None
    return active[-1]


def _seed(
    replay: _Replay, session: Session, store: SessionStore, before: list[Entry], branch: ActiveBranch
) -> None:
    """The state the records before the start give: session-wide records (grants and mode checked like any,
    title, checkpoints, rewinds) and the last todos snapshot of the branch, read through the index; the
    prompt count, token totals and tool_use ids from the index's counts."""
    start = before[-1]
    sparse = [x for x in store.tally.sparse if x.seq < start.seq]
    todos = [x for x in sparse if x.kind == "todos" and x.seq in branch]
    for x in sparse:
        if x.kind in RESTART_KINDS or (todos and x is todos[-1]):
            rec = store.read_sparse(x)
            model = r.parse_record(rec)
            if model is not None:
                replay.apply(rec, model, branch)
    counts = start.counts
    session.turns += int(counts["prompts"])
    for key, sums in counts["usage"].items():
        usage = Usage.from_json(sums)
        session.totals.add(usage, key.partition("|")[0])
        session.totals.requests += int(sums["n"]) - 1
        session.totals.cache_read_known &= not sums.get("unknownRead")
    session.context.remember_tool_use_ids({i for e in before for i in e.ids})


def _count_compactions(session: Session, before: list[Entry], branch: ActiveBranch) -> None:
    """The Context's compaction counts as a whole replay makes them: every compaction on the branch."""
    state, prev = session.context.compaction, 0
    for e in before:
        replaced, prev = int(e.counts["replaced"]) - prev, int(e.counts["replaced"])
        if e.seq in branch and e is not before[-1]:
            state.compactions += 1
            state.replaced_total += replaced
    state.replaced_total += replaced  # the start's own (`restart` counts it as 0)
