"""The file tools: `read_file`, `list_dir`, `write_file`, `edit_file` (PROTOCOL.md §7.3, §8.1).

Owns: the four `Tool` classes, their strict input models and model-facing texts, the read window
(line numbers, size cap, truncation marker of CONTRACTS.md §11), the unified diff of previews.
Every open goes through `agentd.tools.paths` (containment, CONTRACTS.md §11 "Path refused"); a refusal
is raised as `PathRefused` and its `.text()` is the model's tool_result. Other failures (missing file,
binary file, edit not found) are `is_error` results. Writes go to disk atomically (`paths.atomic_write`);
the "before" side of a diff and `read_file` use the unsaved editor buffer when `ctx.documents` has one.
Imports only the standard library, pydantic and `agentd.tools`; never pygls, lsprotocol, acp or
`agentd.adapters`.
"""

from __future__ import annotations

import difflib
import errno
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from pydantic import Field

from agentd.tools.base import Preview, StrictInput, Tool, ToolContext, ToolOutput
from agentd.tools.paths import atomic_write, display_path, list_tree, open_for_read, resolve_in_workspace
from agentd.tools.textstyle import (
    BOM_CHAR,
    Loaded,
    conform,
    count_occurrences,
    decode,
    encode,
    find_spans,
    replace_spans,
)

BINARY_SNIFF_BYTES = 8192
LIST_MAX_ENTRIES = 1000
LIST_MAX_DEPTH = 10


def truncation_marker(omitted: int, total: int) -> str:
    """CONTRACTS.md §11: `\\n[... <omitted> of <total> bytes omitted ...]\\n` (counts in bytes)."""
    return f"\n[... {omitted} of {total} bytes omitted ...]\n"


def unified_diff(rel: str, old: str | None, new: str) -> str:
    """A git-style unified diff of `old` (None: a new file) -> `new` for `rel`, with `\\ No newline` marks."""
    lines = difflib.unified_diff(
        _split_lines(old or ""), _split_lines(new), "/dev/null" if old is None else f"a/{rel}", f"b/{rel}"
    )
    return "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)


def _split_lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _os_error(raw: str, exc: OSError) -> ToolOutput:
    if isinstance(exc, FileNotFoundError):
        text = f"{raw} does not exist."
    elif isinstance(exc, IsADirectoryError):
        text = f"{raw} is a directory; use list_dir to see its entries."
    elif exc.errno == errno.EINVAL:
        text = f"{raw} is not a regular file."
    else:
        text = f"{raw}: {exc.strerror or exc}"
    return ToolOutput(content=text, is_error=True)


def _buffer(ctx: ToolContext, real: Path) -> str | None:
    return ctx.documents.read_text(real) if ctx.documents is not None else None


class _NotText(Exception):
    """The file has a NUL byte in its first 8 KiB or is not valid UTF-8."""


def _not_text(raw: str, tool: str) -> ToolOutput:
    return ToolOutput(content=f"{raw} is a binary file; {tool} works on UTF-8 text only.", is_error=True)


def _load_text(raw: str, ctx: ToolContext) -> tuple[Path, Loaded | None]:
    """(real path, current text and BOM, or None if the file does not exist) for a write; the editor's
    buffer wins over the disk."""
    real = resolve_in_workspace(raw, ctx.workspace, for_write=True)
    buf = _buffer(ctx, real)
    if buf is not None:
        return real, Loaded(buf)
    try:
        with open_for_read(raw, ctx.workspace) as f:
            data = f.read()
    except FileNotFoundError:
        return real, None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise _NotText
    try:
        return real, decode(data)
    except UnicodeDecodeError:
        raise _NotText from None


class _PathTool(Tool):
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


class ReadFile(_PathTool):
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
            source, sniff, (kept, total, file_lines) = _scan(args.path, real, ctx, offset, args.limit)
        except OSError as exc:
            return _os_error(args.path, exc)
        body = _cut(kept, cap) if total > cap else kept
        try:
            text = body.decode("utf-8") if b"\0" not in sniff else None
        except UnicodeDecodeError:
            text = None
        if text is None:
            return _not_text(args.path, "read_file")
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


def _scan(
    raw: str, real: Path, ctx: ToolContext, offset: int, limit: int | None
) -> tuple[str, bytes, tuple[bytes, int, int]]:
    """(source "buffer"|"disk", the first 8 KiB for the NUL sniff, `_window(...)`)."""
    buf = _buffer(ctx, real)
    if buf is not None:
        data = buf.encode("utf-8", "surrogatepass")
        window = _window(io.BytesIO(data), len(data), offset, limit, ctx.read_max_bytes)
        return "buffer", data[:BINARY_SNIFF_BYTES], window
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


class ListDir(_PathTool):
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
            out, truncated = list_tree(
                args.path, ctx.workspace, min(args.depth, LIST_MAX_DEPTH), LIST_MAX_ENTRIES
            )
        except OSError as exc:
            return _os_error(args.path, exc)
        content = "\n".join(out) if out else "(empty directory)"
        if truncated:
            content += f"\n[... listing stopped at {LIST_MAX_ENTRIES} entries; list a subdirectory ...]"
        return ToolOutput(
            content=content,
            title=f"List {display_path(real, ctx.workspace)}/",
            locations=[{"path": str(real)}],
            raw_output={"entries": len(out), "truncated": truncated},
        )


# --- write_file and edit_file ----------------------------------------------------------------------


class WriteFileInput(StrictInput):
    path: str = Field(description="File to create or replace, relative to the workspace root.")
    content: str = Field(description="The complete new content of the file (UTF-8 text).")


def _write(raw: str, real: Path, old: str | None, new: Loaded, ctx: ToolContext, line: int) -> ToolOutput:
    """Write `new` atomically; the result carries the diff of PROTOCOL.md §7.3 (content set by the caller)."""
    try:
        data = encode(new.text, new.bom)
        atomic_write(raw, data, ctx.workspace)
    except UnicodeEncodeError:
        return ToolOutput(
            content=f"The new text for {raw} is not valid Unicode; nothing was written.", is_error=True
        )
    except OSError as exc:
        return _os_error(raw, exc)
    return ToolOutput(
        content="",
        locations=[{"path": str(real), "line": line}],
        diff={"path": str(real), "oldText": old, "newText": new.text},
        raw_output={"bytes": len(data), "appliedVia": "disk"},
    )


async def _apply(
    raw: str, real: Path, old: str | None, new: Loaded, ctx: ToolContext, line: int, title: str
) -> ToolOutput:
    """Through the editor when the file is open there (PROTOCOL.md §8.2), else `_write` to disk; an open
    file is never written to disk behind the editor's back (the editor keeps the file's BOM itself)."""
    answer = (
        await ctx.editor.apply_edit(real, old, new.text, f"agentd: {title}")
        if ctx.editor is not None
        else None
    )
    if answer is None:
        return _write(raw, real, old, new, ctx, line)
    applied, note = answer
    if not applied:
        text = f"The editor did not apply the edit to {raw} ({note}); read the file again and retry."
        return ToolOutput(content=text, is_error=True)
    return ToolOutput(
        content=note or "",
        locations=[{"path": str(real), "line": line}],
        diff={"path": str(real), "oldText": old, "newText": new.text},
        raw_output={"bytes": len(new.text.encode("utf-8")), "appliedVia": "editor"},
    )


def _with_note(text: str, out: ToolOutput) -> str:
    """The tool's own result text, then the editor's note (e.g. "not saved to disk yet"), if any."""
    return f"{text} {out.content}" if out.content else text


class _EditProblem(Exception):
    """An edit that cannot apply; `str()` is the model-facing text."""


def _planned(plan: tuple[Loaded, int, int] | str) -> tuple[Loaded, int, int]:
    if isinstance(plan, str):
        raise _EditProblem(plan)
    return plan


def _diff_preview(
    verb: str, raw: str, ctx: ToolContext, new_of: Callable[[Loaded | None], Loaded]
) -> Preview:
    """The approval preview of a write (CONTRACTS.md §5): path and unified diff, or why there is none."""
    real = resolve_in_workspace(raw, ctx.workspace, for_write=True)
    rel = display_path(real, ctx.workspace)
    try:
        _, loaded = _load_text(raw, ctx)
        old = loaded.text if loaded is not None else None
        new = new_of(loaded).text
    except (OSError, _NotText):
        return Preview(summary=f"{verb} {rel} (not a readable text file)", path=str(real))
    except _EditProblem as exc:
        return Preview(summary=f"{verb} {rel} ({exc})", path=str(real))
    note = " (new file)" if old is None else ""
    diff = unified_diff(rel, old, new)
    return Preview(summary=f"{verb} {rel}{note}", path=str(real), diff=diff, old_text=old, new_text=new)


class WriteFile(_PathTool):
    """`write_file`: create or replace a whole file; parent directories are created inside the workspace."""

    name = "write_file"
    description = (
        "Create a file or replace its whole content. Parent directories are created as needed. The file"
        " keeps its permissions, BOM and CRLF line endings (unless the content uses CRLF itself). To"
        " change part of an existing file, prefer edit_file."
    )
    terse_description = "Create or overwrite a file with the given content."
    effect = "write"
    kind = "edit"
    Input = WriteFileInput
    verb, for_write = "Write", True

    async def preview(self, args: Any, ctx: ToolContext) -> Preview:
        return _diff_preview("Write", args.path, ctx, lambda old: conform(args.content, old))

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            real, old = _load_text(args.path, ctx)
            existed = old is not None
        except _NotText:
            real, old, existed = resolve_in_workspace(args.path, ctx.workspace, for_write=True), None, True
        except OSError as exc:
            return _os_error(args.path, exc)
        new = conform(args.content, old)
        old_text = old.text if old is not None else None
        out = await _apply(
            args.path, real, old_text, new, ctx, 1, f"Write {display_path(real, ctx.workspace)}"
        )
        if not out.is_error and out.raw_output is not None:
            n = out.raw_output["bytes"]
            out.content = _with_note(
                f"Wrote {n} bytes to {args.path}." if existed else f"Created {args.path} ({n} bytes).", out
            )
        out.title = f"Write {display_path(real, ctx.workspace)}"
        return out


class EditFileInput(StrictInput):
    path: str = Field(description="File to edit, relative to the workspace root.")
    old_string: str = Field(
        min_length=1,
        description="Exact text to replace, including whitespace and indentation. It must occur exactly"
        " once in the file unless replace_all is true; add surrounding lines to make it unique.",
    )
    new_string: str = Field(description="The text to put in its place (must differ from old_string).")
    replace_all: bool = Field(False, description="Replace every occurrence of old_string. Default: false.")


def plan_edit(raw: str, loaded: Loaded | None, args: EditFileInput) -> tuple[Loaded, int, int] | str:
    """(new text with the file's BOM, occurrences replaced, 1-based first changed line), or the
    model-facing error text. Matching and the new text follow the file's style (`textstyle`, H2)."""
    if args.old_string == args.new_string:
        return "old_string and new_string are identical; nothing would change."
    if loaded is None:
        return f"{raw} does not exist; use write_file to create it."
    old, find, put = loaded.text, args.old_string, args.new_string
    if loaded.bom and find.startswith(BOM_CHAR):  # the model copied the BOM: it is not part of the text
        find, put = find[1:], put.removeprefix(BOM_CHAR)
    spans = find_spans(old, find) if find else []
    count = len(spans) if args.replace_all or not spans else count_occurrences(old, find)
    if count == 0:
        return (
            f"old_string was not found in {raw}; read the file again and copy the exact text,"
            " including whitespace and indentation."
        )
    if count > 1 and not args.replace_all:
        return (
            f"old_string occurs {count} times in {raw}; add surrounding context to make it unique,"
            " or set replace_all to true."
        )
    if not args.replace_all:
        spans = spans[:1]
    new = replace_spans(old, spans, find, put)
    if new == old:
        return (
            "The edit would not change the file: old_string and new_string differ only in line endings,"
            " and an edit keeps the file's (use write_file to change them)."
        )
    line = old[: spans[0][0]].count("\n") + 1
    return Loaded(new, loaded.bom), len(spans), line


class EditFile(_PathTool):
    """`edit_file`: exact string replacement in a text file."""

    name = "edit_file"
    description = (
        "Replace exact text in a file: old_string must match the file's text exactly (read the file"
        " first; a line break may be written as \\n whatever the file uses) and occur exactly once, unless"
        " replace_all is true. The file keeps its line endings, BOM and final newline. Use write_file to"
        " create files."
    )
    terse_description = (
        "Replace old_string with new_string in a file (exact match, unique unless replace_all)."
    )
    effect = "write"
    kind = "edit"
    Input = EditFileInput
    verb, for_write = "Edit", True

    async def preview(self, args: Any, ctx: ToolContext) -> Preview:
        return _diff_preview("Edit", args.path, ctx, lambda old: _planned(plan_edit(args.path, old, args))[0])

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            real, old = _load_text(args.path, ctx)
        except _NotText:
            return _not_text(args.path, "edit_file")
        except OSError as exc:
            return _os_error(args.path, exc)
        plan = plan_edit(args.path, old, args)
        if isinstance(plan, str):
            return ToolOutput(content=plan, is_error=True)
        new, count, line = plan
        old_text = old.text if old is not None else None
        title = f"Edit {display_path(real, ctx.workspace)}"
        out = await _apply(args.path, real, old_text, new, ctx, line, title)
        if not out.is_error:
            via = (out.raw_output or {}).get("appliedVia", "disk")
            text = f"Edited {args.path}: replaced {count} occurrence{'s' if count != 1 else ''}."
            out.content = _with_note(text, out)
            out.raw_output = {"appliedVia": via, "replacements": count}
        out.title = f"Edit {display_path(real, ctx.workspace)}"
        return out
