"""Reading the files agentd itself reads (config files, project instructions) safely: regular files only,
bounded size, and, under a root, no symbolic link that leads out of that root.

Owns: `read_regular()` and `UnsafeFile`. A FIFO, socket or device is refused without blocking (the file
is opened with `O_NONBLOCK`), so a `config.toml` or `AGENTS.md` replaced by a FIFO cannot hang a session
start; only the first `max_bytes` bytes are read, whatever the file's size. With `root` given (a workspace,
or the project root above it) the path's real path must lie inside the root's and is opened one folder at a
time from the root with `O_NOFOLLOW`, so a link, in the middle or at the end, never leads out of it, and a
folder swapped for a link after the check is refused (the tools' own containment, `agentd.tools.paths`,
follows the same rule). The one owner of this rule: config files (`agentd.config`) and instructions
(`agentd.core.instructions`) are read through it, never checked by a second copy. Imports only the standard
library; leaf module.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


NOT_REGULAR = "not a regular file (a FIFO, device or socket)"


class UnsafeFile(OSError):
    """The file exists but may not be read: not a regular file, a link under the root, or outside it.
    `str()` says which, naming the path."""


def _open_under(root: Path, path: Path) -> int:
    """Open `path` when its real path lies inside `root`'s: from the real root, one folder at a time,
    without following links, so a link that stays inside is followed (as the tools read) and one that
    leads out, or a folder swapped for a link meanwhile, is refused."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if not _inside(real, real_root):
        why = (
            f"a link leading out of the workspace (to {real})"
            if _inside(os.path.abspath(path), os.path.abspath(root))
            else f"outside the workspace ({real_root})"
        )
        raise UnsafeFile(errno.EPERM, why, str(path))
    rel = os.path.relpath(real, real_root)
    *dirs, name = rel.split(os.sep)
    fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in dirs:
            nxt = _step(part, fd, _DIR_FLAGS, path)
            os.close(fd)
            fd = nxt
        return _step(name, fd, _FILE_FLAGS | os.O_NOFOLLOW, path)
    finally:
        os.close(fd)


def _inside(path: str, root: str) -> bool:
    return path.startswith(root.rstrip(os.sep) + os.sep)


def _step(name: str, dfd: int, flags: int, path: Path) -> int:
    try:
        return os.open(name, flags, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeFile(errno.ELOOP, "reached through a symbolic link", str(path)) from None
        raise


def read_regular(path: Path, max_bytes: int, *, root: Path | None = None) -> tuple[bytes, int]:
    """`(first max_bytes bytes, file size in bytes)` of the regular file `path`.

    `root`: the real path of `path` must lie inside it (a link that stays inside is followed, one that
    leads out is refused); None: links are followed (a user's own config file may be one, e.g. from a
    dotfiles manager). Raises `FileNotFoundError` (absent),
    `UnsafeFile` (not a regular file, outside `root` or reached through a link out of it), other
    `OSError`s as is."""
    fd = _open_under(root, path) if root is not None else os.open(path, _FILE_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(errno.EINVAL, NOT_REGULAR, str(path))
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = max_bytes
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), st.st_size
    finally:
        os.close(fd)
