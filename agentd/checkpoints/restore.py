"""Putting a workspace root back to a snapshot (issue 13 "Rewind"; docs/checkpoints.md).

Owns: `plan()` (the operations from the current snapshot to the target one), `Op`, `apply()` (carrying
them out) and the intent file (`write_intent` / `read_intent` / `clear_intent`) that makes a rewind
finish after a crash.

The plan touches only what is covered on both sides: a path that is not covered now (ignored, too large,
special) or was not covered then is left as it is, and so is every path in `keep` (the files the user
changed after the checkpoint, unless confirmed). Order: removals (deepest first), then folders, files and
links (parents first), then folder modes (deepest first, so a read-only folder is made so last). Files are
written to a temp file in their folder, given their mode, fsynced and renamed over the name; every folder
is entered from the pinned root one component at a time with `O_NOFOLLOW`, so a link the agent left in
the tree can never lead a restore outside the root. Each operation is idempotent (a removal of something
already gone, a folder that exists), so the whole plan can run again.

Crash safety: the caller writes the plan to the intent file (temp file, fsync, rename) before the first
operation, and removes it after the rewind's log record; a session opened with an intent file runs the plan
again and then writes the record (agentd.core.checkpoints). Failpoints: `rewind.intent_written`,
`rewind.apply` (after each operation), `rewind.applied`.
Imports the standard library, `agentd.checkpoints`, `agentd.persistence.paths`, `agentd.failpoints` only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentd import failpoints
from agentd.checkpoints.objects import ObjectStore, Ref
from agentd.checkpoints.tree import DirNode, Entry, same_content
from agentd.persistence.paths import atomic_write

INTENT = "rewind.json"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TMP = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_GONE = (errno.ENOENT, errno.ENOTDIR)


@dataclass
class Op:
    """One step: `op` is `unlink`, `rmdir`, `mkdir`, `write`, `symlink` or `chmod`; `path` relative to the
    root (`/`-separated); `ref` the content of a `write`; `mode` permission bits; `target` of a `symlink`."""

    op: str
    path: str
    ref: list[Any] | None = None
    mode: int | None = None
    target: str | None = None


@dataclass
class Plan:
    """The operations for one root, and the paths left alone with why (`changed_by_user`, `not_covered`,
    `holds_files_not_covered`)."""

    root: str
    ops: list[Op] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)

    def paths(self, *kinds: str) -> list[str]:
        return [o.path for o in self.ops if o.op in kinds]


def plan(root: str, current: DirNode, target: DirNode, keep: set[str]) -> Plan:
    """The plan from `current` to `target` for the root at `root` (module docstring)."""
    out = Plan(root)
    removals: list[Op] = []
    creations: list[Op] = []
    modes: list[Op] = []
    _folder(current, target, "", keep, removals, creations, modes, out.kept)
    out.ops = removals + creations + modes
    return out


def _folder(
    cur: DirNode, tgt: DirNode, prefix: str, keep: set[str], rm: list[Op], mk: list[Op], modes: list[Op],
    kept: list[tuple[str, str]],
) -> bool:  # fmt: skip
    """Plan one folder present on both sides; returns True when something in it is kept (it must stay)."""
    held = False
    for name in sorted(cur.entries.keys() | tgt.entries.keys() | cur.skipped.keys()):
        path = prefix + name
        a, b = cur.entries.get(name), tgt.entries.get(name)
        if name in cur.skipped:
            held = True
            if b is not None:
                kept.append((path, "not_covered"))
            continue
        if a is not None and b is None and name in tgt.skipped:
            held = True  # not covered then (too large, ignored): nothing to go back to, and the user is told
            kept.append((path, "not_covered"))
            continue
        if a is not None and b is not None and same_content(a, b):
            continue
        both_folders = a is not None and b is not None and a[0] == b[0] == "d"
        if path in keep and not both_folders:
            kept.append((path, "changed_by_user"))
            held = True
            continue
        if both_folders:
            assert a is not None and b is not None
            held |= _folder(a[1], b[1], path + "/", keep, rm, mk, modes, kept)
            if a[1].mode != b[1].mode:
                modes.append(Op("chmod", path, mode=b[1].mode))
            continue
        if a is not None and b is not None and a[0] == b[0] == "f" and a[6].sha == b[6].sha:
            mk.append(Op("chmod", path, mode=stat.S_IMODE(b[1])))
            continue
        if a is not None and (b is None or a[0] == "d" or b[0] == "d"):
            if _remove(a, path, keep, rm, kept):
                held = True
                continue
        if b is not None:
            _create(b, path, mk, modes)
    return held


def _remove(e: Entry, path: str, keep: set[str], rm: list[Op], kept: list[tuple[str, str]]) -> bool:
    """Plan the removal of `e` at `path`; returns True when something in it must stay (then it is kept)."""
    if e[0] != "d":
        rm.append(Op("unlink", path))
        return False
    node: DirNode = e[1]
    held = bool(node.skipped)
    for name in sorted(node.entries):
        sub = f"{path}/{name}"
        if sub in keep:
            kept.append((sub, "changed_by_user"))
            held = True
        else:
            held |= _remove(node.entries[name], sub, keep, rm, kept)
    if held:
        kept.append((path, "holds_files_not_covered" if node.skipped else "changed_by_user"))
    else:
        rm.append(Op("rmdir", path))
    return held


def _create(e: Entry, path: str, mk: list[Op], modes: list[Op]) -> None:
    if e[0] == "f":
        mk.append(Op("write", path, ref=list(e[6]), mode=stat.S_IMODE(e[1])))
    elif e[0] == "l":
        mk.append(Op("symlink", path, target=e[6]))
    else:
        node: DirNode = e[1]
        mk.append(Op("mkdir", path, mode=0o700))
        for name in sorted(node.entries):
            _create(node.entries[name], f"{path}/{name}", mk, modes)
        modes.append(Op("chmod", path, mode=node.mode))


# ---- applying ----------------------------------------------------------------------------------------


def apply(
    plan_: Plan, root_fd: Callable[[], int], store: ObjectStore, on_kept: Callable[[str, str], None]
) -> None:
    """Carry out `plan_` on the root opened by `root_fd()` (a new descriptor of the pinned root). A folder
    that is not empty when it should go is kept and reported through `on_kept(path, reason)`. Raises OSError
    (the plan can run again) and StoreError."""
    touched: set[str] = set()
    for op in plan_.ops:
        parent, _, name = op.path.rpartition("/")
        fd = _open_parent(root_fd(), parent)
        if fd is None:
            continue  # the parent is gone: an earlier run removed it
        try:
            why = _step(op, name, fd, store)
            if why:
                on_kept(op.path, why)
            touched.add(parent)
            os.fsync(fd) if op.op in ("unlink", "rmdir") else None
        finally:
            os.close(fd)
        failpoints.hit("rewind.apply")
    for parent in sorted(touched):
        fd = _open_parent(root_fd(), parent)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(fd)
            os.close(fd)
    failpoints.hit("rewind.applied")


def _open_parent(fd: int, parent: str) -> int | None:
    """The folder `parent` (relative) opened from the root descriptor `fd` (consumed), never through a link;
    None when it does not exist (or is not a folder)."""
    try:
        for part in parent.split("/") if parent else []:
            nxt = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        os.close(fd)
        if exc.errno in (*_GONE, errno.ELOOP):
            return None
        raise
    return fd


def _step(op: Op, name: str, fd: int, store: ObjectStore) -> str | None:
    """One operation in the folder `fd`. Returns why it was left undone (a folder to remove that is not
    empty; something that is not a folder where one goes), else None."""
    try:
        if op.op == "unlink":
            _unlink(name, fd)
        elif op.op == "rmdir":
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    return "holds_files_not_covered"
                raise
        elif op.op == "mkdir" and not _mkdir(name, fd):
            return "changed_by_user"
        elif op.op == "write":
            assert op.ref is not None and op.mode is not None
            _write(name, fd, store.read(Ref.of(op.ref)), op.mode)
        elif op.op == "symlink":
            assert op.target is not None
            _replace(name, fd, lambda tmp: os.symlink(op.target or "", tmp, dir_fd=fd))
        elif op.op == "chmod":
            assert op.mode is not None
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) != op.mode:
                os.chmod(name, op.mode, dir_fd=fd)
    except OSError as exc:
        if exc.errno in _GONE and op.op in ("unlink", "rmdir", "chmod"):
            return None
        raise
    return None


def _unlink(name: str, fd: int) -> None:
    """Remove a file or link; a folder there is left (the plan removes folders with `rmdir`, so it is a later
    `mkdir` of an earlier run of the same plan)."""
    try:
        os.unlink(name, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.EISDIR, errno.EPERM):
            raise
        if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise


def _mkdir(name: str, fd: int) -> bool:
    """Make a folder (0700 until its mode op); True when one is there, False when something else is."""
    try:
        os.mkdir(name, 0o700, dir_fd=fd)
    except FileExistsError:
        return stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    return True


def _write(name: str, fd: int, data: bytes, mode: int) -> None:
    def make(tmp: str) -> None:
        out = os.open(tmp, _TMP, 0o600, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            os.fchmod(out, mode)
            os.fsync(out)
        finally:
            os.close(out)

    _replace(name, fd, make)


def _replace(name: str, fd: int, make: Callable[[str], None]) -> None:
    """Make the new entry under a temp name, then rename it over `name` (a folder there is an error)."""
    tmp = f".agentd-rewind-{secrets.token_hex(6)}.tmp"
    try:
        make(tmp)
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise


# ---- the intent file ---------------------------------------------------------------------------------


def write_intent(store_root: Path, intent: dict[str, Any]) -> None:
    """Persist a rewind before its first operation (temp file, fsync, rename). Raises OSError."""
    data = json.dumps(intent, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    atomic_write(Path(store_root) / INTENT, data)
    failpoints.hit("rewind.intent_written")


def read_intent(store_root: Path) -> dict[str, Any] | None:
    """The unfinished rewind of a session, or None."""
    try:
        data = (Path(store_root) / INTENT).read_bytes()
    except FileNotFoundError:
        return None
    doc = json.loads(data)
    return doc if isinstance(doc, dict) else None


def clear_intent(store_root: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (Path(store_root) / INTENT).unlink()


def plans_to_json(plans: list[Plan]) -> list[dict[str, Any]]:
    return [{"root": p.root, "ops": [asdict(o) for o in p.ops], "kept": p.kept} for p in plans]


def plans_from_json(doc: list[dict[str, Any]]) -> list[Plan]:
    return [Plan(p["root"], [Op(**o) for o in p["ops"]], [tuple(k) for k in p["kept"]]) for p in doc]  # type: ignore[misc]


def walk_ops(plans: list[Plan]) -> Iterator[tuple[Plan, Op]]:
    for p in plans:
        for op in p.ops:
            yield p, op
