"""The empty stand-ins the sandbox's guard puts on the host for absent protected paths (issue 12 §3,
break12; docs/security.md, "Protected paths in the sandbox").

Owns: `STAND_INS` (the stand-ins held by this process, shared by concurrent launches and counted) and
`records_dir()`. Each stand-in held is recorded in `<data dir>/standins/<pid>.json` (path, kind, device
and inode), so the next launch of any agentd process removes those a process killed with SIGKILL left,
only while they are still the recorded entry, of the recorded kind and empty. Imports only the standard
library, `agentd.permissions.protected` (the `Kind` type) and `agentd.sandbox.policy`.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from agentd.permissions.protected import Kind
from agentd.sandbox.policy import SandboxPolicy

Key = tuple[int, int]  # (st_dev, st_ino)


@dataclass
class _Held:
    count: int
    key: Key


class _StandIns:
    """The empty stand-ins on the host, shared by concurrent launches of this process. Each one held is
    recorded in `<records>/<pid>.json` (the data dir's `standins/`), so the ones a process killed with
    SIGKILL leaves are removed by the next launch (`sweep`)."""

    def __init__(self) -> None:
        self._held: dict[Path, _Held] = {}
        self._kinds: dict[Path, tuple[Kind, Path]] = {}  # what each is, and its record folder
        self._lock = threading.Lock()

    def hold(self, path: Path, kind: Kind, records: Path | None = None) -> Key | None:
        """Create (or share) the stand-in at `path`; None when something else exists there now."""
        with self._lock:
            held = self._held.get(path)
            if held is not None:
                held.count += 1
                return held.key
            try:
                if kind == "dir":
                    os.mkdir(path, 0o755)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
                st = os.lstat(path)
            except OSError:
                return None
            self._held[path] = _Held(1, (st.st_dev, st.st_ino))
            if records is not None:
                self._kinds[path] = (kind, records)
                self._record(records)
            return self._held[path].key

    def _record(self, records: Path) -> None:
        """Write this process's record in `records` (the stand-ins held now); removed when none is."""
        mine = [
            {"path": str(p), "kind": k, "key": list(self._held[p].key)}
            for p, (k, r) in self._kinds.items()
            if r == records and p in self._held
        ]
        target = records / f"{os.getpid()}.json"
        with contextlib.suppress(OSError):
            if not mine:
                target.unlink(missing_ok=True)
                return
            records.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            tmp.unlink(missing_ok=True)
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
            )  # private (break16 F7)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(mine))
            os.replace(tmp, target)

    def sweep(self, records: Path) -> int:
        """Remove the stand-ins recorded by processes that are gone (killed with SIGKILL mid-command):
        each only if it is still the recorded entry (device, inode), of the recorded kind and empty.
        Returns how many were removed."""
        removed = 0
        with contextlib.suppress(OSError):
            for rec in records.glob("*.json"):
                if not rec.stem.isdigit() or _alive(int(rec.stem)):
                    continue
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    for item in json.loads(rec.read_text(encoding="utf-8")):
                        removed += _remove_empty(Path(item["path"]), item["kind"], tuple(item["key"]))
                rec.unlink(missing_ok=True)
        return removed

    def release(self, path: Path) -> None:
        """Drop one use; the last removes the stand-in if it is still ours and empty (else it is kept)."""
        with self._lock:
            held = self._held[path]
            held.count -= 1
            if held.count > 0:
                return
            del self._held[path]
            _, records = self._kinds.pop(path, ("dir", None))
            _remove_empty(path, None, held.key)
            if records is not None:
                self._record(records)


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (this one counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _remove_empty(path: Path, kind: str | None, key: tuple[int, ...]) -> int:
    """Remove `path` if it is still the entry `key` (device, inode), of `kind` (None: either) and empty;
    1 when removed."""
    try:
        st = os.lstat(path)
        if (st.st_dev, st.st_ino) != key:
            return 0
        if stat.S_ISDIR(st.st_mode) and kind in (None, "dir"):
            os.rmdir(path)  # fails when not empty: kept
            return 1
        if stat.S_ISREG(st.st_mode) and st.st_size == 0 and kind in (None, "file"):
            os.unlink(path)
            return 1
    except OSError:
        pass
    return 0


STAND_INS = _StandIns()


def records_in(data_root: Path) -> Path:
    """`<data dir>/standins`: where the stand-ins held by the processes using that data dir are recorded."""
    return data_root / "standins"


def records_dir(policy: SandboxPolicy) -> Path:
    """Where the stand-ins held are recorded: `<data dir>/standins` (beside the quarantine folder)."""
    if policy.quarantine is not None:
        return records_in(policy.quarantine.parent)
    return Path(tempfile.gettempdir()) / f"agentd-standins-{os.getuid()}"


def sweep_left(data_root: Path) -> int:
    """Remove the stand-ins a process killed with SIGKILL left (`STAND_INS.sweep` of the data dir's records);
    run as a session is created or opened, so a resume that runs no command leaves no empty `.git` or
    `.vscode` behind in the workspace (break16 F7). Returns how many were removed."""
    return STAND_INS.sweep(records_in(data_root))
