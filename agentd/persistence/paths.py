"""The data-dir layout and private file helpers (CONTRACTS.md §9, TESTING.md §4.7).

Owns: resolving the data dir (`--data-dir`, else `AGENTD_DATA_DIR`, else platformdirs), the path of every
file in it (`DataDir`), session ids, and the umask-independent helpers that create folders 0700 and files
0600, fsync a folder and write a file atomically (temp file, fsync, rename, folder fsync).
Must not import pygls, lsprotocol, acp or agentd.adapters; imports only `agentd.failpoints` and `agentd.errors`
from agentd.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import platformdirs
from ulid import ULID

from agentd import failpoints
from agentd.errors import ConfigError

DIR_MODE = 0o700
FILE_MODE = 0o600
ENV_DATA_DIR = "AGENTD_DATA_DIR"

_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def open_data_dir(cli_data_dir: str | None, *, write: bool = True) -> DataDir:
    """The `DataDir` of `--data-dir` / `$AGENTD_DATA_DIR` / the platform default (`resolve_data_dir`);
    `write=False` for the read-only views, which work on a data dir agentd may not write (H12)."""
    return DataDir(resolve_data_dir(cli_data_dir, write=write))


def resolve_data_dir(cli_data_dir: str | None, *, write: bool = True) -> Path:
    """The data dir: `--data-dir` if given, else `$AGENTD_DATA_DIR`, else `platformdirs.user_data_dir("agentd")`.

    Returns an absolute path (user `~` expanded); creates nothing (CONTRACTS.md §9, PROTOCOL.md §3.1). Raises
    `ConfigError` (exit 2) when it cannot be used: it, or the nearest existing folder above it, is not a
    directory or (with `write`, the default) not writable. The read-only views pass `write=False`.
    """
    if cli_data_dir:
        raw, origin = cli_data_dir, "--data-dir"
    elif os.environ.get(ENV_DATA_DIR):
        raw, origin = os.environ[ENV_DATA_DIR], f"${ENV_DATA_DIR}"
    else:
        raw, origin = platformdirs.user_data_dir("agentd"), "the default location"
    path = Path(raw).expanduser().absolute()
    _check_data_dir(path, origin, write)
    return path


def _check_data_dir(path: Path, origin: str, write: bool = True) -> None:
    """Raise `ConfigError` unless `path` is a (with `write`: writable) folder, or can be created as one."""
    fix = "pass --data-dir DIR (or set AGENTD_DATA_DIR) naming a folder agentd can create and write"
    existing = path
    while True:
        try:
            mode = existing.stat().st_mode
            break
        except (FileNotFoundError, NotADirectoryError):
            if existing.parent == existing:
                return
            existing = existing.parent
        except OSError as exc:
            raise ConfigError(
                f"data dir {path} ({origin}): cannot inspect {existing} ({exc.strerror or exc}); {fix}"
            ) from None
    where = f"data dir {path} ({origin})" + ("" if existing == path else f" cannot be created: {existing}")
    if not stat.S_ISDIR(mode):
        raise ConfigError(f"{where} is not a directory; {fix}")
    if write and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{where} is not writable; {fix}")


def new_session_id() -> str:
    """A new session id: `sess_` + a lowercase ULID (31 URL-safe chars, time-sortable; PROTOCOL.md §2)."""
    return "sess_" + str(ULID()).lower()


def is_valid_session_id(session_id: str) -> bool:
    """True if `session_id` is 1-64 URL-safe characters (`[A-Za-z0-9_-]`), so it is safe as a folder name."""
    return isinstance(session_id, str) and _SESSION_ID.fullmatch(session_id) is not None


class DataDir:
    """Paths inside one data dir (the layout table of CONTRACTS.md §9). Pure: creates nothing.

    Session-scoped methods raise ValueError for an id that is not 1-64 URL-safe characters, so a client's
    id can never escape `sessions/`.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"DataDir({str(self.root)!r})"

    @property
    def sessions_dir(self) -> Path:
        return self.root / "sessions"

    def session_dir(self, session_id: str) -> Path:
        if not is_valid_session_id(session_id):
            raise ValueError(f"invalid session id {session_id!r}: expected 1-64 characters of [A-Za-z0-9_-]")
        return self.sessions_dir / session_id

    def log_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / "log.jsonl"

    def index_path(self, session_id: str) -> Path:
        """The resume index of the log (agentd/persistence/logindex.py): a cache, rebuilt when it is bad."""
        return self.session_dir(session_id) / "log.idx"

    def meta_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / "meta.json"

    def lock_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / "lock"

    def audit_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / "audit.jsonl"

    def blobs_dir(self, session_id: str) -> Path:
        return self.session_dir(session_id) / "blobs"

    def tcp_token_path(self, port: int) -> Path:
        return self.root / f"tcp-{int(port)}.token"


def as_data_dir(data_dir: DataDir | str | os.PathLike[str]) -> DataDir:
    """Accept a `DataDir` or a path to its root."""
    return data_dir if isinstance(data_dir, DataDir) else DataDir(data_dir)


def ensure_dir(path: Path) -> Path:
    """Create `path` and any missing parents; every folder created here gets mode 0700 (chmod, umask-proof).

    Folders that already exist keep their mode. Returns `path`. Raises OSError.
    """
    missing: list[Path] = []
    p = Path(path)
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(d, DIR_MODE)
    return Path(path)


def open_private(path: Path, flags: int) -> int:
    """`os.open(path, flags | O_CLOEXEC, 0o600)`, then fchmod 0600 if the call created the file. Returns the fd."""
    existed = os.path.exists(path)
    fd = os.open(path, flags | os.O_CLOEXEC, FILE_MODE)
    if not existed or flags & os.O_TRUNC:
        try:
            os.fchmod(fd, FILE_MODE)
        except OSError:
            os.close(fd)
            raise
    return fd


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (loops over short writes). Raises OSError."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(path: Path) -> None:
    """fsync the folder `path` so a create, rename or unlink in it is durable. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, before_rename: str | None = None) -> None:
    """Replace `path` with `data` atomically: `<name>.tmp` in the same folder (0600), fsync, rename, folder fsync.

    `before_rename` names a failpoint (agentd/failpoints.py) hit between the fsync and the rename. The temp
    file is removed if anything raises, so no `*.tmp` is left behind (a SIGKILL may leave one; the next
    write replaces it). Raises OSError.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if before_rename is not None:
            failpoints.hit(before_rename)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


_T = TypeVar("_T")
_DURABILITY_POOL: ThreadPoolExecutor | None = None


async def off_loop(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run a blocking write or fsync in agentd's durability threads (issue 16: nothing blocks the event
    loop). Its own pool of 32 threads, not the loop's default (6 on 2 cores), so the fsyncs of many
    sessions overlap (the filesystem groups them into one journal commit) instead of queueing."""
    global _DURABILITY_POOL
    if _DURABILITY_POOL is None:
        _DURABILITY_POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="agentd-durable")
    return await asyncio.get_running_loop().run_in_executor(_DURABILITY_POOL, lambda: fn(*args, **kwargs))
