"""`@path` mentions in a terminal prompt (docs/terminal.md).

Owns `prompt_blocks(text, root, max_bytes)`: the prompt as content blocks, the typed text first, then one
text block per mentioned file, as an editor attaches an embedded resource (`path`, then the file in a
fence; PROTOCOL.md §6.4), and notes about mentions that could not be attached. A mention is `@` at the start
of a word followed by a path relative to the workspace (or absolute); it must name a regular UTF-8 text file
inside the workspace (real paths compared, so no link leads out), of at most `max_bytes`. A folder is
attached as a link the model can list. A mention that names no file is left as typed, with a note when it
looks like a path (a `/` or a suffix: a typo) rather than a handle. `mention_at(text)` finds the mention being typed, for completion.
Imports only agentd.text; never prompt_toolkit or rich.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MENTION = re.compile(r"(?:(?<=\s)|^)@(\S+)")
_PATHLIKE = re.compile(r"/|\.[A-Za-z0-9]{1,10}$")  # a folder separator or a file suffix: meant as a file


@dataclass
class Mentions:
    """The blocks of a prompt and what could not be attached (one line each)."""

    blocks: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    attached: list[str] = field(default_factory=list)


def mention_at(text_before_cursor: str) -> str | None:
    """The path typed after `@` in the last word before the cursor (`""` right after the `@`), else None."""
    m = re.search(r"(?:(?<=\s)|^)@(\S*)$", text_before_cursor)
    return m.group(1) if m else None


def _inside(path: Path, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _attach(raw: str, root: Path, max_bytes: int) -> tuple[dict[str, Any] | None, str | None]:
    """(block, problem) for one mention."""
    path = Path(raw).expanduser()
    path = path if path.is_absolute() else root / path
    if not path.exists():  # a typo is told; a handle (`@alice`) is left as typed without a word
        return None, (
            f"@{raw}: no such file in the workspace; not attached" if _PATHLIKE.search(raw) else None
        )
    if not _inside(path, root):
        return None, f"@{raw}: outside the workspace {root}; not attached"
    if path.is_dir():
        return {"type": "text", "text": f"[Linked folder: {raw}; list it with list_dir if needed]"}, None
    if not path.is_file():
        return None, f"@{raw}: not a regular file; not attached"
    size = path.stat().st_size
    if size > max_bytes:
        return None, f"@{raw}: {size} bytes, more than {max_bytes}; not attached (the agent can read it)"
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror
        return None, f"@{raw}: {why}; not attached"
    fence = "````" if "```" in text else "```"
    return {"type": "text", "text": f"{raw}\n{fence}\n{text}\n{fence}"}, None


def prompt_blocks(text: str, root: Path, max_bytes: int) -> Mentions:
    """The prompt's content blocks (see the module docstring). Each file is attached once."""
    out = Mentions(blocks=[{"type": "text", "text": text}])
    seen: set[str] = set()
    for m in MENTION.finditer(text):
        raw = m.group(1).rstrip(".,;:!?)'\"")
        if not raw or raw in seen:
            continue
        seen.add(raw)
        block, problem = _attach(raw, root, max_bytes)
        if block is not None:
            out.blocks.append(block)
            out.attached.append(raw)
        if problem is not None:
            out.problems.append(problem)
    return out
