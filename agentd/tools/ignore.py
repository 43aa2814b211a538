"""What a workspace walk leaves out: `.git` and what `.gitignore` files ignore, with git's semantics.

Owns the rule that `list_dir` (agentd.tools.paths.list_tree) and the checkpoints (agentd.checkpoints.scan)
share: the `.git` folder is never entered, and each `.gitignore` from the walked root down applies to the
paths below its folder, the deepest one with a matching pattern deciding (pathspec's `GitIgnoreSpec`). A
`.gitignore` is read without following a link, up to `GITIGNORE_MAX_BYTES`, and only when it is a regular
file. Imports the standard library and pathspec only; never pygls, lsprotocol, acp or `agentd.adapters`.
"""

from __future__ import annotations

import os
import stat

import pathspec

GITIGNORE_MAX_BYTES = 1 << 20
GIT_DIR = ".git"

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

Specs = list[tuple[str, pathspec.GitIgnoreSpec]]  # (folder relative to the root, "" for the root; its spec)
StatKey = tuple[int, int, int, int]  # (size, mtime_ns, ctime_ns, inode)


def read_gitignore(dfd: int) -> tuple[pathspec.GitIgnoreSpec | None, StatKey | None]:
    """The `.gitignore` of the folder open as `dfd`: its spec and its (size, mtime_ns, ctime_ns, inode), or
    (None, None) when there is none, it is a link or not a regular file, or it cannot be read."""
    try:
        fd = os.open(".gitignore", _READ_FLAGS, dir_fd=dfd)
    except OSError:
        return None, None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, None
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        spec = _PARSED.get((st.st_dev, key))
        if spec is None:
            data = f.read(GITIGNORE_MAX_BYTES)
            spec = pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", "replace").splitlines())
            _remember((st.st_dev, key), spec)
    return spec, key


_PARSED: dict[tuple[int, StatKey], pathspec.GitIgnoreSpec] = {}  # parsed once per file version (issue 16)
_PARSED_MAX = 64


def _remember(key: tuple[int, StatKey], spec: pathspec.GitIgnoreSpec) -> None:
    """Keep a parsed `.gitignore` for the next walk (list_dir, every checkpoint scan): parsing a 0.8 MB one
    takes seconds. A changed file has another key (size, times, inode); the oldest entry goes first."""
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)), None)
    _PARSED[key] = spec


def with_gitignore(specs: Specs, base: str, dfd: int) -> Specs:
    """`specs` plus the `.gitignore` of the folder `base` (relative to the root) open as `dfd`, if any.
    Returns a new list when one was added; `specs` itself is never changed."""
    spec, _key = read_gitignore(dfd)
    return [*specs, (base, spec)] if spec is not None else specs


def ignored(specs: Specs, rel: str, is_dir: bool) -> bool:
    """Whether the path `rel` (relative to the root, `/`-separated) is left out: git semantics, deepest
    `.gitignore` first; the first one with a matching pattern decides. `.git` itself is the caller's check
    (`GIT_DIR`)."""
    for base, spec in reversed(specs):
        sub = rel[len(base) + 1 :] if base else rel
        result = spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            return bool(result.include)
    return False
