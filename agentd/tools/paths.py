"""Workspace containment: every path a tool touches is checked here (CONTRACTS.md §11 "Path refused",
TESTING.md §4.5 "Path escapes").

Owns: `resolve_in_workspace` (the check), `open_for_read`, `open_dir`, `atomic_write` and `list_tree` (the
only ways the fs tools open files and directories), plus `real_roots`, `containing_root` and
`display_path`. Imports only the standard library, `agentd.failpoints` and `agentd.tools`
(`base`, `workspace`, `ignore`); never pygls, lsprotocol, acp or `agentd.adapters`.

`roots` is the session's pinned `Workspace` (`agentd.tools.workspace`, H18); a plain list of roots is
pinned for the one call. Every function first checks that the roots are still the pinned directories
(`RootChanged` otherwise), and compares with the real roots as pinned, never re-resolved from their names.

Rules (all refusals raise `PathRefused(raw, roots[0])`, whose `.text()` is the model-facing text):
- a relative path is joined to `roots[0]`; an absolute one must lie lexically inside a root (as given or
  as its real path), so `/proc/self/root/...` and `/dev/fd/...` aliases are refused;
- the real path (`os.path.realpath`, every symlink resolved) must lie inside a real root, so `..` escapes
  and symlinks pointing out (in the middle, at the end, dangling) are refused; symlinks that stay inside
  are followed for reads;
- a write never goes through a link: a final component that is a symlink is refused, even if it points
  inside;
- a NUL byte, an unencodable name, a path over 4096 bytes or a component over 255 bytes is refused
  before any system call (no `ValueError` escapes);
- at open time the check runs again (after `failpoints.hit("paths.after_check")`), then the parent chain
  is opened one directory at a time from the pinned root's handle with `O_NOFOLLOW`, and the file itself
  with `O_NOFOLLOW`, so a directory swapped for a symlink in between is refused with the same text, and a
  root swapped for a link cannot redirect the open.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from agentd import failpoints
from agentd.tools.base import PathRefused
from agentd.tools.ignore import GIT_DIR, Specs, ignored, with_gitignore
from agentd.tools.workspace import Workspace, as_workspace

PATH_MAX_BYTES = 4096
NAME_MAX_BYTES = 255

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

RootsArg = Workspace | Sequence[Path | str]


def real_roots(roots: RootsArg) -> list[str]:
    """The real (symlink-free, absolute) form of each root as pinned, in order."""
    return as_workspace(roots).reals


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def containing_root(real: str | Path, roots: RootsArg) -> str | None:
    """The real root that contains the real path `real` (the longest one), or None."""
    inside = [r for r in real_roots(roots) if _within(str(real), r)]
    return max(inside, key=len) if inside else None


def display_path(real: str | Path, roots: RootsArg) -> str:
    """`real` relative to `roots[0]` for titles (`src/app.py`, `.` for the root); absolute if elsewhere."""
    root = real_roots(roots)[0]
    return os.path.relpath(str(real), root) if _within(str(real), root) else str(real)


def _check_syntax(raw: str, refuse: PathRefused) -> None:
    if "\x00" in raw:
        raise refuse
    try:
        encoded = os.fsencode(raw)
    except UnicodeEncodeError:
        raise refuse from None
    if len(encoded) > PATH_MAX_BYTES or any(len(c) > NAME_MAX_BYTES for c in encoded.split(b"/")):
        refuse.why = "ENAMETOOLONG"
        raise refuse


def resolve_in_workspace(raw: str, roots: RootsArg, *, for_write: bool) -> Path:
    """Check the model-given path `raw` against the workspace `roots` (`roots[0]` first) and return its real
    absolute path. `for_write`: also refuse a final component that is a symlink.

    Raises `PathRefused(raw, roots[0])` (CONTRACTS.md §11) for every case in the module docstring,
    `RootChanged` when a root is no longer its pinned directory; never `ValueError`. The returned path may
    not exist yet.
    """
    raw = os.fspath(raw)
    ws = as_workspace(roots)
    ws.verify()
    refuse = PathRefused(raw, ws.shown)
    _check_syntax(raw, refuse)
    given, reals = ws.given, ws.reals
    joined = os.path.join(given[0], raw)
    lexical = os.path.normpath(joined)
    if not any(_within(lexical, r) for r in given + reals):
        refuse.why = "outside"
        raise refuse
    real = os.path.realpath(joined)
    if not any(_within(real, r) for r in reals):
        refuse.why = "outside"
        raise refuse
    if for_write and lexical not in given and os.path.islink(joined.rstrip(os.sep) or os.sep):
        refuse.why = "symlink"
        raise refuse
    return Path(real)


def _recheck(raw: str | Path, ws: Workspace, for_write: bool) -> tuple[str, str, list[str]]:
    """Check, fire `paths.after_check`, check again; return (raw, real root, path parts below it)."""
    text = os.fspath(raw)
    resolve_in_workspace(text, ws, for_write=for_write)
    failpoints.hit("paths.after_check")
    real = str(resolve_in_workspace(text, ws, for_write=for_write))
    root = containing_root(real, ws)
    if root is None:  # resolve_in_workspace guarantees a root; kept for the type checker
        raise PathRefused(text, ws.shown, "outside")
    rel = os.path.relpath(real, root)
    return text, root, [] if rel == "." else rel.split(os.sep)


def _refuse_on_link(exc: OSError, raw: str, ws: Workspace, dfd: int, name: str) -> OSError | PathRefused:
    """`O_NOFOLLOW` fails with ELOOP on a link (ENOTDIR with `O_DIRECTORY`): make that a refusal."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = exc.errno == errno.ELOOP
        if is_link or exc.errno == errno.ELOOP:
            return PathRefused(raw, ws.shown, "symlink")
    return exc


def _open_chain(raw: str, ws: Workspace, root: str, parts: list[str], *, create: bool) -> int:
    """Open `root/parts...` from the pinned root, one directory at a time with O_NOFOLLOW; `create`: mkdir
    missing ones."""
    fd = ws.open_root(root)
    try:
        for part in parts:
            try:
                nxt = _open_subdir(part, fd, create)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise _refuse_on_link(exc, raw, ws, fd, part) from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_subdir(part: str, dfd: int, create: bool) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        if not create:
            raise
    os.mkdir(part, 0o777, dir_fd=dfd)
    return os.open(part, _DIR_FLAGS, dir_fd=dfd)


def open_for_read(path: str | Path, roots: RootsArg) -> BinaryIO:
    """Open the model-given `path` for reading as a binary file object (caller closes it).

    Raises `PathRefused` (containment, also at open time), `FileNotFoundError`, `IsADirectoryError`,
    `OSError(EINVAL)` for anything that is not a regular file (FIFOs, devices), other `OSError`s as is.
    """
    ws = as_workspace(roots)
    raw, root, parts = _recheck(path, ws, for_write=False)
    dfd = _open_chain(raw, ws, root, parts[:-1], create=False)
    name = parts[-1] if parts else "."
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
    except OSError as exc:
        raise _refuse_on_link(exc, raw, ws, dfd, name) from None
    finally:
        os.close(dfd)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", raw)
        raise OSError(errno.EINVAL, "Not a regular file", raw)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def open_dir(path: str | Path, roots: RootsArg) -> int:
    """Open the model-given directory `path` and return its fd (caller closes it; usable with
    `os.scandir(fd)` and `dir_fd=`). Raises `PathRefused`, `FileNotFoundError`, `NotADirectoryError`."""
    ws = as_workspace(roots)
    raw, root, parts = _recheck(path, ws, for_write=False)
    return _open_chain(raw, ws, root, parts, create=False)


def atomic_write(path: str | Path, data: bytes, roots: RootsArg) -> Path:
    """Replace (or create) the model-given `path` with `data` atomically and return its real path.

    Missing parent directories inside the workspace are created. The bytes go to a temp file in the same
    directory, which is fsynced, given the old file's mode (a 0755 file stays 0755; a new file gets 0644
    minus the umask) and renamed over the target; then the directory is fsynced. Raises `PathRefused`
    (containment, re-checked at open time; a target that is a symlink at rename time),
    `IsADirectoryError`, other `OSError`s as is. Never writes through a symbolic link.
    """
    ws = as_workspace(roots)
    raw, root, parts = _recheck(path, ws, for_write=True)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "Is a directory", raw)
    name = parts[-1]
    dfd = _open_chain(raw, ws, root, parts[:-1], create=True)
    tmp = f".agentd-{secrets.token_hex(6)}.tmp"
    made_tmp = False
    try:
        old = _lstat_at(name, dfd)
        _refuse_target(old, raw, ws)
        fd = os.open(tmp, _TMP_FLAGS, 0o644, dir_fd=dfd)
        made_tmp = True
        try:
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        _refuse_target(_lstat_at(name, dfd), raw, ws)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        made_tmp = False
        os.fsync(dfd)
    finally:
        if made_tmp:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        os.close(dfd)
    return Path(root, *parts)


def _lstat_at(name: str, dfd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _refuse_target(st: os.stat_result | None, raw: str, ws: Workspace) -> None:
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise PathRefused(raw, ws.shown, "symlink")
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", raw)


# --- directory listing (list_dir) ----------------------------------------------------------------------


def list_tree(path: str | Path, roots: RootsArg, depth: int, max_entries: int) -> tuple[list[str], bool]:
    """List the model-given directory `path` down to `depth` levels (1 = its entries) without following
    symlinks: entries relative to it, sorted by name, pre-order, directories with `/`, links with `@`.
    `.git` and what `.gitignore` files (from the root down) ignore are left out (git semantics, pathspec's
    `GitIgnoreSpec`). Returns (entries, True if stopped at `max_entries`). Raises like `open_dir`."""
    ws = as_workspace(roots)
    raw, root, parts = _recheck(path, ws, for_write=False)
    specs: Specs = []
    fd = ws.open_root(root)
    try:
        for i, part in enumerate(parts):  # the ancestors' .gitignore files, one O_NOFOLLOW step at a time
            specs = with_gitignore(specs, "/".join(parts[:i]), fd)
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise _refuse_on_link(exc, raw, ws, fd, part) from None
            os.close(fd)
            fd = nxt
        out: list[str] = []
        return out, _walk(fd, "/".join(parts), "", depth, specs, out, max_entries)
    finally:
        os.close(fd)


def _walk(dfd: int, here: str, prefix: str, depth: int, specs: Specs, out: list[str], cap: int) -> bool:
    """Append the entries of `dfd` (at `here`, relative to the real root) to `out`; True at the cap."""
    specs = with_gitignore(specs, here, dfd)
    with os.scandir(dfd) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        is_dir = entry.is_dir(follow_symlinks=False)
        rel = f"{here}/{entry.name}" if here else entry.name
        if entry.name == GIT_DIR or ignored(specs, rel, is_dir):
            continue
        if len(out) >= cap:
            return True
        out.append(prefix + entry.name + ("/" if is_dir else "@" if entry.is_symlink() else ""))
        if is_dir and depth > 1:
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:
                continue
            try:
                if _walk(sub, rel, f"{prefix}{entry.name}/", depth - 1, specs, out, cap):
                    return True
            finally:
                os.close(sub)
    return False
