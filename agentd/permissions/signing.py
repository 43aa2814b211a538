"""Permission records that only agentd can write (issue 12 §3): grants and mode changes are signed.

Owns: `GrantKey` (the per-user secret: `<user config dir>/grant.key`, 32 random bytes, created 0600 with
O_EXCL, read with O_NOFOLLOW; outside every workspace, hidden from the sandbox, a protected path) and
`RecordSigner` (one per session). A `grant` or `mode` record carries `n` (its number among this
session's permission records, from 1) and `mac`: `hmac-sha256:<hex>` of the canonical JSON of
`{"sessionId", "kind", "n", ...payload}`. Replay honours a record only when its MAC verifies and its `n`
is the next one, so a record appended by anything but agentd (a test script, a model that wrote the log)
is ignored, and so is a valid record copied to a later place in the log (it would revive a grant the user
replaced). Imports only the standard library.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KEY_BYTES = 32
PREFIX = "hmac-sha256:"
_UNSIGNED = ("n", "mac")


class GrantKeyError(OSError):
    """The key file exists but cannot be used (not a regular file, wrong size, readable by others)."""


class GrantKey:
    """The per-user secret. `load_or_create(path)` returns the key bytes, creating the file if missing."""

    @staticmethod
    def load_or_create(path: Path) -> bytes:
        """Raises `GrantKeyError` naming the file and what to do when it is unusable, OSError when the
        folder cannot be created."""
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            return GrantKey._read(path)
        try:
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        return GrantKey._read(path)

    @staticmethod
    def _read(path: Path) -> bytes:
        fix = f"delete {path} (agentd makes a new one; grants of existing sessions are then ignored)"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise GrantKeyError(f"{path}: cannot open the grant key ({exc.strerror}); {fix}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != KEY_BYTES:
                raise GrantKeyError(f"{path} is not a {KEY_BYTES}-byte file; {fix}")
            if st.st_mode & 0o077:
                raise GrantKeyError(f"{path} is readable by other users; {fix}")
            return os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)


def _canonical(session_id: str, kind: str, n: int, payload: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in payload.items() if k not in _UNSIGNED and k not in ("v", "seq", "at", "kind")}
    doc = {"sessionId": session_id, "kind": kind, "n": n, **body}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class RecordSigner:
    """Signs and checks the permission records of one session (see the module docstring)."""

    def __init__(self, key: bytes, session_id: str) -> None:
        self._key = key
        self.session_id = session_id
        self.count = 0  # permission records written or accepted so far

    def _mac(self, kind: str, n: int, payload: Mapping[str, Any]) -> str:
        digest = hmac.new(
            self._key, _canonical(self.session_id, kind, n, payload), hashlib.sha256
        ).hexdigest()
        return PREFIX + digest

    def for_session(self, session_id: str) -> RecordSigner:
        """A signer with the same key for another session, counting from 0 (a fork's records, issue 13)."""
        return RecordSigner(self._key, session_id)

    def sign(self, kind: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """`payload` with `n` and `mac` added, for a record agentd is about to append."""
        self.count += 1
        return {**payload, "n": self.count, "mac": self._mac(kind, self.count, payload)}

    def accept(self, kind: str, record: Mapping[str, Any]) -> bool:
        """True when `record` (as read from the log) was signed by agentd for this session and is the next
        permission record; the count then moves on."""
        n, mac = record.get("n"), record.get("mac")
        if not isinstance(n, int) or not isinstance(mac, str) or n != self.count + 1:
            return False
        if not hmac.compare_digest(mac, self._mac(kind, n, record)):
            return False
        self.count = n
        return True
