"""One command's words as the program reads them: the vocabulary of what a command starts (issue 12 §2,
break12; CONTRACTS.md §5).

Owns: `Words`, `Run`, `Unwrapped`, `NOTHING`, `unknowable()`, `command_name()` (the name a command word
runs under: the basename of `/bin/rm`, `./rm`), `STDIN_FILE` (a path that is the input), and the readers
the wrapper tables are built from, `GLOBAL_OPTIONS` / `without_global_options()` (a tool's options before
its subcommand: `git -C . push` runs `push`; one owner for matching and for the prefix "always" offers),
`Opts` / `options()` (getopt-style options up to the first operand),
`after()` (the command after them), `simple()` (a wrapper that is only that) and `joined()` (words run
as one shell string). `None` is a word whose value is only known when the command runs. Pure; imports
only the standard library.

A `Run` is one of: `words` (the command it starts: `sudo -u x rm f` -> `rm f`; `offset` is where those
words begin in the outer command's words, None when they are not a slice of it), `script` (a shell string
to parse: `sh -c STRING`, `eval`, `su -c`, `trap`, `watch`, `parallel`), or neither: a command that cannot
be known before it runs (`why`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Words = tuple[str | None, ...]
STDIN_FILE = re.compile(r"^(-|/dev/stdin|/dev/fd/\d+|/proc/(self|\d+)/fd/\d+)$")


# a known tool's global options that take a value as the next word (any other `-x` word before the
# subcommand is a flag, `--opt=VALUE` one word): `git -C sub --no-pager -c k=v push` runs `push`
GLOBAL_OPTIONS: dict[str, frozenset[str]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}),
    "make": frozenset({"-C", "-f", "--directory", "--file", "-j", "-I", "-o", "-W"}),
    "gmake": frozenset({"-C", "-f", "--directory", "--file", "-j", "-I", "-o", "-W"}),
    "cargo": frozenset({"-C", "--manifest-path", "--config", "-Z", "--color"}),
    "npm": frozenset({"--prefix", "-w", "--workspace"}),
    "pnpm": frozenset({"-C", "--dir", "--filter", "-F"}),
    "yarn": frozenset({"--cwd"}),
    "docker": frozenset({"--context", "-c", "-H", "--host", "--config", "-l", "--log-level"}),
    "podman": frozenset({"--context", "-c", "-H", "--host", "--config", "--log-level", "--root", "--runroot"}),
    "kubectl": frozenset({"-n", "--namespace", "--context", "--kubeconfig", "-s", "--server", "--cluster",
                          "--user", "--as"}),
    "uv": frozenset({"--directory", "--project", "--cache-dir", "--config-file", "--color"}),
    "go": frozenset({"-C"}),
}  # fmt: skip


def without_global_options(words: Words) -> tuple[Words, Words]:
    """`(git -C sub push origin, ...)` -> (`git push origin`, `-C sub`): a known tool's words with its
    global options (GLOBAL_OPTIONS) left out, and those options. An option word known only at run time
    makes the subcommand unknown: `git $OPT push` -> (`git`, None). Other commands: unchanged, ()."""
    takes = GLOBAL_OPTIONS.get(command_name(words[0] or "")) if words else None
    i = 1
    while takes is not None and i < len(words):
        w = words[i]
        if w is None:
            return (words[0], None), words[1:]
        if not w.startswith("-") or w == "-" or w == "--":
            break
        i += 2 if w in takes else 1
    if takes is None or i == 1:
        return words, ()
    return (words[0], *words[i:]), words[1 : min(i, len(words))]


@dataclass(frozen=True)
class Run:
    """One command that a command starts (see the module docstring)."""

    words: Words | None = None
    offset: int | None = None
    script: str | None = None
    why: str = ""


@dataclass(frozen=True)
class Unwrapped:
    """`runs`: what the command starts; `transparent`: the wrapper adds nothing an allow rule must cover
    beyond what it runs (`timeout 5 npm test` is covered by `run_command(npm test)`; `sudo`, `env X=1`,
    `find` are not); `writes`: files its options write (`time -o F`, `find -fprint F`)."""

    runs: tuple[Run, ...] = ()
    transparent: bool = False
    writes: tuple[str | None, ...] = ()


NOTHING = Unwrapped()


def command_name(word: str) -> str:
    """The name a command word runs under: `/usr/bin/rm` and `./rm` -> `rm`; `rm` -> `rm`."""
    return os.path.basename(word.rstrip("/")) or word


def unknowable(why: str) -> Unwrapped:
    return Unwrapped((Run(why=why),), transparent=True)


@dataclass(frozen=True)
class Opts:
    """getopt-style options of one program: `short` letters and `long` names that take a value (a long
    name also takes `--name=value`), `optional` letters whose value can only be attached (`xargs -i{}`)."""

    short: str = ""
    long: frozenset[str] = frozenset()
    optional: str = ""


def options(argv: Words, i: int, spec: Opts) -> tuple[int | None, list[tuple[str, str | None]]]:
    """Read options from `argv[i]` up to the first operand (or after `--`). Returns the operand's index,
    None when an option word is unknowable (it could be the command), and the options as (name, value)."""
    seen: list[tuple[str, str | None]] = []
    while i < len(argv):
        w = argv[i]
        if w is None:
            return None, seen
        if w == "--":
            return i + 1, seen
        if not w.startswith("-") or w == "-":
            return i, seen
        if w.startswith("--"):
            name, eq, value = w.partition("=")
            takes = not eq and name in spec.long
            seen.append((name, value if eq else (argv[i + 1] if takes and i + 1 < len(argv) else None)))
            i += 2 if takes else 1
            continue
        i += 1
        for j, ch in enumerate(w[1:], start=1):
            if ch in spec.short or ch in spec.optional:
                value = w[j + 1 :]
                if not value and ch in spec.short:
                    value = argv[i] if i < len(argv) else None  # type: ignore[assignment]
                    i += 1
                seen.append((f"-{ch}", value))
                break
            seen.append((f"-{ch}", None))
    return i, seen


def after(argv: Words, i: int | None, *, transparent: bool = True, positional: int = 0) -> Unwrapped:
    """The command from `argv[i + positional]` on (`timeout 5 CMD`: one positional word first)."""
    if i is None:
        return unknowable(f"`{argv[0]}` is given a word agentd cannot know before it runs")
    i += positional
    if i >= len(argv):
        return NOTHING
    return Unwrapped((Run(words=argv[i:], offset=i),), transparent=transparent)


def simple(short: str = "", long: Sequence[str] = (), *, positional: int = 0, transparent: bool = True,
            writes: Sequence[str] = (), no_run: Sequence[str] = ()) -> Callable[[Words], Unwrapped]:  # fmt: skip
    """A wrapper whose command follows its options (and `positional` operands such as a duration)."""
    spec = Opts(short, frozenset(long))

    def handle(argv: Words) -> Unwrapped:
        i, seen = options(argv, 1, spec)
        if any(name in no_run for name, _ in seen):
            return NOTHING
        out = after(argv, i, transparent=transparent, positional=positional)
        files = tuple(value for name, value in seen if name in writes)
        return Unwrapped(out.runs, out.transparent, files) if files else out

    return handle


def joined(argv: Words, i: int | None, what: str) -> Unwrapped:
    """A wrapper that runs its words joined as one shell string (`watch CMD`, `parallel CMD`, `eval`)."""
    if i is None or any(w is None for w in argv[i:]):
        return unknowable(f"`{what}` runs a string agentd cannot know before it runs")
    if i >= len(argv):
        return NOTHING
    return Unwrapped((Run(script=" ".join(w or "" for w in argv[i:])),), transparent=True)
