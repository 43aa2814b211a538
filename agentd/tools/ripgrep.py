"""ripgrep, the engine of the `grep` and `glob` tools: finding the binary, running it, parsing its output.

Owns: `find_rg()` (the `rg` of the `ripgrep` wheel installed beside agentd, else `rg` on PATH),
`RipgrepMissing` (its model-facing text), `RgRun` / `run_rg()` (one rg process in a directory pinned by an
open file descriptor, with a timeout, killed on asyncio cancellation, its output bounded), the fixed
flags (`base_flags()`, `ignore_flags()`), and the parsers of rg's `--null` output (`parse_files`, `parse_counts`,
`parse_paths`: a path runs to its NUL, so no file name can forge a result). Imports only the standard library; never pygls, lsprotocol, acp or `agentd.adapters`.

rg is run with `--no-config` (a user's `RIPGREP_CONFIG_PATH` cannot change the output format), the ignore
files of `ignore_flags()` (break11: the ones git would apply, never a `~/.gitignore` above the workspace)
and never with
`--follow`: symbolic links are not followed, so no link leads out of the workspace. Its working directory
is `/proc/self/fd/<fd>` of a directory opened with `O_NOFOLLOW` steps by `agentd.tools.paths`, so a
directory swapped for a link after the containment check is never entered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_COLUMNS = 400  # longer lines are shown as a preview with rg's "[... omitted end of long line]"
OUTPUT_MAX_BYTES = 64 << 20  # rg output kept per call; past it rg is stopped and the result says so
STDERR_MAX_BYTES = 8192


class RipgrepMissing(Exception):
    """No usable `rg` binary: the model gets `text()` as an `is_error` result, never a crash."""

    def text(self) -> str:
        return (
            "The search tools need ripgrep (rg), which was not found"
            f"{': ' + str(self) if str(self) else ''}. Install it in agentd's environment"
            " (`pip install ripgrep`) or put `rg` on PATH; meanwhile use list_dir and read_file."
        )


def find_rg() -> str:
    """The path of `rg`: the `ripgrep` wheel's binary in this interpreter's scripts directory, else `rg`
    on PATH. Raises `RipgrepMissing`."""
    scripts = sysconfig.get_path("scripts")
    for candidate in (os.path.join(scripts, "rg") if scripts else "", shutil.which("rg") or ""):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise RipgrepMissing()


def base_flags(*, hidden: bool) -> list[str]:
    """The flags every search uses (module docstring); `hidden`: also search hidden files (`.git` never;
    the caller's glob filter then decides which hidden files are kept, `agentd.tools.globs`)."""
    flags = ["--no-config", "--color=never", "--null"]
    if hidden:
        flags += ["--hidden", "--glob=!.git"]
    return flags


def ignore_flags(workspace: Path, folder: Path) -> list[str]:
    """Which ignore files a search of `folder` (the workspace root `workspace` or a folder in it) applies
    (break11: a `~/.gitignore` holding `*`, as dotfiles setups have, hid every file):
    - in a git repository (a `.git` at the workspace root or above): rg's own rule, which is git's, the
      `.gitignore` files from the repository's root down (and `.git/info/exclude`), none above it;
    - else `.gitignore` and `.ignore` apply all the same (`--no-require-git`), from the workspace root down
      (`--no-ignore-parent` for a search of the root; a search of a folder below it still reads the folders
      above it, and so those above the workspace too: rg has no bound between).
    `.ignore` files above the workspace apply in a repository (rg reads them in every parent)."""
    if any((d / ".git").exists() for d in (workspace, *workspace.parents)):
        return []
    return ["--no-require-git", *(["--no-ignore-parent"] if folder == workspace else [])]


@dataclass
class RgRun:
    """The outcome of one rg process. `rc`: 0 found, 1 nothing found, 2 an error (possibly with results);
    `cut`: the output passed `OUTPUT_MAX_BYTES` and rg was stopped; `timed_out`: it ran out of time."""

    stdout: bytes
    stderr: str
    rc: int
    cut: bool = False
    timed_out: bool = False

    def error(self) -> str | None:
        """rg's own error when it rejected the query (a bad regex or glob), else None."""
        if self.rc == 2 and not self.stdout and self.stderr.strip():
            return self.stderr.strip()
        return None


async def run_rg(
    rg: str, args: Sequence[str], *, cwd_fd: int | None, stdin_fd: int | None = None, timeout_s: float
) -> RgRun:
    """Run `rg args...` in the directory open as `cwd_fd` (None: the process's own), stdin from the open
    file `stdin_fd` (None: /dev/null), for at most `timeout_s` seconds. Returns an `RgRun`; raises
    `RipgrepMissing` when rg cannot start. On asyncio cancellation rg is killed before `CancelledError`
    propagates.

    rg's output is read by a worker thread with blocking reads: rg writes each file's results on its own,
    and reading thousands of small writes through the event loop costs far more than the search."""
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                [rg, *args],
                stdin=stdin_fd if stdin_fd is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=f"/proc/self/fd/{cwd_fd}" if cwd_fd is not None else None,
                pass_fds=tuple(fd for fd in (cwd_fd,) if fd is not None),
                env=rg_env(),
            )
        except OSError as exc:
            raise RipgrepMissing(f"{rg}: {exc.strerror or exc}") from None
        try:
            data, cut, rc = await asyncio.wait_for(asyncio.to_thread(_drain, proc), timeout_s)
        except TimeoutError:
            _kill(proc)
            return RgRun(b"", "", 2, timed_out=True)
        except BaseException:
            _kill(proc)
            raise
        err.seek(0)
        return RgRun(data, err.read(STDERR_MAX_BYTES).decode("utf-8", "replace"), rc, cut=cut)


def rg_env() -> dict[str, str]:
    """rg's environment: ours without RIPGREP_CONFIG_PATH (also disabled by `--no-config`)."""
    return {k: v for k, v in os.environ.items() if k != "RIPGREP_CONFIG_PATH"}


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bool, int]:
    """(stdout, cut at `OUTPUT_MAX_BYTES`, exit code): read to the end (or the cap, then kill), then reap."""
    assert proc.stdout is not None
    chunks: list[bytes] = []
    size, cut = 0, False
    fd = proc.stdout.fileno()
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > OUTPUT_MAX_BYTES:
                cut = True
                _kill(proc)
                break
    finally:
        proc.stdout.close()
        rc = proc.wait()
    data = b"".join(chunks)
    if cut:  # whole lines only
        data = data[: data.rfind(b"\n") + 1]
    return data, cut, rc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL rg (no child processes; the worker thread then reads EOF and reaps it)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


# --- parsing rg's --null output ---------------------------------------------------------------------

_LINE = re.compile(rb"(\d+)([:-])(.*)")
_MATCH_LINE = re.compile(rb"^\d+:", re.M)


def parse_files(data: bytes) -> dict[bytes, bytes]:
    """The output of `rg --null --line-number --heading` by path: each file's block of lines
    (`N:text` matches, `N-text` context lines) as one `bytes` body, split only when shown (`lines_of`).

    Read in order, never split on blank lines, so a file name holding newlines (`a\\n\\nb`, `x\\n3:y`)
    cannot forge a file or a line (break11): a block is its path up to a NUL (a path never holds one),
    then its lines up to the first empty line (no output line is empty: each starts with its number). A
    block cut at the end of `data` (rg stopped at the output cap) keeps its whole lines."""
    out: dict[bytes, bytes] = {}
    pos, end = 0, len(data)
    while pos < end:
        nul = data.find(b"\0", pos)
        if nul < 0:
            break
        stop = data.find(b"\n\n", nul + 1)
        stop = stop if stop >= 0 else end
        out[data[pos:nul]] = data[nul + 1 : stop].rstrip(b"\n")
        pos = stop + 2
    return out


def match_count(body: bytes, context: bool) -> int:
    """Matching lines in one file's block (without context lines, every line matches)."""
    return len(_MATCH_LINE.findall(body)) if context else body.count(b"\n") + 1


def lines_of(body: bytes) -> list[tuple[int, bool, str]]:
    """(1-based line number, is a match, text without its line ending) of each line of a block."""
    out = []
    for raw in body.split(b"\n"):
        m = _LINE.fullmatch(raw)
        if m:
            out.append((int(m[1]), m[2] == b":", m[3].decode("utf-8", "replace").rstrip("\r")))
    return out


def parse_counts(data: bytes) -> dict[bytes, int]:
    """Matching lines by path, from `rg --count --null` output (`path\\0N\\n` entries), read in order: a
    path runs to its NUL (it may hold newlines, break11), the count to the next newline."""
    out: dict[bytes, int] = {}
    pos, end = 0, len(data)
    while pos < end:
        nul = data.find(b"\0", pos)
        if nul < 0:
            break
        nl = data.find(b"\n", nul + 1)
        nl = nl if nl >= 0 else end
        count = data[nul + 1 : nl]
        if count.isdigit():
            out[data[pos:nul]] = int(count)
        pos = nl + 1
    return out


def parse_paths(data: bytes) -> list[bytes]:
    """Paths of `rg --files --null` or `rg --files-with-matches --null` output (NUL-terminated)."""
    return [p for p in data.split(b"\0") if p]


def strip_dot(path: bytes) -> bytes:
    """`./src/a.py` -> `src/a.py` (rg prefixes paths found under the search path `.`)."""
    return path[2:] if path.startswith(b"./") else path


def binary_note(data: bytes) -> bool:
    """True when a search of one named file (stdin) found matches in a binary file (rg's message)."""
    return data.startswith(b"<stdin>: binary file matches")
