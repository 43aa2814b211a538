"""The ACP client's file system as the tools' editor (PROTOCOL.md §4.5; ACP "File System").

Owns: `ClientFiles`, the `DocumentOverlay` and `EditorBridge` (agentd.tools.base) of a session whose client
advertised `fs.readTextFile` / `fs.writeTextFile`:
- reads (`read_file`, the "before" side of a diff) ask the client with `fs/read_text_file`, so a file open in
  the editor with unsaved changes is read as the buffer holds it; a file that is not on disk, not a regular
  file, larger than `CLIENT_READ_MAX` bytes or binary (a NUL in its first 8 KiB) is read from the disk by the
  tool itself, and so is any file when the client answers with an error;
- writes (`write_file`, `edit_file`) go to the client with `fs/write_text_file`, so they land in the editor's
  buffers (and its undo history); an error answer fails the call with the client's reason, never a disk
  write behind the editor's back.
The tools have checked the path (containment in the pinned workspace roots, links, protected paths) before
either is asked: the same rules hold whichever side reads or writes. Without the capability the tools use the
disk. Search tools read the disk (an ACP client does not say which buffers are open).
Imports acp only through the caller; never pygls or lsprotocol.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("agentd.acp.files")

CLIENT_READ_MAX = 8 * 1024 * 1024
SNIFF_BYTES = 8192
Ask = Callable[[str, dict[str, Any]], Awaitable[Any]]


class ClientFiles:
    """One session's view of the client's files. `ask(method, params)` sends a request to the client and
    returns its result (raising on an error answer); `read` / `write`: the capabilities the client gave."""

    def __init__(self, session_id: str, ask: Ask, *, read: bool, write: bool) -> None:
        self.session_id = session_id
        self._ask = ask
        self.read = read
        self.write = write

    # ---- DocumentOverlay -----------------------------------------------------------------------------
    def read_text(self, path: Path) -> str | None:
        """No buffer is known without asking (see `fetch_text`)."""
        return None

    async def fetch_text(self, path: Path) -> str | None:
        """The text of `path` as the client holds it (an open buffer, unsaved changes included), or None to
        read it from the disk (see the module docstring)."""
        if not self.read or not _worth_asking(path):
            return None
        try:
            result = await self._ask("fs/read_text_file", {"sessionId": self.session_id, "path": str(path)})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("fs/read_text_file %s failed (%s); reading the disk", path, exc)
            return None
        content = result.get("content") if isinstance(result, dict) else None
        return content if isinstance(content, str) else None

    def open_paths(self) -> list[Path]:
        return []

    # ---- EditorBridge --------------------------------------------------------------------------------
    async def apply_edit(
        self, path: Path, old_text: str | None, new_text: str, label: str = ""
    ) -> tuple[bool, str | None] | None:
        """Write through the client (`fs/write_text_file`): `(True, None)`, or `(False, reason)` when it
        answered with an error. None without the capability: the tool writes the disk."""
        if not self.write:
            return None
        params = {"sessionId": self.session_id, "path": str(path), "content": new_text}
        try:
            await self._ask("fs/write_text_file", params)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return False, f"the editor refused to write it: {_reason(exc)}"
        return True, None

    def unsaved_paths(self) -> list[str]:
        return []


def _worth_asking(path: Path) -> bool:
    """A regular text file on disk of at most CLIENT_READ_MAX bytes (see the module docstring)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > CLIENT_READ_MAX:
            return False
        return b"\0" not in os.read(fd, SNIFF_BYTES)
    except OSError:
        return False
    finally:
        os.close(fd)


def _reason(exc: Exception) -> str:
    data = getattr(exc, "data", None)
    details = data.get("details") if isinstance(data, dict) else None
    text = str(details or exc) or type(exc).__name__
    return text[:500]
