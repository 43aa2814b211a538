"""Protected paths inside the sandbox's writable folders (issue 12 §3; docs/security.md, "Protected paths
in the sandbox").

Owns: `Guard` (one per sandboxed launch), `survey()`, `created()` and `readonly_hint()`. The lists come
from `agentd.permissions.protected` (`ANYWHERE`, `ProtectedPaths.fixed_inside`), never a copy. A
bubblewrap launch is guarded three ways:
- before: a walk of every writable folder (breadth first, within `WALK_BUDGET_S`) finds every existing
  entry named in `ANYWHERE` at any depth; each is bound read-only, as are the existing `fixed_inside`
  paths (first); more than `MAX_BINDS` in all: the launch is refused (`TooManyProtected`), never run with
  some writable; a folder beyond PATH_MAX is listed through folder descriptors, one that cannot be
  listed at all makes the walk incomplete (named in the result);
- an absent `fixed_inside` path (`.git` at the top of a workspace that has none, `.vscode`, a missing
  `~/.bashrc` when the workspace holds the home folder) gets an empty stand-in, created here on the host
  (a folder, or an empty file; at the first missing component of its path) and bound read-only, so the
  command cannot create it; a stand-in is removed after the command when it is still the one created
  here and still empty (shared by concurrent launches, counted);
- after (for a command, not a long-lived MCP server): a second walk finds the protected entries the
  command created where no stand-in could be (`sub/.git` in a folder it made, `a/b/.vscode`): each is
  moved out of the workspace into the quarantine folder and named in the command's result. Every process
  of the command is dead by then (the pid namespace), so nothing races the move from inside.
Entries are told apart by (device, inode), so a folder the command renamed is not mistaken for a new one.
Imports only the standard library, `agentd.permissions.protected`, `agentd.sandbox.policy` and
`agentd.sandbox.standins` (the stand-ins on the host, recorded for a process killed with SIGKILL).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from agentd.permissions.protected import ANYWHERE, CLASS_TEXT, Kind
from agentd.sandbox.policy import SandboxPolicy
from agentd.sandbox.standins import STAND_INS, Key, records_dir

WALK_BUDGET_S = 2.0  # per walk; a workspace of ~100k folders takes about 1.5 s on a loaded 2-core machine
MAX_BINDS = 512  # bwrap refuses more than 9000 arguments, and each bind costs start-up time
LONG_PATH = 4000  # bytes: a path this long or longer is reached through folder descriptors (PATH_MAX 4096)
NOTE_PATHS = 5  # paths named in a note or refusal; the rest are counted (a result stays small: break12 S3)


@dataclass
class Survey:
    """What a walk found: `found` (existing protected entries, shallow first) and their keys; the folders
    whose listing was read (`visited`) and those seen at all (`seen`); `complete`: within the budget and
    every folder's listing read (`unread`: how many failed)."""

    found: list[Path] = field(default_factory=list)
    found_keys: set[Key] = field(default_factory=set)
    visited: set[Key] = field(default_factory=set)
    seen: set[Key] = field(default_factory=set)
    complete: bool = True
    unread: int = 0  # folders whose listing failed (unreadable, or a path longer than PATH_MAX)


def _skipped(path: Path, skip: Iterable[Path]) -> bool:
    return any(path == s or s in path.parents for s in skip)


def _inside(path: str, skip: tuple[str, ...]) -> bool:
    """`_skipped` on strings (the walks build no `Path` per entry: that costs more than the walk)."""
    return bool(skip) and any(path == s or path.startswith(s + os.sep) for s in skip)


def survey(roots: Iterable[Path], skip: tuple[Path, ...], budget_s: float = WALK_BUDGET_S) -> Survey:
    """Walk `roots` breadth first (symlinks not followed, `skip` and its insides not entered) for entries
    named in `ANYWHERE`; stops after `budget_s` seconds with `complete` False. A folder's key is its
    parent's device and its directory-entry inode, the same in `created()`."""
    out = Survey()
    skipped = tuple(str(p) for p in skip)
    queue: deque[tuple[str, int, Key]] = deque()
    for root in roots:
        st = os.stat(root)
        key = (st.st_dev, st.st_ino)
        out.seen.add(key)
        queue.append((str(root), st.st_dev, key))
    deadline = time.monotonic() + budget_s
    while queue:
        if time.monotonic() > deadline:
            out.complete = False
            break
        folder, dev, folder_key = queue.popleft()
        try:
            entries = _scan(folder)
        except OSError:  # unreadable: what is below is not known (S2)
            out.complete = False
            out.unread += 1
            continue
        out.visited.add(folder_key)
        for e in entries:
            key = (dev, e.inode)
            if e.name in ANYWHERE:
                out.found.append(Path(e.path))
                out.found_keys.add(key)
            elif e.is_dir and key not in out.seen and not _inside(e.path, skipped):
                out.seen.add(key)
                queue.append((e.path, dev, key))
    return out


class _Entry(NamedTuple):
    """One directory entry as the walks need it; `empty` is judged only for protected names."""

    name: str
    path: str
    inode: int
    is_dir: bool
    empty: bool


def _scan(folder: str) -> list[_Entry]:
    """The entries of `folder`; one whose path is longer than PATH_MAX (ENAMETOOLONG) is reached one
    component at a time through folder descriptors (break12 S2). Raises OSError when it cannot be read."""
    try:
        with os.scandir(folder) as it:
            return [_entry(e, e.path, None) for e in it]
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
    fd = open_long(folder)
    try:
        with os.scandir(fd) as it:
            return [_entry(e, f"{folder}{os.sep}{e.name}", fd) for e in it]
    finally:
        os.close(fd)


def _entry(e: os.DirEntry[str], path: str, dir_fd: int | None) -> _Entry:
    is_dir = _is_dir(e)
    empty = _empty(e, dir_fd) if e.name in ANYWHERE else False
    return _Entry(e.name, path, e.inode(), is_dir, empty)


def _nameable(path: Path) -> Path:
    """`path`, or its deepest folder a mount can name: bwrap binds by path (under its own `/newroot`), so
    a protected entry deeper than `LONG_PATH` bytes is kept read-only by binding that folder read-only,
    with everything below it (break12 S2)."""
    while len(os.fsencode(str(path))) >= LONG_PATH and path.parent != path:
        path = path.parent
    return path


def open_long(path: str) -> int:
    """A descriptor of the folder `path` (absolute), opened one component at a time so that a path longer
    than PATH_MAX can be reached; symlinks are not followed. Raises OSError."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(os.sep, flags)
    try:
        for part in (p for p in path.split(os.sep) if p):
            fd, old = os.open(part, flags, dir_fd=fd), fd
            os.close(old)
    except OSError:
        os.close(fd)
        raise
    return fd


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _empty(entry: os.DirEntry[str], dir_fd: int | None = None) -> bool:
    """An empty folder or empty regular file (not a link): harmless, and what another agentd's stand-in
    looks like, so it is left alone. `dir_fd`: the folder's descriptor when `entry` came from one."""
    try:
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if dir_fd is not None:
                fd = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                try:
                    with os.scandir(fd) as inside:
                        return next(inside, None) is None
                finally:
                    os.close(fd)
            with os.scandir(entry.path) as inside:
                return next(inside, None) is None
        return stat.S_ISREG(st.st_mode) and st.st_size == 0
    except OSError:
        return False


def created(
    before: Survey, roots: Iterable[Path], skip: tuple[Path, ...], budget_s: float = WALK_BUDGET_S
) -> tuple[list[Path], bool]:
    """The protected entries under `roots` that `before` did not find: in a folder `before` listed, or in
    a folder made since; folders seen but not listed before (its budget ran out) are not judged, nor is
    an empty folder or file (harmless; another agentd's stand-in looks so). Returns
    them (shallowest first) and whether the walk finished within `budget_s`."""
    found: list[Path] = []
    skipped = tuple(str(p) for p in skip)
    queue: deque[tuple[str, int, bool]] = deque()
    for root in roots:
        st = os.stat(root)
        if (st.st_dev, st.st_ino) in before.visited:  # else its listing is unknown: nothing to judge
            queue.append((str(root), st.st_dev, False))
    deadline = time.monotonic() + budget_s
    whole = True
    while queue:
        if time.monotonic() > deadline:
            return found, False
        folder, dev, new = queue.popleft()
        try:
            entries = _scan(folder)
        except OSError:  # as in survey(): not known, so the walk is not complete (break12 S2)
            whole = False
            continue
        for e in entries:
            key = (dev, e.inode)
            if e.name in ANYWHERE:
                if key not in before.found_keys and not e.empty:
                    found.append(Path(e.path))
            elif e.is_dir and not _inside(e.path, skipped):
                if new or key not in before.seen:
                    queue.append((e.path, dev, True))
                elif key in before.visited:
                    queue.append((e.path, dev, False))
    return found, whole


def _first_missing(path: Path, root: Path) -> Path:
    """The shallowest component of `path` (below `root`) that does not exist."""
    for p in [*reversed(path.parents), path]:
        if (p == root or root in p.parents) and p != root and not os.path.lexists(p):
            return p
    return path


class TooManyProtected(Exception):
    """The workspace holds more protected paths than the sandbox can keep read-only (`MAX_BINDS`);
    `str()` is the model-facing text (`too_many_text`)."""


def too_many_text(count: int, found: list[Path]) -> str:
    """Why a launch was refused at the bind cap: the count, the names met and the first few paths."""
    names = ", ".join(sorted({p.name for p in found})) or "protected paths"
    first = ", ".join(str(p) for p in found[:NOTE_PATHS])
    return (
        f"run_command is refused: the workspace holds {count} protected paths ({names}; e.g. {first}),"
        f" more than the {MAX_BINDS} the sandbox can keep read-only, so a sandboxed command could write"
        " the rest. Remove the nested repositories or editor folders the workspace does not need, or run"
        " the command outside the sandbox (unsandboxed: true; the user is asked; not under"
        ' sandbox = "required").'
    )


class Guard:
    """The protected-path guard of one sandboxed launch (see the module docstring). `policy()` is the
    launch's policy with the read-only binds; `finish()` runs once the process has exited."""

    def __init__(self, policy: SandboxPolicy, *, after: bool = True) -> None:
        self._base, self._after = policy, after
        self._skip = (*policy.hidden, *policy.hidden_files)
        self._roots = [w for w in policy.writable if w.is_dir()]
        self._survey = survey(self._roots, self._skip, WALK_BUDGET_S)
        self._held: list[Path] = []
        self.args_file: str | None = (
            None  # bwrap's options in a file (`bwrap.via_args_file`): removed by finish()
        )
        self.moved = 0  # protected paths the command created, moved away by finish()
        fixed: list[Path] = []  # the fixed-place paths: bound first, never the ones dropped (break12 S1)
        spots: dict[Path, Kind] = {}  # where a stand-in goes, judged before any is made
        records = records_dir(policy)
        if after:
            STAND_INS.sweep(records)  # what a process killed with SIGKILL left
        for target, kind in policy.guarded:
            root = next((r for r in self._roots if r in target.parents), None)
            if root is None or _skipped(target, self._skip):
                continue
            if os.path.lexists(target):
                fixed.append(target)
                continue
            spot = _first_missing(target, root)
            spots.setdefault(spot, kind if spot == target else "dir")
        for spot, kind in spots.items():
            if _skipped(spot, [s for s in spots if s != spot]):
                continue  # inside another stand-in: covered by it
            key = STAND_INS.hold(spot, kind, records) if after else None
            if key is not None:
                self._held.append(spot)
                self._survey.found_keys.add(key)
            elif os.path.lexists(spot):
                fixed.append(spot)
        found = [p for p in self._survey.found if not _skipped(p, self._skip)]
        self.stand_ins = tuple(
            str(s.relative_to(next(r for r in self._roots if r in s.parents))) for s in self._held
        )
        binds = list(dict.fromkeys([*fixed, *self._held, *(_nameable(p) for p in found)]))
        if len(binds) > MAX_BINDS:  # never run with some protected paths writable: refuse (break12 S1)
            self.finish(ran=False)
            raise TooManyProtected(too_many_text(len(binds), found))
        self._binds = tuple(binds)

    def policy(self) -> SandboxPolicy:
        return dataclasses.replace(self._base, readonly=(*self._base.readonly, *self._binds))

    def finish(self, *, ran: bool = True) -> list[str]:
        """Remove the stand-ins, move what the command created among protected paths into quarantine;
        the lines to add to the command's result (empty: nothing to say). Call once; `ran` False: the
        process never started (only the stand-ins are removed)."""
        notes: list[str] = []
        try:
            if self._after and ran:
                notes = self._check()
        finally:
            for spot in self._held:
                STAND_INS.release(spot)
            self._held = []
            if self.args_file is not None:  # normally removed by the launch itself
                with contextlib.suppress(OSError):
                    os.unlink(self.args_file)
        return notes

    def _check(self) -> list[str]:
        made, whole = created(self._survey, self._roots, self._skip, WALK_BUDGET_S)
        notes = [self._quarantine(p) for p in made]
        if len(notes) > NOTE_PATHS:  # a bounded result: the first few, then a count (break12 S3)
            notes = [*notes[:NOTE_PATHS], f"[sandbox: and {len(notes) - NOTE_PATHS} more moved the same way]"]
        if not (self._survey.complete and whole):
            unread = f"; {self._survey.unread} folders could not be read" if self._survey.unread else ""
            notes.append(
                f"[sandbox: the workspace could not be searched whole for protected paths (a {WALK_BUDGET_S:g} s"
                f" budget, unreadable folders or paths longer than the system allows{unread}); those beyond"
                " were not guarded]"
            )
        return notes

    def _quarantine(self, path: Path) -> str:
        cls = ANYWHERE[path.name][0]
        root = next((r for r in self._roots if r in path.parents), path.parent)
        rel = path.relative_to(root)
        top = self._base.quarantine or Path(tempfile.gettempdir()) / f"agentd-quarantine-{os.getuid()}"
        stamp = top / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"
        dest = stamp / rel
        if len(os.fsencode(str(dest))) >= LONG_PATH:  # beyond PATH_MAX: kept under its own name (S2)
            dest = stamp / f"long-path-{secrets.token_hex(3)}" / path.name
        try:
            top.mkdir(mode=0o700, parents=True, exist_ok=True)
            stamp.mkdir(mode=0o700)  # 0700 like every folder of the data dir (docs/sessions.md)
            os.chmod(stamp, 0o700)
            dest.parent.mkdir(parents=True, exist_ok=True)
            _move(path, dest)
        except OSError as exc:
            return f"[sandbox: the command created {rel}, {CLASS_TEXT[cls]}; agentd could not move it away: {exc}]"
        self.moved += 1
        return (
            f"[sandbox: the command created {rel}, {CLASS_TEXT[cls]}, which the sandbox may not write;"
            f" agentd moved it to {dest}. To write it, run the command outside the sandbox (unsandboxed:"
            f" true; the user is asked).]"
        )


def _move(path: Path, dest: Path) -> None:
    """Move `path` to `dest` (short); a `path` beyond PATH_MAX is renamed through its folder's descriptor
    (renameat), which works within one file system. Raises OSError."""
    if len(os.fsencode(str(path))) < LONG_PATH:
        shutil.move(str(path), str(dest))
        return
    fd = open_long(str(path.parent))
    try:
        os.rename(path.name, dest, src_dir_fd=fd)
    finally:
        os.close(fd)


def stand_in_note(output: str, stand_ins: Iterable[str]) -> str | None:
    """The line for a result whose output names a stand-in (`?? .exrc` from git status, `ls -a`): they were
    agentd's, not the user's (break12 S4); None when the output names none."""
    named = [s for s in stand_ins if re.search(rf"(?<![\w./-]){re.escape(s)}(?![\w.-])", output)]
    if not named:
        return None
    return (
        f"[sandbox: {', '.join(named)} in this output {'was an' if len(named) == 1 else 'were'} empty read-only"
        " stand-in(s) agentd put in place of absent protected paths for the command and removed after it;"
        " not the user's files]"
    )


def readonly_hint(required: bool) -> str:
    """The line added to a sandboxed command's failed result that met a read-only path."""
    names = ", ".join(n for n, (c, k) in ANYWHERE.items() if k == "dir")
    how = (
        'sandbox = "required" lets no command run outside the sandbox here: ask the user to run it.'
        if required
        else "to run a command that must write one of them (git commit, git init), call run_command again"
        " with unsandboxed: true; the user is asked to approve."
    )
    return (
        "[sandbox: the command met a read-only path. Only the workspace is writable, and in it the"
        f" protected paths stay read-only ({names}, .nvim.lua, shell start-up files, at any depth, also"
        f" new ones); {how}]"
    )
