"""The refusal of a path outside the workspace (CONTRACTS.md §11 "Path refused").

Owns: `PathRefused` and its model-facing text. A leaf of agentd.tools (standard library only), so
`agentd.tools.base` (which re-exports it) and `agentd.tools.workspace` (whose `RootChanged` is one) both
import it without importing each other back. Never imports pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

from pathlib import Path


class PathRefused(Exception):
    """A path escapes the workspace or goes through a symbolic link (CONTRACTS.md §11 "Path refused")."""

    def __init__(self, path: str, root: Path | str, why: str = "") -> None:
        super().__init__(path)
        self.path = path
        self.root = str(root)
        self.why = why

    def text(self) -> str:
        """The exact model-facing text of CONTRACTS.md §11."""
        return (
            f"Refused: {self.path} is outside the workspace ({self.root}) or reached through a symbolic link;"
            " the call was not run."
        )
