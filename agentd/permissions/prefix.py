"""The prefix the editors' and the terminal's "always" offers for a command (PROTOCOL.md §6.10; CONTRACTS.md
§5; issue 12 §2, break12).

Owns: `command_prefix()`. The prefix is the first command the line runs, seen through transparent wrappers
(agentd.permissions.wrappers), as its first word and subcommand, with a known tool's global options; it is
offered only when a grant of it would allow the whole line (checked with agentd.permissions.rules, the
one owner of matching). Imports the standard library and agentd.permissions; never pygls, lsprotocol, acp
or agentd.adapters.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from agentd.permissions.argv import command_name, without_global_options
from agentd.permissions.rules import Rule, subject_of, verdicts
from agentd.permissions.shellwords import split_command
from agentd.permissions.wrappers import is_interpreter, is_wrapper


def command_prefix(command: str) -> str | None:
    """The prefix "always" offers for a command (PROTOCOL.md §6.10): the first words of the first command
    the line runs, seen through transparent wrappers, when a grant of it would allow the whole line.
    `npm test -- --watch` -> `npm test`; `git log -5` -> `git log`; `git -C sub status` -> `git -C sub
    status`; `python3 -m pytest x` -> `python3 -m pytest`; `uv run pytest` -> `uv run pytest`; `timeout 60
    npm test` and `bash -c 'npm test'` -> `npm test`; `ls -la` -> `ls`. None for a compound command, an
    expansion in the first words (or anywhere in what a wrapper runs), leading variable assignments, a
    command that starts others (`sudo`, `env X=1`, `xargs`, `find`, `parallel`, `eval`;
    agentd.permissions.wrappers) or runs inline code (`python -c`)."""
    parsed = split_command(command)
    parts = [p for p in parsed.parts if not p.transparent]
    if not parsed.complete or not parts or parts[0].kind != "command":
        return None
    words = parts[0].words
    through = len(parts) < len(parsed.parts)  # seen through a wrapper: only a wholly literal command
    if not words or words[0] is None or "=" in words[0] or (through and None in words):
        return None
    prefix = _prefix_of(words)
    if prefix is None:
        return None
    grant = Rule(tool=f"run_command({prefix})", action="allow")
    allowed = verdicts(subject_of("run_command", command=command, path=None, roots=()), [grant])
    return prefix if all(v.action == "allow" for v in allowed) else None


def _prefix_of(words: tuple[str | None, ...]) -> str | None:
    name = command_name(words[0] or "")
    if is_interpreter(name):
        return _interpreter_prefix(words)
    if is_wrapper(name):
        return None
    out = [words[0], *_global_options(name, words)]
    for w in words[len(out) : len(out) + 2]:
        if w is None or not _SUBCOMMAND.match(w):
            break
        out.append(w)
        if w not in _RUNNERS:
            break
    return _join(out)


def _interpreter_prefix(words: tuple[str | None, ...]) -> str | None:
    """`python3 -m pytest x` -> `python3 -m pytest`; `python3 script.py` -> `python3 script.py`."""
    first, rest = words[0], list(words[1:])
    if rest and rest[0] == "-m" and len(rest) > 1 and rest[1]:
        return _join([first, "-m", rest[1]])
    if rest and rest[0] is not None and not rest[0].startswith("-"):
        return _join([first, rest[0]])
    return None


def _global_options(name: str, words: tuple[str | None, ...]) -> list[str | None]:
    """The global options (with their values) before a known tool's subcommand: `git -C sub status`
    (agentd.permissions.argv.GLOBAL_OPTIONS); [] when one is known only at run time."""
    options = without_global_options(words)[1]
    return [] if None in options else list(options)


_SUBCOMMAND = re.compile(r"^[A-Za-z][\w:.-]*$")
_RUNNERS = frozenset({"run", "exec", "x", "dlx", "tool"})  # `npm run test`, `uv run pytest`: keep one more


def _join(words: Sequence[str | None]) -> str:
    return " ".join(shlex.quote(w) for w in words if w is not None)
