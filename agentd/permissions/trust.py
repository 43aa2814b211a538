"""The trust boundary (issue 12 §5): what a workspace defines that would run code only runs once the user
trusts that workspace.

Owns: `TrustStore` (`<user config dir>/trust.json`: the trusted workspaces, each with the digest of what
it defines and a MAC made with the per-user grant key, so an entry only agentd wrote counts) and
`definitions_digest()`. A workspace's `.agentd/config.toml` may tighten the user's settings without trust
(more `deny`/`ask` rules, `sandbox = "required"`, more hidden paths); what it may not do without trust is
run its own code: its `[[hooks.*]]` and its MCP servers. Trust is asked once per workspace (the terminal's
question, or `agentd trust DIR`, which the editors' warning names), remembered, and revocable
(`agentd trust --revoke DIR`). It is bound to what the workspace defined when it was trusted: when the
hooks or servers change, the workspace is untrusted again until asked. Imports only the standard library
and `agentd.permissions.signing`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentd.permissions.signing import PREFIX

TRUST_FILE = "trust.json"
MAX_BYTES = 1 << 20


def definitions_digest(definitions: Mapping[str, Any]) -> str:
    """`sha256:<hex>` of the canonical JSON of what a workspace defines that runs code (hooks, servers)."""
    text = json.dumps(definitions, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class TrustStore:
    """The trusted workspaces of one user. `path`: `trust.json`; `key`: the grant key (bytes)."""

    def __init__(self, path: Path, key: bytes) -> None:
        self.path = path
        self._key = key

    def _mac(self, workspace: str, digest: str) -> str:
        body = json.dumps({"workspace": workspace, "digest": digest}, sort_keys=True).encode("utf-8")
        return PREFIX + hmac.new(self._key, body, hashlib.sha256).hexdigest()

    def entries(self) -> list[dict[str, Any]]:
        """The entries agentd wrote (valid MAC), newest last; a damaged or forged entry is left out."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        try:
            st = os.fstat(fd)
            if not (st.st_mode & 0o170000 == 0o100000) or st.st_size > MAX_BYTES:
                return []
            os.set_blocking(fd, True)
            raw = os.read(fd, MAX_BYTES + 1)
        finally:
            os.close(fd)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return []
        items = data.get("trusted") if isinstance(data, dict) else None
        return [e for e in items or [] if isinstance(e, dict) and self._valid(e)]

    def _valid(self, entry: Mapping[str, Any]) -> bool:
        ws, digest, mac = entry.get("workspace"), entry.get("digest"), entry.get("mac")
        if not (isinstance(ws, str) and isinstance(digest, str) and isinstance(mac, str)):
            return False
        return hmac.compare_digest(mac, self._mac(ws, digest))

    def is_trusted(self, workspace: Path, digest: str) -> bool:
        """Whether the user trusted `workspace` (its real path) with these definitions."""
        ws = os.path.realpath(workspace)
        return any(e["workspace"] == ws and e["digest"] == digest for e in self.entries())

    def trusted_digest(self, workspace: Path) -> str | None:
        """The digest the workspace was trusted with (None: never trusted)."""
        ws = os.path.realpath(workspace)
        found = [e["digest"] for e in self.entries() if e["workspace"] == ws]
        return found[-1] if found else None

    def trust(self, workspace: Path, digest: str) -> None:
        """Remember that the user trusts `workspace` with these definitions (replacing an older entry)."""
        ws = os.path.realpath(workspace)
        kept = [e for e in self.entries() if e["workspace"] != ws]
        at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        kept.append({"workspace": ws, "digest": digest, "at": at, "mac": self._mac(ws, digest)})
        self._write(kept)

    def revoke(self, workspace: Path) -> bool:
        """Forget `workspace`; True if it was trusted."""
        ws = os.path.realpath(workspace)
        entries = self.entries()
        kept = [e for e in entries if e["workspace"] != ws]
        self._write(kept)
        return len(kept) != len(entries)

    def _write(self, entries: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{TRUST_FILE}.{os.getpid()}.tmp")
        data = json.dumps({"trusted": entries}, indent=2, ensure_ascii=False).encode("utf-8") + b"\n"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
