"""The pinned workspace roots of one session (issue 9 H18).

Owns: `Workspace` (the roots of a session, each held open as a directory from the moment the session's
`ToolContext` gets them), `RootChanged` (the refusal when a root is no longer that directory) and
`as_workspace`. Imports only the standard library and `agentd.tools.refusal`; never pygls, lsprotocol, acp
or `agentd.adapters`.

Rules:
- Pinning: each root is resolved once (`os.path.realpath`, so a root given through a symbolic link works)
  and opened as a directory; its device and inode are kept. `agentd.tools.paths` opens every path from
  that handle, one component at a time without following links, never by the root's name again.
- Checking: before every file operation (and before `run_command`) `verify()` checks that each root's
  real path still names the pinned directory (same device and inode, following links). A root that was
  moved, deleted, or replaced by a symbolic link (an approved `cd .. && git checkout …` can do that) raises
  `RootChanged`, whose `.text()` tells the model; nothing is read or written. The handle alone already
  keeps reads and writes inside the pinned directory; the check makes the change visible instead of
  silently working in a directory that is no longer the workspace.
- A root that cannot be opened at pin time (missing, not a directory) is pinned as broken: every call
  that needs it is refused with the same text.
"""

from __future__ import annotations

import os
import stat
import weakref
from collections.abc import Sequence
from pathlib import Path

from agentd.tools.refusal import PathRefused

_PIN_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RootChanged(PathRefused):
    """A workspace root is no longer the directory the session pinned (H18)."""

    def text(self) -> str:
        return (
            f"Refused: the workspace root {self.root} is no longer the directory this session opened (it was"
            " moved, deleted or replaced, e.g. by a symbolic link); the call was not run. Open the workspace"
            " again in a new session."
        )


class _Pin:
    """One root held open. The descriptor is closed when the last Workspace using the pin is dropped."""

    def __init__(self, given: Path | str) -> None:
        self.shown = str(given)  # as configured: the `<root>` of the refusal texts
        self.given = os.path.abspath(given)
        self.real = os.path.realpath(self.given)
        self.fd: int | None = None
        self.ident: tuple[int, int] = (-1, -1)
        try:
            fd = os.open(self.real, _PIN_FLAGS)
        except OSError:
            return
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            os.close(fd)
            return
        self.fd, self.ident = fd, (st.st_dev, st.st_ino)
        weakref.finalize(self, os.close, fd)

    def intact(self) -> bool:
        """Does the real path still name the pinned directory (links followed)?"""
        if self.fd is None:
            return False
        try:
            st = os.stat(self.real)
        except (OSError, ValueError):
            return False
        return (st.st_dev, st.st_ino) == self.ident


class Workspace:
    """The pinned roots of one session, `roots[0]` first (see the module docstring).

    `previous`: a Workspace whose pins are kept for roots it already holds (roots set again when a
    session is attached to an editor keep the identity pinned when the session opened).
    """

    def __init__(self, roots: Sequence[Path | str], previous: Workspace | None = None) -> None:
        if not roots:
            raise ValueError("a workspace needs at least one root")
        known: dict[str, _Pin] = {p.given: p for p in previous._pins} if previous is not None else {}
        self._pins: list[_Pin] = [known.get(os.path.abspath(r)) or _Pin(r) for r in roots]

    @property
    def shown(self) -> str:
        """`roots[0]` as configured, for the refusal texts (CONTRACTS.md §11)."""
        return self._pins[0].shown

    @property
    def given(self) -> list[str]:
        """The absolute roots as configured (maybe through links), in order."""
        return [p.given for p in self._pins]

    @property
    def reals(self) -> list[str]:
        """The real roots as pinned, in order: never recomputed from the names."""
        return [p.real for p in self._pins]

    def verify(self) -> None:
        """Raise `RootChanged` (for `roots[0]`'s text) if any root is no longer its pinned directory."""
        for pin in self._pins:
            if not pin.intact():
                raise RootChanged(pin.shown, pin.shown, "root changed")

    def open_root(self, real: str) -> int:
        """A new directory descriptor (caller closes it) for the pinned root whose real path is `real`,
        opened from the pin, not by name. Raises `RootChanged` if `real` is not a pinned root."""
        for pin in self._pins:
            if pin.real == real and pin.fd is not None:
                return os.open(".", _DIR_FLAGS, dir_fd=pin.fd)
        raise RootChanged(real, self.shown, "root changed")


def as_workspace(roots: Workspace | Sequence[Path | str]) -> Workspace:
    """`roots` itself, or a Workspace pinned now (callers without a session, e.g. tests)."""
    return roots if isinstance(roots, Workspace) else Workspace(roots)
