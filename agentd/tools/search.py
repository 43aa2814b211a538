"""The search tools `grep` and `glob` (issue 11; PROTOCOL.md §7.3): read-only, allowed without asking by
default, run through ripgrep (`agentd.tools.ripgrep`).

Owns: `Grep`, `Glob`, their strict input models and model-facing texts, rg's results (`Found`) and the
unsaved-buffer overlay (a file open in the editor with unsaved changes is searched as the buffer holds it).
The scope and the ripgrep runs: `agentd.tools.walk`; pages of results: `agentd.tools.pages`; the glob
filter: `agentd.tools.globs`. Imports the standard library, pydantic and `agentd.tools`; never pygls,
lsprotocol, acp or `agentd.adapters`.

What a search sees is ripgrep's default view of the workspace: `.gitignore` and `.ignore` files apply,
hidden files and folders are skipped unless `path` or `glob` names them, binary files are skipped, and no
symbolic link is followed; `.git` is never searched (a path or glob naming it is refused, and nothing in a
`.git` folder at any depth is a result). File names are shown with control characters and other invisible
characters escaped (`agentd.text.visible`), so a name cannot forge a result line. A `glob` is relative to the searched folder (`path`) and only narrows that view.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from agentd.text import visible
from agentd.tools import ripgrep
from agentd.tools.base import StrictInput, Tool, ToolContext, ToolOutput
from agentd.tools.pages import Page, page_of, render_lines
from agentd.tools.paths import resolve_in_workspace
from agentd.tools.walk import QueryError, Scope, Walk, dirty_buffers

CONTEXT_MAX = 20
STDIN = b"<stdin>"  # the name rg prints for a search of its standard input
LOCATIONS_MAX = 100
Mode = Literal["content", "files", "count"]


def _title(pattern: str, path: str) -> str:
    return f'Search "{pattern}" in {path}'


def _error(text: str, title: str) -> ToolOutput:
    return ToolOutput(content=text, is_error=True, title=title)


def _os_error(raw: str, exc: OSError, title: str) -> ToolOutput:
    raw = visible(raw, one_line=True)
    if isinstance(exc, FileNotFoundError):
        return _error(f"{raw} does not exist.", title)
    if isinstance(exc, NotADirectoryError):
        return _error(f"{raw} is not a folder.", title)
    return _error(f"{raw}: {exc.strerror or exc}", title)


class _SearchTool(Tool):
    effect = "read"
    kind = "search"

    def title(self, args: Any) -> str:
        return _title(args.pattern, args.path)

    def check(self, args: Any, ctx: ToolContext) -> None:
        """Raises `PathRefused` (CONTRACTS.md §11) when `args.path` escapes the workspace."""
        resolve_in_workspace(args.path, ctx.workspace, for_write=False)

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        title = self.title(args)
        try:
            out = await self.search(args, ctx)
        except ripgrep.RipgrepMissing as exc:
            return _error(exc.text(), title)
        except QueryError as exc:
            return _error(str(exc), title)
        except OSError as exc:
            return _os_error(args.path, exc, title)
        out.title = title
        return out

    async def search(self, args: Any, ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError


# --- grep ------------------------------------------------------------------------------------------------


def _no_nul(value: str | None) -> str | None:
    """A NUL cannot reach ripgrep (an argument or path cannot hold one): a clear invalid-arguments error
    instead of a traceback (break11)."""
    if value is not None and "\x00" in value:
        raise ValueError("must not contain a NUL character (\\0); remove it")
    return value


class GrepInput(StrictInput):
    _nul = field_validator("pattern", "path", "glob")(_no_nul)

    pattern: str = Field(
        min_length=1, description="Regular expression to search for (ripgrep's Rust regex syntax)."
    )
    path: str = Field(
        ".", description="File or folder to search, relative to the workspace root. Default: the root."
    )
    glob: str | None = Field(
        None,
        description='Only search files matching this glob, relative to path (e.g. "*.py", "src/**/*.{ts,tsx}").',
    )
    case_insensitive: bool = Field(False, description="Match case-insensitively. Default: false.")
    context: int = Field(
        0,
        ge=0,
        le=CONTEXT_MAX,
        description=f"Lines of context before and after each match (0-{CONTEXT_MAX}).",
    )
    output: Mode = Field(
        "content",
        description="content: matching lines as path:line:text (default); files: the matching files;"
        " count: path:number of matching lines.",
    )
    limit: int | None = Field(None, ge=1, description="At most this many results. Default: as many as fit.")
    offset: int = Field(0, ge=0, description="Skip this many results (paging). Default: 0.")


def _query(args: Any) -> list[str]:
    """rg flags for the output mode, the case and the pattern (`--regexp=`, so `-x` is a pattern too)."""
    if args.output == "files":
        flags = ["--files-with-matches", "--with-filename"]
    elif args.output == "count":
        flags = ["--count", "--with-filename"]
    else:
        flags = ["--line-number", "--with-filename", "--heading", "--no-context-separator"]
        flags += [f"--max-columns={ripgrep.MAX_COLUMNS}", "--max-columns-preview"]
        flags += [f"--context={args.context}"] if args.context else []
    return [*flags, *(["--ignore-case"] if args.case_insensitive else []), f"--regexp={args.pattern}"]


@dataclass
class Found:
    """rg's results by rg path (bytes, as printed): each file's block of lines (content mode) and its
    matching-line count (1 per file in files mode)."""

    bodies: dict[bytes, bytes]
    counts: dict[bytes, int]

    @classmethod
    def parse(cls, mode: Mode, data: bytes, context: int = 0) -> Found:
        if mode == "content":
            bodies = ripgrep.parse_files(data)
            return cls(bodies, {p: ripgrep.match_count(b, context > 0) for p, b in bodies.items()})
        if mode == "count":
            return cls({}, ripgrep.parse_counts(data))
        return cls({}, dict.fromkeys(ripgrep.parse_paths(data), 1))

    def keep(self, walk: Walk) -> None:
        """Drop the files the glob filter does not select."""
        for path in [p for p in self.counts if not walk.keeps(p)]:
            self.drop(path)

    def drop(self, path: bytes) -> None:
        self.bodies.pop(path, None)
        self.counts.pop(path, None)

    def put(self, path: bytes, other: Found) -> None:
        """The results of one file searched on its own (an editor buffer), in place of rg's."""
        self.drop(path)
        for body in other.bodies.values():
            self.bodies[path] = body
        for count in other.counts.values():
            self.counts[path] = count


class Grep(_SearchTool):
    """`grep`: ripgrep over the workspace; sorted `path:line:text` results, paged within a byte budget."""

    name = "grep"
    description = (
        "Search file contents with a regular expression (ripgrep; Rust regex syntax). Read-only and fast:"
        " prefer it to run_command with grep or rg. Results are sorted by path and line, as"
        " path:line:text (context lines as path-line-text). Files ignored by .gitignore or .ignore, hidden"
        " files (unless path or glob names them), binary files and symbolic links are skipped; unsaved"
        " editor changes are searched. Long results are cut with the number of hidden results stated;"
        " call again with offset to see the next ones."
    )
    terse_description = "Regex search in files (ripgrep); results path:line:text, paged with offset."
    Input = GrepInput

    async def search(self, args: Any, ctx: ToolContext) -> ToolOutput:
        walk = Walk.of(args.path, args.glob, ctx)
        query = _query(args)
        with walk.opened() as (cwd_fd, stdin_fd):
            target = "-" if walk.scope.is_file else "."
            run = await walk.rg_run([*query, target], cwd_fd, stdin_fd, pattern=args.pattern)
            found = Found.parse(args.output, run.stdout, args.context)
            found.keep(walk)
            await _overlay(walk, args.output, args.context, query, found, cwd_fd)
        return _grep_output(walk.scope, args, found, _notes(run, walk), ctx)


def _notes(run: ripgrep.RgRun, walk: Walk) -> list[str]:
    notes = []
    if run.timed_out:
        notes.append(f"[the search timed out after {walk.ctx.run_timeout_s:g} s; results may be missing]")
    if run.cut:
        mib = ripgrep.OUTPUT_MAX_BYTES >> 20
        notes.append(f"[the search stopped after {mib} MiB of results; counts are lower bounds: narrow it]")
    if walk.scope.is_file and ripgrep.binary_note(run.stdout):
        notes.append(
            f"[{visible(walk.scope.rel, one_line=True)} is a binary file; grep searches text files only]"
        )
    elif run.rc == 2 and run.stderr.strip():
        first = run.stderr.strip().splitlines()[0]
        notes.append(f"[some files could not be searched: {first.removeprefix('rg: ')}]")
    return notes


def _grep_output(scope: Scope, args: Any, found: Found, notes: list[str], ctx: ToolContext) -> ToolOutput:
    if not found.counts:
        where = f' (glob "{args.glob}")' if args.glob else ""
        text = f'No matches for "{args.pattern}" in path "{visible(args.path, one_line=True)}"{where}.'
        return ToolOutput(content="\n".join([text, *notes]), raw_output={"matches": 0, "files": 0})
    paths = sorted(found.counts)  # rg paths sort as the shown paths do: they share one prefix
    page = _grep_page(args, found, paths, scope, ctx)
    raw: dict[str, Any] = {"matches": sum(found.counts.values()), "files": len(found.counts)}
    if args.output == "files":
        del raw["matches"]
    raw.update(shown=page.shown, offset=args.offset, truncated=page.hidden > 0)
    return ToolOutput(
        content="\n".join([page.text, *notes]), locations=page.locations[:LOCATIONS_MAX], raw_output=raw
    )


def _grep_page(args: Any, found: Found, paths: list[bytes], scope: Scope, ctx: ToolContext) -> Page:
    """The page of results; `paths`: rg paths in order."""
    budget, locate = ctx.output_max_bytes, scope.locator(ctx)
    if args.output == "content":
        files = [(p, found.bodies[p], found.counts[p]) for p in paths]
        return render_lines(
            files,
            args.offset,
            args.limit,
            budget,
            args.context,
            name=scope.shown,
            locate=locate,
            noun="matches",
            tool="grep",
        )
    text = (lambda p: f"{scope.shown(p)}:{found.counts[p]}") if args.output == "count" else scope.shown
    return page_of(
        paths, args.offset, args.limit, budget, text=text, locate=locate, noun="files", tool="grep"
    )


# --- unsaved editor buffers ----------------------------------------------------------------------------


async def _overlay(
    walk: Walk, mode: Mode, context: int, query: list[str], found: Found, cwd_fd: int | None
) -> None:
    """Search unsaved editor buffers as the buffer holds them, in place of their files on disk. A folder
    search covers a buffer only when it covers its file (ignore rules, hidden files, the glob)."""
    dirty = dirty_buffers(walk.scope, walk.ctx)
    if not dirty:
        return
    covered = None if walk.scope.is_file else await _covered(walk, cwd_fd)
    for real, text in sorted(dirty.items()):
        key = (
            STDIN if walk.scope.is_file else b"./" + os.fsencode(real.relative_to(walk.scope.real).as_posix())
        )
        if covered is not None and key not in covered:
            continue
        with tempfile.TemporaryFile() as f:
            f.write(text.encode("utf-8", "surrogatepass"))
            f.seek(0)
            run = await walk.rg_run([*query, "-"], None, f.fileno(), pattern=walk.scope.raw)
        found.put(key, Found.parse(mode, run.stdout, context))


async def _covered(walk: Walk, cwd_fd: int | None) -> set[bytes]:
    """The files (rg paths) a folder search covers."""
    run = await walk.rg_run(["--files", "."], cwd_fd)
    return {p for p in ripgrep.parse_paths(run.stdout) if walk.keeps(p)}


# --- glob ------------------------------------------------------------------------------------------------


class GlobInput(StrictInput):
    _nul = field_validator("pattern", "path")(_no_nul)

    pattern: str = Field(
        min_length=1, description='Glob to match file paths against, relative to path (e.g. "**/*.py").'
    )
    path: str = Field(
        ".", description="Folder to search in, relative to the workspace root. Default: the root."
    )
    limit: int | None = Field(None, ge=1, description="At most this many paths. Default: as many as fit.")
    offset: int = Field(0, ge=0, description="Skip this many paths (paging). Default: 0.")


class Glob(_SearchTool):
    """`glob`: files whose path matches a glob, newest first, paged like `grep`."""

    name = "glob"
    description = (
        "Find files by name with a glob pattern (e.g. **/*.py, src/**/test_*.ts), relative to path."
        " Read-only and fast: prefer it to run_command with find or ls. Paths come newest first (by"
        " modification time), relative to the workspace root. Files ignored by .gitignore or .ignore, hidden"
        " files (unless the pattern names them) and symbolic links are skipped. Long results are cut with"
        " the number of hidden paths stated; call again with offset to see the next ones."
    )
    terse_description = "Find files by glob (e.g. **/*.py); newest first, paged with offset."
    Input = GlobInput

    async def search(self, args: Any, ctx: ToolContext) -> ToolOutput:
        walk = Walk.of(args.path, args.pattern, ctx)
        if walk.scope.is_file:
            return _error(f"{args.path} is a file; glob searches a folder.", "")
        items = await _newest_first(walk)
        if not items:
            return ToolOutput(
                content=f'No files match "{args.pattern}" in path "{visible(args.path, one_line=True)}".',
                raw_output={"files": 0},
            )
        page = page_of(
            items,
            args.offset,
            args.limit,
            ctx.output_max_bytes,
            text=walk.scope.shown,
            locate=walk.scope.locator(ctx),
            noun="files",
            tool="glob",
        )
        return ToolOutput(
            content=page.text,
            locations=page.locations[:LOCATIONS_MAX],
            raw_output={
                "files": len(items),
                "shown": page.shown,
                "offset": args.offset,
                "truncated": page.hidden > 0,
            },
        )


async def _newest_first(walk: Walk) -> list[bytes]:
    """The rg paths of the files the walk selects, newest first, then by path."""
    with walk.opened() as (cwd_fd, _):
        run = await walk.rg_run(["--files", "."], cwd_fd)
        dated = []
        for p in ripgrep.parse_paths(run.stdout):
            if not walk.keeps(p):
                continue
            try:
                mtime = os.stat(ripgrep.strip_dot(p), dir_fd=cwd_fd, follow_symlinks=False).st_mtime_ns
            except OSError:
                continue
            dated.append((-mtime, p))
    dated.sort()
    return [p for _, p in dated]
