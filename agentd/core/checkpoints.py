"""One session's checkpoints (issue 13; docs/checkpoints.md): taking them, and the files side of a rewind.

Owns: `Checkpointer` (held by the Session as `checkpointer`): `take()` snapshots every root of the session's pinned workspace
(agentd.checkpoints.scan, in a worker thread so the event loop keeps serving) and writes a `checkpoint`
record through the session's journal; `observe()` is replay's step for `checkpoint` and `rewind` records
(ids, the previous checkpoint, the trees last recorded); `files_plan()` / `apply()` are the files side of a
rewind (agentd.core.rewind owns the rest); `user_changes()` finds the files the user changed after a
checkpoint.

Ids: `"N"` before prompt N, `"N.M"` before the M-th `run_command` of turn N, `"N.end"` when turn N ended,
`"rK"` before the K-th rewind and `"rK.end"` after it. A failed checkpoint is a record with `error` (the turn
goes on and the line says so); with `checkpoints.enabled = false` prompts still get a record without trees
(the anchor of a conversation rewind) and nothing is walked.

Who changed a file: agentd (a turn, a rewind) works between a `prompt` / `rewind` checkpoint and the next
`turn_end` one; everything else happens between turns. So the files the user changed after checkpoint T are
the `changed` paths of every later checkpoint whose previous checkpoint is a `turn_end` one (the state the
agent left, against the state the next prompt or rewind found). Failpoint: `checkpoint.before_record`.
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd import failpoints
from agentd.checkpoints import restore
from agentd.checkpoints.objects import ObjectStore, Ref, StoreError
from agentd.checkpoints.scan import scan_root
from agentd.checkpoints.tree import DirNode, diff, load, skipped_paths
from agentd.checkpoints.watch import Watcher
from agentd.config import CheckpointSettings
from agentd.errors import UsageError
from agentd.log import LineWriter
from agentd.persistence.records import CheckpointRecord
from agentd.tools.workspace import Workspace

if TYPE_CHECKING:
    from agentd.core.journal import Journal

log = logging.getLogger("agentd.checkpoints")

CHECKPOINTS_DIR = "checkpoints"  # sessions/<id>/checkpoints: the session's object store
CHANGED_MAX = (
    10_000  # paths kept in one record; past it `changedTotal` says how many and a rewind diffs trees
)
SKIPPED_SHOWN = 200


class CheckpointError(UsageError):
    """A rewind or fork named a checkpoint that does not exist or cannot serve; the text says what to do
    (exit 2, -32602)."""


@dataclass
class Walked:
    """One root's walk: its real path, the snapshot recorded before it (None: none yet) and the new one."""

    root: str
    before: DirNode | None
    after: DirNode
    read: int


@dataclass
class FilesPlan:
    """The files side of a rewind: one restore plan per root, and the paths kept with why."""

    plans: list[restore.Plan] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)  # (shown path, reason)

    def shown(self, *kinds: str) -> list[str]:
        return sorted(_show(p.root, op.path, self.main) for p in self.plans for op in p.ops if op.op in kinds)

    main: str = ""


def _show(root: str, rel: str, main: str) -> str:
    """A root-relative path as shown and stored: relative to the session's main root, absolute elsewhere."""
    return rel if root == main else os.path.join(root, rel)


class Checkpointer:
    """The checkpoints of one session (see the module docstring)."""

    def __init__(
        self,
        *,
        store_root: Path,
        workspace: Callable[[], Workspace],
        settings: CheckpointSettings,
        exclude: Path,
        journal: Journal,
        lines: LineWriter,
    ) -> None:
        self.store = ObjectStore(store_root)
        self.workspace = workspace
        self.settings = settings
        self.exclude = os.path.realpath(exclude)  # agentd's data dir: never walked, even inside a root
        self.journal = journal
        self.lines = lines
        self.prompt = 0  # the number of the current (or last) prompt
        self.commands = 0  # run_command checkpoints in the current turn
        self.rewinds = 0
        self.last: dict[str, Any] | None = None  # the last checkpoint record (as written)
        self._recorded: dict[str, DirNode] = {}  # root -> the snapshot of the last record (loaded lazily)
        self._cache: dict[str, DirNode] = {}  # root -> the newest snapshot walked (the stat cache)
        self._watchers: dict[str, Watcher] = {}
        self._walking = threading.Lock()  # one walk at a time (a cancelled turn's walk may still run)

    # ---- replay ----------------------------------------------------------------------------------------
    def observe(self, rec: Mapping[str, Any]) -> None:
        """Replay's step for a `checkpoint` or `rewind` record (written or read back), in log order."""
        if rec.get("kind") == "rewind":
            self.rewinds = max(self.rewinds, _rewind_number(str(rec.get("id", ""))))
            return
        cid = str(rec.get("id", ""))
        if rec.get("before") == "prompt":
            self.prompt, self.commands = int(rec.get("prompt") or 0), 0
        elif rec.get("before") == "run_command":
            self.commands = max(self.commands, int(cid.rpartition(".")[2] or 0))
        elif rec.get("before") == "rewind":
            self.rewinds = max(self.rewinds, _rewind_number(cid))
        if rec.get("roots") is not None:
            self.last = dict(rec)
            self._recorded = {}  # loaded from the record when needed

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    # ---- taking ----------------------------------------------------------------------------------------
    def next_id(self, before: str) -> tuple[str, int]:
        """The id and prompt number the next checkpoint of kind `before` gets (`rewind`: the next rewind)."""
        if before == "prompt":
            return str(self.prompt + 1), self.prompt + 1
        if before == "run_command":
            return f"{self.prompt}.{self.commands + 1}", self.prompt
        if before == "rewind":
            return f"r{self.rewinds + 1}", self.prompt
        return f"{self.prompt}.end", self.prompt

    async def take(
        self,
        before: str,
        *,
        message_id: str | None = None,
        text: str | None = None,
        tool_call_id: str | None = None,
        cid: str | None = None,
    ) -> dict[str, Any] | None:
        """Take a checkpoint of kind `before` (`prompt`, `run_command`, `turn_end`, `rewind`) and write its
        record; returns the record as written, or None when checkpoints are off and it is not a prompt's. A
        failure is a record with `error` and a line; it never raises but for a failed log write
        (StorageError: the log decides the turn)."""
        new_id, prompt = self.next_id(before)
        cid = cid or new_id
        if before == "prompt":
            self.prompt, self.commands = prompt, 0
        elif before == "run_command":
            self.commands += 1
        if not self.enabled and before != "prompt":
            return None
        record = CheckpointRecord(id=cid, before=before, prompt=prompt)
        for key, value in (("message_id", message_id), ("text", text), ("tool_call_id", tool_call_id)):
            if value is not None:
                setattr(record, key, value)
        walked: list[Walked] = []
        if self.enabled:
            started = time.monotonic()
            try:
                walked = await asyncio.to_thread(self._walk)
                self._describe(record, walked, started)
            except Exception as exc:  # never the turn's end (issue 13)
                log.warning("checkpoint %s failed", cid, exc_info=True)
                record.error = f"{type(exc).__name__}: {exc}"
                self.lines(f"[checkpoint {cid}] failed: {record.error}; the turn goes on without it")
        failpoints.hit("checkpoint.before_record")
        written = self.journal.write(record)[0]
        self.observe(written)  # forgets the trees of the record before: this one's are known already
        if walked and written.get("roots") is not None:
            self._recorded = {w.root: w.after for w in walked}
        return written

    async def peek(self) -> dict[str, Any]:
        """A walk that writes no record (a dry run): a record-like dict with `roots`, `changed` (against the
        last record) and no `seq`, or `error`."""
        record = CheckpointRecord(id="now", before="rewind", prompt=self.prompt)
        started = time.monotonic()
        try:
            self._describe(record, await asyncio.to_thread(self._walk), started)
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
        return record.payload() | {"kind": "checkpoint"}

    def _walk(self) -> list[Walked]:
        """Walk every root (worker thread); the new objects go to one pack, committed before anything is
        remembered. A failure forgets the stat cache and the watchers (the next walk stats everything)."""
        with self._walking:
            return self._walk_locked()

    def _walk_locked(self) -> list[Walked]:
        ws = self.workspace()
        ws.verify()
        if not self._cache:  # the first walk of this process: a crash's leftovers go
            self.store.remove_temp_files()
        writer = self.store.writer()
        out: list[Walked] = []
        try:
            for real in ws.reals:
                before = self._recorded_tree(real)
                cached = self._cache.get(real, before)
                watcher = self._watchers.get(real) or self._watchers.setdefault(real, Watcher())
                fd = ws.open_root(real)
                try:
                    after, stats = scan_root(fd, cached, writer, self.settings.max_file_bytes,
                                             watcher=watcher, exclude=self._exclude(real))  # fmt: skip
                finally:
                    os.close(fd)
                out.append(Walked(real, before, after, stats.read))
            writer.commit()
        except BaseException:
            writer.abort()
            self.forget()
            raise
        for w in out:
            self._cache[w.root] = w.after
            self._watchers[w.root].primed = True
        return out

    def _describe(self, record: CheckpointRecord, walked: list[Walked], started: float) -> None:
        main = walked[0].root if walked else ""
        changed: list[str] = []
        total = 0
        for w in walked:
            for change in diff(w.before, w.after) if w.before is not None else ():
                total += 1
                if len(changed) < CHANGED_MAX:
                    changed.append(_show(w.root, change.path, main))
        record.roots = [{"path": w.root, "tree": list(w.after.ref or ())} for w in walked]
        record.files = sum(w.after.files for w in walked)
        record.bytes = sum(w.after.size for w in walked)
        record.changed = changed
        if total > len(changed):
            record.changed_total = total
        record.not_covered = sum(w.after.nskip for w in walked)
        record.ms = int((time.monotonic() - started) * 1000)

    def _recorded_tree(self, root: str) -> DirNode | None:
        """The snapshot of `root` in the last record (read from the store the first time)."""
        if root in self._recorded:
            return self._recorded[root]
        ref = _root_ref(self.last, root)
        if ref is None:
            return None
        try:
            node = load(self.store, ref)
        except StoreError:
            log.warning("checkpoint %s: its tree of %s is unreadable; walking from scratch",
                        (self.last or {}).get("id"), root)  # fmt: skip
            return None
        self._recorded[root] = node
        return node

    def _exclude(self, root: str) -> set[str]:
        rel = os.path.relpath(self.exclude, root)
        return set() if rel == os.curdir or rel.startswith(os.pardir) else {rel.replace(os.sep, "/")}

    def forget(self) -> None:
        """Drop the stat cache and the watchers (after a failure, or when the session closes)."""
        self._cache = {}
        for w in self._watchers.values():
            w.close()
        self._watchers = {}

    def close(self) -> None:
        self.forget()
        self.store.close()

    # ---- reading back ----------------------------------------------------------------------------------
    def tree(self, record: Mapping[str, Any], root: str) -> DirNode:
        """The snapshot of `root` in `record`. Raises CheckpointError."""
        ref = _root_ref(record, root)
        if ref is None:
            raise CheckpointError(f"checkpoint {record.get('id')} has no files of {root}")
        for known in (self._cache.get(root), self._recorded.get(root)):
            if known is not None and known.ref == ref:
                return known
        try:
            return load(self.store, ref)
        except StoreError as exc:
            raise CheckpointError(f"checkpoint {record.get('id')} cannot be read: {exc}") from None

    def not_covered(self, record: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(path, reason) of what `record` does not cover, at most SKIPPED_SHOWN of them."""
        out: list[tuple[str, str]] = []
        main = _first_root(record)
        for entry in record.get("roots") or []:
            for path, why in skipped_paths(self.tree(record, entry["path"])):
                out.append((_show(entry["path"], path, main), why))
                if len(out) >= SKIPPED_SHOWN:
                    return out
        return out

    # ---- the files side of a rewind --------------------------------------------------------------------
    def user_changes(
        self, records: Sequence[Mapping[str, Any]], target_seq: int, now: Mapping[str, Any]
    ) -> set[str]:
        """Paths the user changed after the checkpoint at `target_seq` (module docstring), `now` being the
        checkpoint just taken before the rewind. Shown paths (relative to the main root)."""
        checkpoints = [r for r in records if r.get("kind") == "checkpoint" and r.get("roots") is not None]
        if not checkpoints or checkpoints[-1].get("seq") != now.get("seq"):
            checkpoints.append(now)
        out: set[str] = set()
        for prev, cur in itertools.pairwise(checkpoints):
            after = cur.get("seq") is None or int(cur["seq"]) > target_seq  # `now` of a dry run has no seq
            if not after or prev.get("before") != "turn_end":
                continue
            if cur.get("changedTotal") is None:
                out.update(cur.get("changed") or [])
            else:  # too many to keep in the record: compare the two snapshots
                main = _first_root(cur)
                for entry in cur.get("roots") or []:
                    root = entry["path"]
                    old = self.tree(prev, root) if _root_ref(prev, root) else None
                    out.update(_show(root, c.path, main) for c in diff(old, self.tree(cur, root)))
        return out

    def files_plan(self, target: Mapping[str, Any], now: Mapping[str, Any], keep: Iterable[str]) -> FilesPlan:
        """The plan from the state `now` (a checkpoint just taken) back to `target`, leaving `keep` (shown
        paths) alone. Roots the target has no snapshot of are left alone. Raises CheckpointError."""
        main = _first_root(now)
        keep = set(keep)
        out = FilesPlan(main=main)
        for entry in now.get("roots") or []:
            root = entry["path"]
            if _root_ref(target, root) is None:
                continue
            kept_here = {
                p if root == main else os.path.relpath(p, root) for p in keep if _in_root(p, root, main)
            }
            plan = restore.plan(root, self.tree(now, root), self.tree(target, root), kept_here)
            out.plans.append(plan)
            out.kept += [(_show(root, path, main), why) for path, why in plan.kept]
        return out

    def apply(self, plan: FilesPlan, on_kept: Callable[[str, str], None]) -> None:
        """Carry out the plan on disk (worker thread; every root from the pinned workspace). Raises OSError,
        CheckpointError."""
        ws = self.workspace()
        ws.verify()
        for p in plan.plans:
            try:
                restore.apply(
                    p, partial(ws.open_root, p.root), self.store, partial(self._kept, plan, p.root, on_kept)
                )
            except StoreError as exc:
                raise CheckpointError(f"the checkpoint's files cannot be read: {exc}") from None

    @staticmethod
    def _kept(plan: FilesPlan, root: str, on_kept: Callable[[str, str], None], path: str, why: str) -> None:
        on_kept(_show(root, path, plan.main), why)


def _root_ref(record: Mapping[str, Any] | None, root: str) -> Ref | None:
    for entry in (record or {}).get("roots") or []:
        if entry.get("path") == root and entry.get("tree"):
            return Ref.of(entry["tree"])
    return None


def _first_root(record: Mapping[str, Any]) -> str:
    roots = record.get("roots") or []
    return str(roots[0]["path"]) if roots else ""


def _in_root(shown: str, root: str, main: str) -> bool:
    if root == main:
        return not os.path.isabs(shown)
    return shown == root or shown.startswith(root.rstrip(os.sep) + os.sep)


def _rewind_number(cid: str) -> int:
    head = cid.partition(".")[0]
    return int(head[1:]) if head.startswith("r") and head[1:].isdigit() else 0
