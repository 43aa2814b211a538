"""What changed in a workspace root since the last checkpoint, from the kernel (Linux inotify; issue 13).

Owns: `Watcher` (one inotify instance per session root: a watch on every covered folder, added by the walk
before it lists the folder, so any later change in it queues an event) and `Changes` (what a drain found:
the folders to list again, the names to look at again per folder, or `everything` when the kernel's queue
overflowed or the root itself moved). The walk (agentd.checkpoints.scan) then looks only at those folders
and the path down to them; without a watcher (macOS, inotify unavailable or out of watches, a new process)
it stats every file instead. Both give the same snapshot; the watcher only saves the work.

Not seen by inotify, hence a reason to fall back: a change through a memory map, through a hard link
outside the root, or made by another machine on a network filesystem. `Watcher.add` failing for any folder
(e.g. `fs.inotify.max_user_watches` reached) disables the watcher for good: every later walk stats again.
Imports the standard library only (ctypes for the three system calls).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import struct
import sys
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_ISDIR = 0x4000, 0x8000, 0x01000000, 0x40000000
MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
)  # fmt: skip
_EVENT = struct.Struct("iIII")


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        lib.inotify_init1  # noqa: B018 - probe
    except (OSError, AttributeError):
        return None
    return lib


_LIBC = _libc()


@dataclass
class Changes:
    """One drain: `everything` (walk all), else `folders` (listed again, with all their names looked at)
    and `names` (per folder, the names to look at again). Folder paths are root-relative, `""` the root."""

    everything: bool = False
    folders: set[str] = field(default_factory=set)
    names: dict[str, set[str]] = field(default_factory=dict)

    def touched(self) -> set[str]:
        """The folders with something to do, and every folder on the way down to them."""
        out = {""}
        for rel in [*self.folders, *self.names]:
            parts = rel.split("/") if rel else []
            for i in range(len(parts) + 1):
                out.add("/".join(parts[:i]))
        return out


class Watcher:
    """The inotify watches of one root (see the module docstring). Not thread-safe; `close()` when done."""

    def __init__(self) -> None:
        self.fd = -1
        self.broken = _LIBC is None
        self.primed = False  # set by the owner once a whole walk added the watches and its result is kept
        self._paths: dict[int, str] = {}  # watch descriptor -> folder relative to the root
        if not self.broken:
            assert _LIBC is not None
            fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                log.info("checkpoints: inotify unavailable (%s); every checkpoint stats the tree",
                         os.strerror(ctypes.get_errno()))  # fmt: skip
                self.broken = True
            else:
                self.fd = fd

    @property
    def usable(self) -> bool:
        """Whether a walk may look only at what `drain()` reports: not broken, and primed by a whole walk."""
        return not self.broken and self.primed

    def add(self, dir_fd: int, rel: str) -> None:
        """Watch the folder open as `dir_fd` (at `rel`); call before listing it. A failure disables the
        watcher (the walks stat everything from then on)."""
        if self.broken:
            return
        assert _LIBC is not None
        wd = _LIBC.inotify_add_watch(self.fd, f"/proc/self/fd/{dir_fd}".encode(), MASK)
        if wd < 0:
            err = ctypes.get_errno()
            log.info("checkpoints: cannot watch %s (%s); every checkpoint stats the tree", rel or ".",
                     os.strerror(err))  # fmt: skip
            self.close()
            return
        self._paths[wd] = rel

    def drain(self) -> Changes:
        """Every event queued since the last drain, as Changes (`everything` when the watcher is unusable)."""
        if self.broken:
            return Changes(everything=True)
        out = Changes()
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.close()
                return Changes(everything=True)
            self._parse(data, out)

    def _parse(self, data: bytes, out: Changes) -> None:
        off = 0
        while off + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, off)
            name = os.fsdecode(data[off + _EVENT.size : off + _EVENT.size + size].rstrip(b"\0"))
            off += _EVENT.size + size
            if mask & IN_Q_OVERFLOW:
                out.everything = True
                continue
            rel = self._paths.get(wd)
            if rel is None:
                continue
            if mask & IN_IGNORED:
                self._paths.pop(wd, None)
            elif not name:  # the folder itself: its mode changed, or it went away
                if mask & (IN_DELETE_SELF | IN_MOVE_SELF) and rel == "":
                    out.everything = True
                out.folders.add(rel)
            else:
                out.names.setdefault(rel, set()).add(name)
                if mask & IN_ISDIR:
                    out.folders.add(f"{rel}/{name}" if rel else name)

    def close(self) -> None:
        """Drop every watch; the watcher is unusable afterwards."""
        self.broken = True
        self.primed = False
        self._paths.clear()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
