"""What one search covers and how ripgrep is run on it (issue 11): the scope, the pinned folder, the glob
filter and the unsaved editor buffers inside the scope.

Owns: `Scope` (the model-given path, checked by `agentd.tools.paths`), `Walk` (the rg binary, flags and glob
filter of one search; `rg_run()`, `opened()`), `QueryError` (ripgrep or the glob rejected the query) and
`dirty_buffers()` (open editor buffers whose text differs from the file on disk), `in_git_dir()` (`.git`
is never searched, at any depth, whatever the path or glob) and `special_kind()` (a FIFO, device or socket
cannot be searched) and `visible_files()` (which files of given names a search sees: the rule nested
AGENTS.md files follow). Imports the standard library, `agentd.text` and `agentd.tools`; never pygls, lsprotocol, acp or `agentd.adapters`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentd.text import scrub_surrogates, visible
from agentd.tools import ripgrep
from agentd.tools.base import ToolContext
from agentd.tools.globs import GlobFilter, InvalidGlob
from agentd.tools.paths import display_path, open_dir, open_for_read, real_roots, resolve_in_workspace

BUFFER_COMPARE_MAX_BYTES = 16 << 20


class QueryError(Exception):
    """ripgrep or the glob filter rejected the query; `str()` is the model-facing text."""


@dataclass
class Scope:
    """What a search covers: the model-given `raw` path, its `real` path, `rel` (workspace-relative for
    display, `.` for the root) and whether it is one file."""

    raw: str
    real: Path
    rel: str
    is_file: bool

    @classmethod
    def of(cls, raw: str, ctx: ToolContext) -> Scope:
        """Raises `PathRefused` (CONTRACTS.md §11), `QueryError` for a path in `.git` or one that is
        neither a regular file nor a folder (a FIFO, a device, a socket)."""
        real = resolve_in_workspace(raw, ctx.workspace, for_write=False)
        rel = display_path(real, ctx.workspace)
        if in_git_dir(raw) or in_git_dir(rel):
            raise QueryError(
                f"{visible(raw, one_line=True)} is inside .git (git's own data), which grep and glob never"
                " search; use run_command with git (git log, git show, git grep) to look at the history."
            )
        kind = special_kind(real)
        if kind is not None:
            raise QueryError(
                f"{visible(raw, one_line=True)} is a {kind}, not a file or a folder: it cannot be searched."
                " grep and glob search regular files and folders."
            )
        return cls(raw, real, rel, real.is_file())

    def relpath(self, rg_path: bytes) -> str:
        """A path rg printed (relative to the scope folder) as a workspace-relative path, as it is."""
        if self.is_file:
            return self.rel
        rel = os.fsdecode(ripgrep.strip_dot(rg_path))
        return rel if self.rel == "." else f"{self.rel}/{rel}"

    def shown(self, rg_path: bytes) -> str:
        """The workspace-relative path as the model sees it: control characters, newlines and other
        invisible characters escaped (`agentd.text.visible`), so a file name cannot forge a result line
        (break11); bytes that are not UTF-8 shown as U+FFFD, as `list_dir` shows them (H19)."""
        return visible(scrub_surrogates(self.relpath(rg_path)), one_line=True)

    def locator(self, ctx: ToolContext) -> Callable[[bytes], str]:
        """rg path -> absolute path, for `locations` (PROTOCOL.md §7.3: absolute there; not escaped)."""
        base = real_roots(ctx.workspace)[0]
        return lambda rg_path: os.path.join(base, self.relpath(rg_path))


def in_git_dir(path: str | bytes) -> bool:
    """True when `path` (`/`-separated, relative) has a `.git` component: git's own data, never searched
    (PROTOCOL.md §7.3), whatever `path` or the glob say."""
    sep, git = (b"/", b".git") if isinstance(path, bytes) else ("/", ".git")
    return git in path.split(sep)  # type: ignore[arg-type, operator]


def special_kind(real: Path) -> str | None:
    """`named pipe (FIFO)`, `character device`, `block device` or `socket` for such a path, else None
    (a regular file, a folder, or nothing there)."""
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return None
    for test, kind in (
        (stat.S_ISFIFO, "named pipe (FIFO)"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return None


@dataclass
class Walk:
    """One search: the rg binary, the scope, the filter flags and the glob filter (None: every file)."""

    rg: str
    scope: Scope
    flags: list[str]
    glob: GlobFilter | None
    ctx: ToolContext

    @classmethod
    def of(cls, raw_path: str, glob: str | None, ctx: ToolContext) -> Walk:
        """Raises `RipgrepMissing`, `PathRefused`, `QueryError` (a bad glob)."""
        rg = ripgrep.find_rg()
        scope = Scope.of(raw_path, ctx)
        if glob and in_git_dir(glob.lstrip("!")):
            raise QueryError(
                f"The glob {visible(glob, one_line=True)!r} names .git (git's own data), which grep and glob"
                " never search; use run_command with git to look at the history."
            )
        try:
            gf = GlobFilter(glob) if glob and not scope.is_file else None
        except InvalidGlob as exc:
            raise QueryError(f"Invalid glob {glob!r}: {exc}") from None
        flags = ripgrep.base_flags(hidden=gf is not None and gf.hidden) + (gf.rg_flags() if gf else [])
        roots = [Path(r) for r in real_roots(ctx.workspace)]
        root = next((r for r in roots if r == scope.real or r in scope.real.parents), roots[0])
        flags += ripgrep.ignore_flags(root, scope.real)
        return cls(rg, scope, flags, gf, ctx)

    def keeps(self, rg_path: bytes) -> bool:
        """Whether a path rg found is a result: never one inside `.git` (at any depth), and only what the
        glob selects."""
        rel = ripgrep.strip_dot(rg_path)
        if in_git_dir(rel):
            return False
        return self.glob is None or self.glob.matches(os.fsdecode(rel))

    async def rg_run(
        self, args: list[str], cwd_fd: int | None, stdin_fd: int | None = None, *, pattern: str = ""
    ) -> ripgrep.RgRun:
        """Run rg with the walk's flags and `args`. Raises `QueryError` when rg rejects the regex
        `pattern` or the glob."""
        run = await ripgrep.run_rg(
            self.rg, [*self.flags, *args], cwd_fd=cwd_fd, stdin_fd=stdin_fd, timeout_s=self.ctx.run_timeout_s
        )
        err = run.error()
        if err is not None:
            is_glob = "glob" in err.splitlines()[0]
            given = (self.glob.glob if self.glob else "") if is_glob else pattern
            raise QueryError(
                f"Invalid {'glob' if is_glob else 'regex'} {given!r}: {err.removeprefix('rg: ')}"
            )
        return run

    @contextlib.contextmanager
    def opened(self) -> Iterator[tuple[int | None, int | None]]:
        """(cwd fd, stdin fd) for rg: a folder is opened and pinned (`paths.open_dir`); a file is opened
        with `paths.open_for_read` and searched on stdin, so neither can be swapped for a link after the
        containment check. Raises OSError (missing, not a folder) and `PathRefused`."""
        if self.scope.is_file:
            with open_for_read(self.scope.raw, self.ctx.workspace) as f:
                yield None, f.fileno()
            return
        fd = open_dir(self.scope.raw, self.ctx.workspace)
        try:
            yield fd, None
        finally:
            os.close(fd)


def dirty_buffers(scope: Scope, ctx: ToolContext) -> dict[Path, str]:
    """Open editor buffers inside `scope` whose text differs from the file on disk, by real path. A buffer
    of a file that is not on disk (never saved) is not searched."""
    docs = ctx.documents
    if docs is None:
        return {}
    out: dict[Path, str] = {}
    for real in docs.open_paths():
        inside = real == scope.real if scope.is_file else real.is_relative_to(scope.real)
        text = docs.read_text(real) if inside else None
        if text is not None and differs(real, text, ctx):
            out[real] = text
    return out


def differs(real: Path, text: str, ctx: ToolContext) -> bool:
    try:
        with open_for_read(str(real), ctx.workspace) as f:
            disk = f.read(BUFFER_COMPARE_MAX_BYTES + 1)
    except Exception:  # not on disk, refused, not a regular file: nothing of it to search
        return False
    return disk != text.encode("utf-8", "surrogatepass")


VISIBLE_TYPE = "agentdnames"


def visible_files(root: Path, names: Sequence[str], timeout_s: float = 30.0) -> set[str] | None:
    """The files named one of `names` (e.g. `AGENTS.md`) under the folder `root` that a search of `root`
    sees: ripgrep's own walk with the search tools' flags, so `.gitignore`, `.ignore`, hidden files and
    folders and `.git` leave them out exactly as they leave them out of `grep` and `glob` (the one rule;
    the project instructions use it for nested AGENTS.md files, break11). Paths are relative to `root`,
    `/`-separated. Synchronous (one rg run, at most `timeout_s`); None when rg is missing or fails."""
    try:
        rg = ripgrep.find_rg()
    except ripgrep.RipgrepMissing:
        return None
    types = [f"--type-add={VISIBLE_TYPE}:{n}" for n in names]
    flags = [*ripgrep.base_flags(hidden=False), *ripgrep.ignore_flags(root, root)]
    argv = [rg, *flags, "--files", *types, f"--type={VISIBLE_TYPE}", "."]
    try:
        done = subprocess.run(argv, cwd=root, capture_output=True, timeout=timeout_s, env=ripgrep.rg_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 1):
        return None
    paths = (os.fsdecode(ripgrep.strip_dot(p)) for p in ripgrep.parse_paths(done.stdout))
    return {p for p in paths if not in_git_dir(p)}
