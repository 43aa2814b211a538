"""The terminal modes of the terminal client (docs/terminal.md): stdlib `termios` only, so the command line
can set them before the client's libraries load.

Owns `modes(fd, iflag_off, lflag_off)` (flags off for a while, then back as they were; yields the attributes
found), `enter_stays_enter` (the whole client: no CR-to-NL translation, so an Enter typed ahead, while
agentd starts or a turn runs, reaches the input as an Enter that sends and not as a Ctrl-J new line, T8),
`keys_held` (during a turn: nothing echoed or line-edited either) and `as_found(fd, attrs)` (the modes
found at start again for a question read line by line: the workspace trust question). Nothing changes when
`fd` is not a terminal. Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import termios
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def modes(fd: int, iflag_off: int = 0, lflag_off: int = 0) -> Iterator[Any]:
    """The terminal `fd` with the `iflag_off` input flags and `lflag_off` local flags cleared; yields the
    attributes found (None when `fd` is not a terminal); restores them at the end."""
    try:
        old = termios.tcgetattr(fd)
    except (termios.error, OSError):
        yield None
        return
    new = termios.tcgetattr(fd)
    new[0] &= ~iflag_off
    new[3] &= ~lflag_off
    termios.tcsetattr(fd, termios.TCSANOW, new)
    try:
        yield old
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, old)


def enter_stays_enter(fd: int) -> contextlib.AbstractContextManager[Any]:
    return modes(fd, iflag_off=termios.ICRNL)


def keys_held(fd: int) -> contextlib.AbstractContextManager[Any]:
    return modes(fd, iflag_off=termios.ICRNL, lflag_off=termios.ECHO | termios.ICANON)


@contextlib.contextmanager
def as_found(fd: int, attrs: Any) -> Iterator[None]:
    """The attributes `attrs` (from `modes`) for a while, then the current ones again; nothing when None."""
    if attrs is None:
        yield
        return
    with modes(fd) as now:
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        try:
            yield
        finally:
            if now is not None:
                termios.tcsetattr(fd, termios.TCSANOW, now)
