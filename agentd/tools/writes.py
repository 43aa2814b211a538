"""The writing file tools, `write_file` and `edit_file` (PROTOCOL.md §7.3, §8.1, §8.2).

Owns: the two `Tool` classes, their strict input models and model-facing texts, `plan_edit` (matching and
replacing, in the file's style: `agentd.tools.textstyle`, issue 9 H2), the unified diff of previews, and
how a change is applied: through the editor when the file is open there (PROTOCOL.md §8.2), else to disk
atomically (`paths.atomic_write`), the BOM kept. The "before" side of a diff is the unsaved editor buffer
when `ctx.documents` has one. Imports only the standard library, pydantic and `agentd.tools`; never
pygls, lsprotocol, acp or `agentd.adapters`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from agentd.tools.base import Preview, StrictInput, ToolContext, ToolOutput
from agentd.tools.fs import BINARY_SNIFF_BYTES, NotText, PathTool, editor_buffer, not_text, os_error
from agentd.tools.paths import atomic_write, display_path, open_for_read, resolve_in_workspace
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


def unified_diff(rel: str, old: str | None, new: str) -> str:
    """A git-style unified diff of `old` (None: a new file) -> `new` for `rel`, with `\\ No newline` marks."""
    lines = difflib.unified_diff(
        _split_lines(old or ""), _split_lines(new), "/dev/null" if old is None else f"a/{rel}", f"b/{rel}"
    )
    return "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)


def _split_lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


async def _load_text(raw: str, ctx: ToolContext) -> tuple[Path, Loaded | None]:
    """(real path, current text and BOM, or None if the file does not exist) for a write; the editor's
    buffer wins over the disk."""
    real = resolve_in_workspace(raw, ctx.workspace, for_write=True)
    buf = await editor_buffer(ctx, real)
    if buf is not None:
        return real, Loaded(buf)
    try:
        with open_for_read(raw, ctx.workspace) as f:
            data = f.read()
    except FileNotFoundError:
        return real, None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise NotText
    try:
        return real, decode(data)
    except UnicodeDecodeError:
        raise NotText from None


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
        return os_error(raw, exc)
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


async def _diff_preview(
    verb: str, raw: str, ctx: ToolContext, new_of: Callable[[Loaded | None], Loaded]
) -> Preview:
    """The approval preview of a write (CONTRACTS.md §5): path and unified diff, or why there is none."""
    real = resolve_in_workspace(raw, ctx.workspace, for_write=True)
    rel = display_path(real, ctx.workspace)
    try:
        _, loaded = await _load_text(raw, ctx)
        old = loaded.text if loaded is not None else None
        new = new_of(loaded).text
    except (OSError, NotText):
        return Preview(summary=f"{verb} {rel} (not a readable text file)", path=str(real))
    except _EditProblem as exc:
        return Preview(summary=f"{verb} {rel} ({exc})", path=str(real))
    note = " (new file)" if old is None else ""
    diff = unified_diff(rel, old, new)
    return Preview(summary=f"{verb} {rel}{note}", path=str(real), diff=diff, old_text=old, new_text=new)


class WriteFile(PathTool):
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
        return await _diff_preview("Write", args.path, ctx, lambda old: conform(args.content, old))

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            real, old = await _load_text(args.path, ctx)
            existed = old is not None
        except NotText:
            real, old, existed = resolve_in_workspace(args.path, ctx.workspace, for_write=True), None, True
        except OSError as exc:
            return os_error(args.path, exc)
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


class EditFile(PathTool):
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
        return await _diff_preview(
            "Edit", args.path, ctx, lambda old: _planned(plan_edit(args.path, old, args))[0]
        )

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            real, old = await _load_text(args.path, ctx)
        except NotText:
            return not_text(args.path, "edit_file")
        except OSError as exc:
            return os_error(args.path, exc)
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
