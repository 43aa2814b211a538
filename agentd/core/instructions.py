"""Project instructions: AGENTS.md files (CLAUDE.md where a folder has no AGENTS.md) (issue 11).

Owns: where instruction files are found, how they are read (`agentd.safe_read`: regular files of bounded
size, no link below the project root), the 32 KiB cap and its note, the text that goes into the system
prompt (`Instructions.text`), how the log keeps it for resume (`record()`, `latest_record()`), and the notes that
deliver AGENTS.md files of deeper folders later (`NestedInstructions`).
Must not import pygls, lsprotocol, acp or adapters.

How it works, so the system prompt stays byte-stable (CONTRACTS.md §4, §6):
- At session start, read once: the user's file (`<config dir>/agentd/AGENTS.md`, the folder of the user
  `config.toml`), then the project's from its root down to the session's folder: the project root is the
  nearest folder at or above the workspace that holds `.git` (else the workspace itself), and each folder
  on that path contributes its AGENTS.md, or its CLAUDE.md when it has none. They go, in that order, into
  a second `system` block, which the cache breakpoint covers. The text is stored in the session's `meta`
  record (`instructions`: files and exact text); a resumed session rebuilds its system prompt from that record and never re-reads the files, so
  its prefix stays a cache hit. `Session.reload_instructions()` reads them again on request: an `instructions` record, a new
  system prompt, and so one cache write on the next request.
- Folders below the workspace root are not read at start. When a tool call touches a path in such a folder
  (its `locations`), the AGENTS.md (or CLAUDE.md) files between the workspace root and that folder are
  appended to that call's tool_result as a note, once (only files `grep` and `glob` would see: not in a
  folder `.gitignore` or `.ignore` leaves out, not in a hidden folder, the search tools' own rule): a note still in the active history is not repeated,
  and one removed by compaction is delivered again on the next touch. The note is part of the stored
  history, so requests and resumes stay byte-identical and the system prompt never changes.
- Everything loaded at start is capped at `INSTRUCTIONS_MAX_BYTES` (32 KiB) of file text, and so is each
  note; a cut is stated in the text the model reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd.safe_read import UnsafeFile, read_regular
from agentd.tools.walk import visible_files

if TYPE_CHECKING:
    from agentd.core.session import Session

log = logging.getLogger("agentd.instructions")

INSTRUCTIONS_MAX_BYTES = 32768
NAMES = ("AGENTS.md", "CLAUDE.md")
HEADER = (
    "Instructions from the user and the project (AGENTS.md files), read when this session started."
    " Follow them; where they disagree, a later (more specific) file wins."
)


@dataclass(frozen=True)
class Loaded:
    """One instruction file: `path` as shown (workspace-relative, else absolute), its `size` on disk and
    the bytes `loaded` after the cut (bytes)."""

    path: str
    size: int
    loaded: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.size, "loadedBytes": self.loaded}


@dataclass(frozen=True)
class Instructions:
    """What a session loaded: the files and the exact system-block text ("" when there is none)."""

    files: tuple[Loaded, ...] = ()
    text: str = ""

    def record(self) -> dict[str, Any]:
        """The payload of the `instructions` log record."""
        return {"files": [f.to_json() for f in self.files], "text": self.text}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Instructions:
        files = tuple(
            Loaded(str(f.get("path", "")), int(f.get("bytes", 0)), int(f.get("loadedBytes", 0)))
            for f in rec.get("files") or []
        )
        return cls(files, str(rec.get("text") or ""))

    def summary(self) -> str:
        """`AGENTS.md (1234 bytes), docs/AGENTS.md (cut at 32768 of 102400 bytes)`, or `none`."""
        if not self.files:
            return "none"
        return ", ".join(
            f"{f.path} ({f.size} bytes)"
            if f.loaded >= f.size
            else f"{f.path} (cut at {f.loaded} of {f.size} bytes)"
            for f in self.files
        )


def project_root(workspace: Path) -> Path:
    """The nearest folder at or above `workspace` that holds `.git`, else `workspace` itself."""
    for folder in (workspace, *workspace.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return workspace


def folders_between(top: Path, bottom: Path) -> list[Path]:
    """`top`, then each folder down to `bottom` (inclusive); `[bottom]` when it is not below `top`."""
    if bottom != top and top not in bottom.parents:
        return [bottom]
    rel = bottom.relative_to(top).parts
    return [top.joinpath(*rel[:i]) for i in range(len(rel) + 1)]


def _read_one(folder: Path, root: Path | None, limit: int) -> tuple[Path, bytes, int] | None:
    """(file, its first `limit` bytes, its size) of the folder's AGENTS.md, else CLAUDE.md, else None.
    A file that may not be read (a FIFO, a link under `root`) is skipped with a warning."""
    for name in NAMES:
        path = folder / name
        try:
            data, size = read_regular(path, limit, root=root)
        except FileNotFoundError:
            continue
        except (UnsafeFile, OSError) as exc:
            log.warning("instructions: %s skipped: %s", path, exc.strerror or exc)
            continue
        return path, data, size
    return None


def _shown(path: Path, workspace: Path) -> str:
    return os.path.relpath(path, workspace) if workspace in path.parents else str(path)


def _decode(data: bytes) -> str:
    """UTF-8 text (a cut sequence at the end dropped, invalid bytes replaced), BOM and CRs removed."""
    text = data.decode("utf-8", "ignore" if len(data) and data[-1] >= 0x80 else "replace")
    return text.removeprefix("\ufeff").replace("\r\n", "\n")


class _Budget:
    """Renders files under one byte budget; states the cut in the text."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.limit = limit
        self.parts: list[str] = []
        self.files: list[Loaded] = []
        self.skipped: list[str] = []

    def add(self, shown: str, data: bytes, size: int) -> None:
        if self.left <= 0:
            self.skipped.append(shown)
            return
        body = data[: self.left]
        self.left -= len(body)
        self.files.append(Loaded(shown, size, min(len(body), size)))
        self.parts.append(f"## {shown}\n\n{_decode(body).rstrip()}")
        if size > len(body):
            self.parts.append(
                f"[... {shown} was cut: {len(body)} of its {size} bytes loaded; instructions are capped at"
                f" {self.limit} bytes ...]"
            )

    def notes(self) -> list[str]:
        if not self.skipped:
            return []
        return [f"[... not loaded, over the {self.limit}-byte cap: {', '.join(self.skipped)} ...]"]


def load(workspace: Path, user_dir: Path | None) -> Instructions:
    """Read the instruction files for a session on `workspace` (see the module docstring). `user_dir`: the
    folder of the user's `config.toml` (None: no user file). Never raises: an unreadable file is skipped."""
    workspace = Path(os.path.realpath(workspace))
    root = project_root(workspace)
    found: list[tuple[str, bytes, int]] = []
    if user_dir is not None:
        hit = _read_one(user_dir, None, INSTRUCTIONS_MAX_BYTES)
        if hit:
            found.append((str(hit[0]), hit[1], hit[2]))
    for folder in folders_between(root, workspace):
        hit = _read_one(folder, root, INSTRUCTIONS_MAX_BYTES)
        if hit:
            found.append((_shown(hit[0], workspace), hit[1], hit[2]))
    if not found:
        return Instructions()
    budget = _Budget(INSTRUCTIONS_MAX_BYTES)
    for shown, data, size in found:
        budget.add(shown, data, size)
    text = "\n\n".join([HEADER, *budget.parts, *budget.notes()])
    return Instructions(tuple(budget.files), text)


def latest_record(records: Iterable[dict[str, Any]]) -> Instructions | None:
    """The instructions a session log says are in force: the last `instructions` record (a reload), else
    the `instructions` of its `meta` record (session start); None when it predates them."""
    last = None
    for rec in records:
        if rec.get("kind") == "instructions":
            last = rec
        elif rec.get("kind") == "meta" and isinstance(rec.get("instructions"), dict):
            last = rec["instructions"]
    return Instructions.from_record(last) if last is not None else None


# --- folders below the workspace root: notes in tool results -------------------------------------------

NOTE_HEAD = "[Project instructions from {path}; they apply to work under {folder}/]"


@dataclass
class NestedInstructions:
    """Delivers AGENTS.md files of folders below the workspace root as notes on tool results (module
    docstring). `root`: the workspace root (real path); `history`: the active messages (to see which notes
    the model still has). One per session; register `after_tool` as an `after_tool` hook."""

    root: Path
    history: Callable[[], Iterable[dict[str, Any]]]
    _cache: dict[Path, tuple[str, bytes, int] | None] = field(default_factory=dict)
    _visible: set[str] | None = None  # the instruction files a search of the root sees
    _walked_at: float | None = None  # when they were listed (None: not yet)

    async def prepare(self, tool_name: str, output: Any) -> None:
        """Read (and list, `_searchable`) the instruction files `output.locations` may need, in a worker
        thread, so `after_tool` finds them cached and never blocks the event loop (break11)."""
        folders = self._folders(output.locations or [])
        if folders:
            await asyncio.to_thread(self._load, folders)

    def _load(self, folders: list[Path]) -> None:
        for folder in folders:
            for step in folders_between(self.root, folder)[1:]:
                self._file(step)

    def after_tool(self, tool_name: str, output: Any) -> str | None:
        """Append the notes for the folders `output.locations` touch; return what was loaded (logged)."""
        notes, shown = self._notes(output.locations or [])
        if not notes:
            return None
        output.content = (output.content or "") + "".join(notes)
        return "loaded " + ", ".join(shown)

    def _notes(self, locations: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        wanted: list[tuple[str, bytes, int]] = []
        for folder in self._folders(locations):
            for step in folders_between(self.root, folder)[1:]:
                hit = self._file(step)
                if hit and hit not in wanted:
                    wanted.append(hit)
        if not wanted:
            return [], []
        seen = self._in_history([NOTE_HEAD.format(path=p, folder=os.path.dirname(p)) for p, _, _ in wanted])
        budget = INSTRUCTIONS_MAX_BYTES
        notes, shown = [], []
        for (path, data, size), present in zip(wanted, seen, strict=True):
            if present or budget <= 0:
                continue
            body = data[:budget]
            budget -= len(body)
            cut = (
                ""
                if size <= len(body)
                else f"\n[... {path} was cut: {len(body)} of its {size} bytes loaded ...]"
            )
            head = NOTE_HEAD.format(path=path, folder=os.path.dirname(path))
            notes.append(f"\n\n{head}\n{_decode(body).rstrip()}{cut}")
            shown.append(path)
        return notes, shown

    def _folders(self, locations: list[dict[str, Any]]) -> list[Path]:
        out: list[Path] = []
        for loc in locations:
            p = Path(str(loc.get("path", "")))
            folder = p if p.is_dir() else p.parent
            if self.root in folder.parents and folder not in out:
                out.append(folder)
        return out

    def _file(self, folder: Path) -> tuple[str, bytes, int] | None:
        if folder not in self._cache:
            hit = _read_one(folder, self.root, INSTRUCTIONS_MAX_BYTES)
            shown = _shown(hit[0], self.root) if hit else ""
            seen = hit is not None and self._searchable(hit[0], os.path.relpath(hit[0], self.root))
            self._cache[folder] = (shown, hit[1], hit[2]) if hit and seen else None
        return self._cache[folder]

    def _searchable(self, path: Path, rel: str) -> bool:
        """Whether `grep`/`glob` would see this instruction file: one ignored by `.gitignore`/`.ignore`, or
        in a hidden folder (node_modules/, vendor/, .venv/ ...), is never delivered (break11). The rule is
        the search tools' own (`agentd.tools.walk.visible_files`), listed once per session and again
        only for a file written after that listing. A link (`AGENTS.md -> CLAUDE.md`, which ripgrep does not
        list) counts as its target when that is a file of the same folder that the listing holds (break11)."""
        real = Path(os.path.realpath(path))
        if real != path.absolute() and real.parent == Path(os.path.realpath(path.parent)):
            rel = os.path.relpath(real, os.path.realpath(self.root))
        if self._walked_at is not None and rel not in (self._visible or ()):
            with contextlib.suppress(OSError):
                if self._visible is not None and os.stat(path).st_mtime >= self._walked_at:
                    self._walked_at = None  # written since: list again
        if self._walked_at is None:
            self._walked_at = time.time()
            self._visible = visible_files(self.root, NAMES)
            if self._visible is None:
                log.warning(
                    "instructions: ripgrep is missing: AGENTS.md files below %s are not read", self.root
                )
        return self._visible is not None and rel.replace(os.sep, "/") in self._visible

    def _in_history(self, heads: list[str]) -> list[bool]:
        """For each note head: is it in a tool_result of the active history?"""
        found = [False] * len(heads)
        for msg in self.history():
            if msg.get("role") != "user":
                continue
            for block in msg.get("content", []):
                text = block.get("content") if block.get("type") == "tool_result" else None
                if isinstance(text, str):
                    for i, head in enumerate(heads):
                        found[i] = found[i] or head in text
        return found


def user_instructions_dir() -> Path:
    """The folder of the user's `config.toml` (`AGENTD_CONFIG_DIR`, else platformdirs' user config dir),
    where the user's own AGENTS.md lives."""
    from agentd.config import user_config_path

    return user_config_path().parent


def reload(session: Session) -> Instructions:
    """`session.reload_instructions()`: read the instruction files again (the session writes the
    `instructions` record and rebuilds its system prompt). Raises UsageError while a turn runs."""
    return session.reload_instructions()
