"""The reading file tools, `read_file` and `list_dir` (PROTOCOL.md §7.3, §8.1), and what every file tool
shares (`PathTool`, the error results).

Owns: the two `Tool` classes, their strict input models and model-facing texts, the read window (line
numbers, size cap, truncation marker of CONTRACTS.md §11), `PathTool` (a tool whose `path` is checked for
containment before the permission gate) and the `is_error` texts of OS errors and binary files. Every open
goes through `agentd.tools.paths` (containment, CONTRACTS.md §11 "Path refused"); a refusal is raised as
`PathRefused` and its `.text()` is the model's tool_result. `read_file` uses the unsaved editor buffer
when `ctx.documents` has one and never shows a UTF-8 BOM. The writing tools are in `agentd.tools.writes`.
Imports only the standard library, pydantic and `agentd.tools`; never pygls, lsprotocol, acp or
`agentd.adapters`.
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from pydantic import Field

from agentd.tools.base import Preview, StrictInput, Tool, ToolContext, ToolOutput, truncation_marker
from agentd.tools.paths import display_path, list_tree, open_for_read, resolve_in_workspace
from agentd.tools.textstyle import BOM_CHAR

BINARY_SNIFF_BYTES = 8192
LIST_MAX_ENTRIES = 1000
LIST_MAX_DEPTH = 10


def os_error(raw: str, exc: OSError) -> ToolOutput:
    if isinstance(exc, FileNotFoundError):
        text = f"{raw} does not exist."
    elif isinstance(exc, IsADirectoryError):
        text = f"{raw} is a directory; use list_dir to see its entries."
    elif exc.errno == errno.EINVAL:
        text = f"{raw} is not a regular file."
    else:
        text = f"{raw}: {exc.strerror or exc}"
    return ToolOutput(content=text, is_error=True)


async def editor_buffer(ctx: ToolContext, real: Path) -> str | None:
    """The editor's text of `real` (an open buffer), or None to read the disk: `fetch_text` when the overlay
    must ask the editor (ACP `fs/read_text_file`), else its `read_text`."""
    docs = ctx.documents
    if docs is None:
        return None
    fetch = getattr(docs, "fetch_text", None)
    return await fetch(real) if fetch is not None else docs.read_text(real)


class NotText(Exception):
    """The file has a NUL byte in its first 8 KiB or is not valid UTF-8."""


def not_text(raw: str, tool: str) -> ToolOutput:
    return ToolOutput(content=f"{raw} is a binary file; {tool} works on UTF-8 text only.", is_error=True)


class PathTool(Tool):
    """A tool whose `path` argument is checked for containment before the permission gate."""

    verb: ClassVar[str]
    for_write: ClassVar[bool] = False

    def title(self, args: Any) -> str:
        return f"{self.verb} {args.path}"

    def check(self, args: Any, ctx: ToolContext) -> None:
        """Raises `PathRefused` (CONTRACTS.md §11) when `args.path` escapes the workspace."""
        resolve_in_workspace(args.path, ctx.workspace, for_write=self.for_write)

    async def preview(self, args: Any, ctx: ToolContext) -> Preview:
        """The title and the real path: path rules (`read_file(**/.env)`) and protected paths match it."""
        real = resolve_in_workspace(args.path, ctx.workspace, for_write=self.for_write)
        return Preview(summary=self.title(args), path=str(real))


# --- read_file -------------------------------------------------------------------------------------


class ReadFileInput(StrictInput):
    path: str = Field(description="File to read: relative to the workspace root, or absolute inside it.")
    offset: int | None = Field(
        None, ge=1, description="1-based line number to start at. Default: 1 (the start of the file)."
    )
    limit: int | None = Field(None, ge=1, description="Maximum number of lines to return. Default: all.")


def _window(f: BinaryIO, size: int, offset: int, limit: int | None, cap: int) -> tuple[bytes, int, int]:
    """Scan `f` for lines [offset, offset+limit). Returns (first cap+1 selected bytes, selected bytes in all,
    lines in the file when the scan reached its end, else -1). Memory stays O(cap)."""
    first, idx, pos, begin, total = offset - 1, 0, 0, -1, 0
    kept = bytearray()
    last = b""
    while limit is None or idx < first + limit:
        if idx >= first and begin < 0:
            begin = pos
        if limit is None and begin >= 0 and len(kept) > cap:
            return bytes(kept), size - begin, -1
        piece = f.readline(65536)
        if not piece:
            return bytes(kept), total, idx + (1 if last and not last.endswith(b"\n") else 0)
        last = piece
        pos += len(piece)
        if idx >= first:
            total += len(piece)
            if len(kept) <= cap:
                kept += piece[: cap + 1 - len(kept)]
        if piece.endswith(b"\n"):
            idx += 1
    return bytes(kept), total, -1


def _cut(kept: bytes, cap: int) -> bytes:
    """The first `cap` bytes, then back to the last whole line (or a UTF-8 boundary if there is none)."""
    body = kept[:cap]
    nl = body.rfind(b"\n")
    if nl >= 0:
        return body[: nl + 1]
    end = len(body)
    while end > 0 and (body[end - 1] & 0xC0) == 0x80:
        end -= 1
    if end > 0 and body[end - 1] >= 0xC0:
        end -= 1
    return body[:end] if end else body


class ReadFile(PathTool):
    """`read_file`: numbered lines of a text file, windowed by `offset`/`limit`, capped at
    `ctx.read_max_bytes` of file bytes (the truncation marker follows the last line)."""

    name = "read_file"
    description = (
        "Read a UTF-8 text file in the workspace. Each line is returned as its 1-based line number"
        " right-aligned in 6 columns, a tab, then the line text (like `cat -n`). Use offset and limit to"
        " read part of a long file. Output longer than the size limit ends with"
        " `[... N of M bytes omitted ...]`; read on with a larger offset. Binary files are refused."
        " If the file is open in the editor, its unsaved text is returned."
    )
    terse_description = "Read a text file; lines come numbered. Optional offset (1-based) and limit."
    effect = "read"
    kind = "read"
    Input = ReadFileInput
    verb = "Read"

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        real = resolve_in_workspace(args.path, ctx.workspace, for_write=False)
        offset, cap = args.offset or 1, ctx.read_max_bytes
        try:
            source, sniff, (kept, total, file_lines) = await _scan(args.path, real, ctx, offset, args.limit)
        except OSError as exc:
            return os_error(args.path, exc)
        body = _cut(kept, cap) if total > cap else kept
        try:
            text = body.decode("utf-8") if b"\0" not in sniff else None
        except UnicodeDecodeError:
            text = None
        if text is None:
            return not_text(args.path, "read_file")
        if offset == 1:
            text = text.removeprefix(BOM_CHAR)  # kept on disk by the writes (H2), never shown
        if total == 0 and offset > 1:
            noun = "line" if file_lines == 1 else "lines"
            msg = f"offset {offset} is past the end of {args.path} ({file_lines} {noun})."
            return ToolOutput(content=msg, is_error=True)
        lines = text.split("\n")
        if text.endswith("\n") or not text:
            lines.pop()
        content = "\n".join(f"{offset + i:>6}\t{line}" for i, line in enumerate(lines)) or "(empty file)"
        if total > cap:
            content += truncation_marker(total - len(body), total)
        return ToolOutput(
            content=content,
            title=f"Read {display_path(real, ctx.workspace)}",
            locations=[{"path": str(real), "line": offset}],
            raw_output={"lines": len(lines), "bytes": len(body), "source": source},
        )


async def _scan(
    raw: str, real: Path, ctx: ToolContext, offset: int, limit: int | None
) -> tuple[str, bytes, tuple[bytes, int, int]]:
    """(source "buffer"|"disk", the first 8 KiB for the NUL sniff, `_window(...)`)."""
    buf = await editor_buffer(ctx, real)
    if buf is not None:
        data = buf.encode("utf-8", "surrogatepass")
        window = _window(io.BytesIO(data), len(data), offset, limit, ctx.read_max_bytes)
        return "buffer", data[:BINARY_SNIFF_BYTES], window
    return await asyncio.to_thread(_scan_disk, raw, ctx, offset, limit)  # off the loop: a big file (issue 16)


def _scan_disk(
    raw: str, ctx: ToolContext, offset: int, limit: int | None
) -> tuple[str, bytes, tuple[bytes, int, int]]:
    with open_for_read(raw, ctx.workspace) as f:
        sniff = f.read(BINARY_SNIFF_BYTES)
        f.seek(0)
        return "disk", sniff, _window(f, os.fstat(f.fileno()).st_size, offset, limit, ctx.read_max_bytes)


# --- list_dir --------------------------------------------------------------------------------------


class ListDirInput(StrictInput):
    path: str = Field(
        ".", description="Directory to list, relative to the workspace root. Default: the root."
    )
    depth: int = Field(
        1,
        ge=1,
        description=f"How many levels to list: 1 = its entries only (default); at most {LIST_MAX_DEPTH}.",
    )


class ListDir(PathTool):
    """`list_dir`: a sorted listing that skips `.git` and what `.gitignore` files ignore."""

    name = "list_dir"
    description = (
        "List a directory in the workspace, sorted by name, one entry per line, as paths relative to the"
        " listed directory. Directories end with `/`, symbolic links with `@` (not followed). Entries"
        " ignored by .gitignore files and the .git directory are left out. depth > 1 also lists"
        f" subdirectories; at most {LIST_MAX_ENTRIES} entries are shown."
    )
    terse_description = "List a directory (dirs end with /); skips .gitignore'd entries. Optional depth."
    effect = "read"
    kind = "read"
    Input = ListDirInput
    verb = "List"

    def title(self, args: Any) -> str:
        return f"List {args.path.rstrip('/') or '/'}/"

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        real = resolve_in_workspace(args.path, ctx.workspace, for_write=False)
        try:
            (
                out,
                truncated,
            ) = await asyncio.to_thread(  # off the loop: big trees, big .gitignore files (issue 16)
                list_tree, args.path, ctx.workspace, min(args.depth, LIST_MAX_DEPTH), LIST_MAX_ENTRIES
            )
        except OSError as exc:
            return os_error(args.path, exc)
        content = "\n".join(out) if out else "(empty directory)"
        if truncated:
            content += f"\n[... listing stopped at {LIST_MAX_ENTRIES} entries; list a subdirectory ...]"
        return ToolOutput(
            content=content,
            title=f"List {display_path(real, ctx.workspace)}/",
            locations=[{"path": str(real)}],
            raw_output={"entries": len(out), "truncated": truncated},
        )
