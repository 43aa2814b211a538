"""The incremental walk that snapshots one workspace root (issue 13; docs/checkpoints.md "Cost").

Owns: `scan_root()` and `ScanStats`. The walk opens every folder from its parent's descriptor without
following links (the root from the session's pinned workspace), so nothing outside the root is read. It
compares each folder with the previous snapshot of the same path:
- With a usable watcher (agentd.checkpoints.watch, Linux) it looks only at the folders the kernel reported
  since the last walk and at the path down to them: a checkpoint costs in proportion to what changed.
- Otherwise it stats every entry. A folder whose own stat key (mode, mtime_ns, ctime_ns, inode) and
  `.gitignore` are unchanged has the same names as last time, so it is not listed again and its names are
  not matched against the ignore rules again (the expensive part of a first walk).
Either way a file whose (mode, size, mtime_ns, ctime_ns, inode) is unchanged keeps its old content ref
without being opened; otherwise it is read, hashed and, when its bytes are new, written to the pack. A
folder whose entries are all unchanged keeps its old tree object. An entry whose mtime or ctime falls within
the filesystem's timestamp granularity of the walk's start is marked racy and read again by the next stat
walk (git's racy-clean rule), so a change right after a checkpoint with the same size and time is not missed.
Not covered (kept in the snapshot as names with a reason, see agentd.checkpoints.tree): `.git`, ignored
paths (agentd.tools.ignore), agentd's data dir, files over the size cap, FIFOs/sockets/devices, what cannot
be read, folders deeper than `MAX_DEPTH`. Imports the standard library, `agentd.checkpoints` and
`agentd.tools.ignore` only.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass

from agentd.checkpoints.objects import PackWriter, sha256
from agentd.checkpoints.tree import FIXED_SKIPS, DirNode, Entry, encode
from agentd.checkpoints.watch import Changes, Watcher
from agentd.tools.ignore import GIT_DIR, Specs, ignored, read_gitignore

MAX_DEPTH = 256
FINE_RACY_NS = 50_000_000  # sub-millisecond timestamps: the kernel's coarse clock lags by at most a tick
COARSE_RACY_NS = 3_000_000_000  # whole-second (or 2 s FAT) timestamps

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass
class ScanStats:
    """What one walk did: `read` (files opened because their stat changed or the kernel reported them),
    `folders` (folders looked at), `watched` (True: only the folders the watcher reported were looked at)."""

    read: int = 0
    folders: int = 0
    watched: bool = False


def racy(st: os.stat_result, start_ns: int) -> bool:
    """Whether a change right after the walk could leave this stat unchanged (see module docstring)."""
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    window = COARSE_RACY_NS if st.st_mtime_ns % 1_000_000 == 0 else FINE_RACY_NS
    return newest >= start_ns - window


class _Walk:
    def __init__(
        self, writer: PackWriter, max_file_bytes: int, start_ns: int, watcher: Watcher | None,
        changes: Changes | None, exclude: set[str],
    ) -> None:  # fmt: skip
        self.writer = writer
        self.cap = max_file_bytes
        self.start_ns = start_ns
        self.watcher = watcher
        self.changes = changes
        self.touched = changes.touched() if changes is not None else set()
        self.exclude = exclude
        self.stats = ScanStats(watched=changes is not None)

    # ---- one folder ----------------------------------------------------------------------------------
    def folder(
        self, fd: int, rel: str, old: DirNode | None, specs: Specs, respec: bool, depth: int
    ) -> DirNode:
        if self.watcher is not None:
            self.watcher.add(fd, rel)  # before listing: a change from now on queues an event
        self.stats.folders += 1
        st = os.fstat(fd)
        key = (st.st_mode, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        spec, gi_key = read_gitignore(fd)
        respec = respec or old is None or old.ignore != gi_key
        if spec is not None:
            specs = [*specs, (rel, spec)]
        node = DirNode(key, racy(st, self.start_ns), gi_key)
        # watched: a change after the watch was added (before this folder was last listed) queued an event,
        # so racy entries need no second look
        same = (
            old is not None and not respec and old.key == key and (self.changes is not None or not old.racy)
        )
        if same and self.changes is not None and rel not in self.changes.folders:
            assert old is not None
            names = self._partial(node, old, rel)
        elif same:
            assert old is not None
            names = [n for n in old.entries] + [n for n, why in old.skipped.items() if why not in FIXED_SKIPS]
            node.skipped = {n: why for n, why in old.skipped.items() if why in FIXED_SKIPS}
        else:
            names = os.listdir(fd)
        for name in sorted(names):
            self.entry(fd, rel, name, node, old, specs, respec, depth)
        node.tally()
        if old is not None and _unchanged(node, old):
            return old
        node.ref = self.writer.put(encode(node))
        return node

    def _partial(self, node: DirNode, old: DirNode, rel: str) -> list[str]:
        """Watched walk, folder not listed again: keep the old entries but the names the kernel reported and
        the subfolders with something to do; return those names."""
        assert self.changes is not None
        names = set(self.changes.names.get(rel, ()))
        prefix = f"{rel}/" if rel else ""
        names.update(n for n, e in old.entries.items() if e[0] == "d" and prefix + n in self.touched)
        node.entries = {n: e for n, e in old.entries.items() if n not in names}
        node.skipped = {n: why for n, why in old.skipped.items() if n not in names}
        return list(names)

    def entry(
        self, fd: int, rel: str, name: str, node: DirNode, old: DirNode | None, specs: Specs, respec: bool,
        depth: int,
    ) -> None:  # fmt: skip
        path = f"{rel}/{name}" if rel else name
        if name == GIT_DIR:
            node.skipped[name] = "git"
            return None
        if path in self.exclude:
            node.skipped[name] = "data_dir"
            return None
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None  # removed while we walk
        except OSError:
            node.skipped[name] = "unreadable"
            return None
        is_dir = stat.S_ISDIR(st.st_mode)
        cached = old.entries.get(name) if old is not None else None
        if (respec or cached is None or (cached[0] == "d") != is_dir) and ignored(specs, path, is_dir):
            node.skipped[name] = "ignored"
            return None
        if is_dir:
            sub = cached[1] if cached is not None and cached[0] == "d" else None
            self.subfolder(fd, path, name, node, sub, specs, respec, depth)
        elif stat.S_ISREG(st.st_mode):
            self.file(fd, name, st, node, cached)
        elif stat.S_ISLNK(st.st_mode):
            self.link(fd, name, st, node, cached)
        else:
            node.skipped[name] = "special"
        return None

    def subfolder(
        self, fd: int, path: str, name: str, node: DirNode, old: DirNode | None, specs: Specs, respec: bool,
        depth: int,
    ) -> None:  # fmt: skip
        if self.changes is not None and old is not None and not respec and path not in self.touched:
            node.entries[name] = ("d", old)  # watched: nothing happened in it or below
            return None
        if depth >= MAX_DEPTH:
            node.skipped[name] = "unreadable"
            return None
        try:
            sub = os.open(name, _DIR, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError:
            node.skipped[name] = "unreadable"
            return None
        try:
            node.entries[name] = ("d", self.folder(sub, path, old, specs, respec, depth + 1))
        except PermissionError:
            node.skipped[name] = "unreadable"
        finally:
            os.close(sub)
        return None

    # ---- files and links -----------------------------------------------------------------------------
    def file(self, fd: int, name: str, st: os.stat_result, node: DirNode, old: Entry | None) -> None:
        if st.st_size > self.cap:
            node.skipped[name] = "too_large"
            return None
        probe = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if old is not None and old[0] == "f" and not old[7] and old[1:6] == probe:
            node.entries[name] = old
            return None
        try:
            node.entries[name] = self.read(fd, name, old)
        except FileNotFoundError:
            pass
        except OSError as exc:
            why = (
                "special" if exc.errno == errno.EINVAL else "too_large" if exc.errno == errno.EFBIG else None
            )
            node.skipped[name] = why or "unreadable"
        return None

    def read(self, dfd: int, name: str, old: Entry | None) -> Entry:
        """Read one file (never through a link) and store its bytes when they are new."""
        fd = os.open(name, _FILE, dir_fd=dfd)
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            chunks, total = [], 0
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
                total += len(chunk)
                if total > self.cap:
                    raise OSError(errno.EFBIG, "grew over the cap")
            after = os.fstat(fd)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        self.stats.read += 1
        sha = sha256(data)
        ref = (
            old[6] if old is not None and old[0] == "f" and old[6].sha == sha else self.writer.put(data, sha)
        )
        moved = (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != (
            before.st_size, before.st_mtime_ns, before.st_ctime_ns)  # fmt: skip
        is_racy = moved or racy(after, self.start_ns)
        return (
            "f",
            after.st_mode,
            len(data),
            after.st_mtime_ns,
            after.st_ctime_ns,
            after.st_ino,
            ref,
            is_racy,
        )

    def link(self, fd: int, name: str, st: os.stat_result, node: DirNode, old: Entry | None) -> None:
        probe = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if old is not None and old[0] == "l" and not old[7] and old[1:6] == probe:
            node.entries[name] = old
            return
        try:
            target = os.readlink(name, dir_fd=fd)
        except FileNotFoundError:
            return
        except OSError:
            node.skipped[name] = "unreadable"
            return
        node.entries[name] = ("l", *probe, target, racy(st, self.start_ns))


def _unchanged(new: DirNode, old: DirNode) -> bool:
    """Same folder state, same names, and every entry the same (files kept by identity, folders by ref)."""
    if (new.key, new.racy, new.ignore, new.skipped) != (old.key, old.racy, old.ignore, old.skipped):
        return False
    if new.entries.keys() != old.entries.keys():
        return False
    for name, e in new.entries.items():
        o = old.entries[name]
        if e is o:
            continue
        if e[0] == "d" and o[0] == "d":
            if e[1] is not o[1] and e[1].ref != o[1].ref:
                return False
        elif e != o:
            return False
    return True


def scan_root(
    root_fd: int, old: DirNode | None, writer: PackWriter, max_file_bytes: int, *, watcher: Watcher | None = None,
    exclude: set[str] | None = None, start_ns: int | None = None,
) -> tuple[DirNode, ScanStats]:  # fmt: skip
    """Snapshot the folder open as `root_fd` against `old` (None: the first walk), writing new objects to
    `writer`. Returns the new snapshot (`old` itself when nothing changed) and what the walk did.
    `watcher`: the root's inotify watcher; with `old` and a usable (primed) watcher only the folders it
    reports are looked at, otherwise every file is statted and watches are added as the walk goes (the
    caller primes the watcher once it keeps the result: `old` must be what the last walk returned). `exclude`:
    root-relative paths never entered (agentd's data dir). `start_ns`: the walk's start on the wall clock
    (racy rule). Raises OSError when the root cannot be read."""
    changes = watcher.drain() if watcher is not None and watcher.usable and old is not None else None
    if changes is not None and changes.everything:
        changes = None
    walk = _Walk(writer, max_file_bytes, time.time_ns() if start_ns is None else start_ns, watcher, changes,
                 exclude or set())  # fmt: skip
    node = walk.folder(root_fd, "", old, [], False, 0)
    return node, walk.stats
