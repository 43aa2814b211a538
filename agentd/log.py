"""Logging and the terminal's two streams: stderr or a log file, never stdout (CONTRACTS.md §10).

Owns: `reserve_standard_streams()` (fds 0-2 closed at start: H7 class, break9), `setup_logging(verbose, log_file)`, `open_log_file` (no link followed, 0600, parent folders 0700),
`Console` (stdout for the assistant's text, stderr one whole line at a time; they never interleave mid-line
when both reach one file) and `LineWriter`, the sink of the operator lines (`[turn · …]`,
`[Permission] …`, `[Hook] …`, `[Tool] …`, `[compressed history · …]`).
Both streams go through `agentd.text.terminal_safe` (no control character from a model reply, a file or a
command reaches the terminal as itself). Imports agentd.errors, agentd.text and agentd.persistence.paths
(`ensure_dir`) only.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from agentd.errors import ConfigError
from agentd.text import terminal_safe

LineWriter = Callable[[str], None]


class Console:
    """stdout and stderr of a command-line run. `out()` writes the assistant's text (a line may stay open);
    `line()` writes one operator line to stderr. When both streams reach one file (`> out 2>&1`, a pipe, the
    terminal), an open stdout line is ended first, so `I'll plan this first.[turn …]` cannot happen (H15).

    The streams are looked up at each call (`sys.stdout`, `sys.stderr`), so tests may swap them. Raises
    BrokenPipeError (and other OSErrors) from the writes; the caller decides what a closed pipe means."""

    def __init__(self) -> None:
        self.open_line = False
        self._lock = threading.RLock()

    def out(self, text: str) -> None:
        """Write `text` to stdout (`terminal_safe`) and flush."""
        if not text:
            return
        text = terminal_safe(text)
        with self._lock:
            sys.stdout.write(text)
            sys.stdout.flush()
            self.open_line = not text.endswith("\n")

    def line(self, text: str) -> None:
        """Write `text` and a newline to stderr and flush; first end an open stdout line that shares its file."""
        with self._lock:
            if self.open_line and _same_file(sys.stdout, sys.stderr):
                self.end()
            sys.stderr.write(terminal_safe(text) + "\n")
            sys.stderr.flush()

    def end(self) -> None:
        """End the assistant's open stdout line, if any."""
        with self._lock:
            if self.open_line:
                self.open_line = False
                sys.stdout.write("\n")
                sys.stdout.flush()


class _ClosedStdout(io.TextIOBase):
    """sys.stdout when fd 1 was closed at start (`agentd sessions list >&-`): every write fails as a write to
    a pipe whose reader went away does, so the command stops as in a closed pipe (H7), not with an internal
    error."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "stdout is closed")

    def isatty(self) -> bool:
        return False


def reserve_standard_streams() -> None:
    """Call first thing: a standard descriptor (0, 1, 2) closed when agentd started (`>&-`, `2>&-`) gets
    /dev/null, so no file agentd opens later takes its number (a session log as fd 1 would receive what a
    child process prints). Then a closed stdout fails every write (`_ClosedStdout`: the run stops as in a
    closed pipe, exit 141); a closed stdin reads nothing and a closed stderr discards the operator lines."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if fd == 1:
            sys.stdout = _ClosedStdout()
        elif fd == 2:
            sys.stderr = open(2, "w", closefd=False)  # the process's stderr: never closed
        else:
            sys.stdin = open(0, closefd=False)


def _same_file(a: IO[str], b: IO[str]) -> bool:
    """True when both streams reach one file: the same inode (a file, a pipe) or both a terminal."""
    try:
        fa, fb = a.fileno(), b.fileno()
        return os.path.samestat(os.fstat(fa), os.fstat(fb)) or (os.isatty(fa) and os.isatty(fb))
    except (OSError, ValueError, AttributeError):  # a stream without a descriptor (a test's StringIO)
        return False


console = Console()


def stderr_line(line: str) -> None:
    """Write one operator line to stderr and flush (through `console`: never mid-line of stdout)."""
    console.line(line)


class _ConsoleHandler(logging.Handler):
    """Log records to stderr through `console`, so a warning never lands in the middle of assistant text."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            console.line(self.format(record))
        except Exception:
            self.handleError(record)


def open_log_file(path: str) -> IO[str]:
    """Open `path` for appending (UTF-8, line-buffered) without following a symbolic link in its place (H21).

    A new file is created 0600 whatever the umask; an existing regular file is set to 0600; missing parent
    folders are created 0700 (`ensure_dir`); a FIFO without a reader is refused, never waited on (break9). Raises ConfigError (exit 2) naming the file and what to do."""
    from agentd.persistence.paths import FILE_MODE, ensure_dir

    target = Path(path).expanduser()
    fix = "choose another --log-file"
    try:
        ensure_dir(target.parent)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(target, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
            created = True
        except FileExistsError:  # O_NONBLOCK: a FIFO planted there without a reader must not hang agentd
            fd = os.open(target, flags | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            created = False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(
                f"--log-file {path}: is a symbolic link; agentd does not follow it. Remove the link or {fix}"
            ) from None
        if exc.errno == errno.ENXIO:
            raise ConfigError(
                f"--log-file {path}: is a FIFO that nothing reads; start its reader or {fix}"
            ) from None
        raise ConfigError(f"--log-file {path}: cannot open it ({exc.strerror or exc}); {fix}") from None
    try:
        if created or stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, FILE_MODE)
    except OSError:
        pass  # not ours to change (a device such as /dev/null): keep writing
    return open(fd, "a", encoding="utf-8", buffering=1)


def setup_logging(verbose: int = 0, log_file: str | None = None) -> None:
    """Route the `agentd` logger to `log_file` or stderr. `-v` = INFO, `-vv` = DEBUG; a log file gets INFO,
    or DEBUG with `-v`. Raises ConfigError when the log file cannot be opened safely (see `open_log_file`)."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler: logging.Handler
    if log_file:
        handler = logging.StreamHandler(open_log_file(log_file))
        level = logging.DEBUG if verbose else logging.INFO
    else:
        handler = _ConsoleHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("agentd")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def hide_records_shown_as_updates() -> None:
    """Terminal stderr only: drop the records a client shows as lines of their own (`shown_as_update`, e.g. a
    provider retry shown as `[Retry] …` by `agentd run`), so one event is one line. A log file keeps them."""
    for handler in logging.getLogger("agentd").handlers:
        if isinstance(handler, _ConsoleHandler):
            handler.addFilter(lambda record: not getattr(record, "shown_as_update", False))


def failure_reason(content: str, raw_output: dict[str, object] | None = None, limit: int = 400) -> str:
    """Why a tool call failed, in one line, for `[Tool] <title> -> failed: <reason>` (H9).

    A command's result ends with its status line (`[exit code 2]`, `[timed out after 120 s; …]`), which is
    the reason; any other tool's reason is the first line of its result text (`Refused: … is outside the
    workspace …`, `… not found …`). Brackets stripped, cut to `limit` characters; the caller escapes
    control characters."""
    lines = [row.strip() for row in content.splitlines() if row.strip()]
    if not lines:
        return "no details"
    command = raw_output is not None and "exitCode" in raw_output
    reason = lines[-1].strip("[]") if command else lines[0]
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"
