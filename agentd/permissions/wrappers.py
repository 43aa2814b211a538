"""What a simple command runs besides itself: wrappers, shells, `eval`, `find -exec`, interpreters with
inline code (issue 12 §2, break12; CONTRACTS.md §5; docs/security.md §3).

Owns: `Run`, `Unwrapped`, `unwrap()` (one simple command's words -> the commands it starts), the table
of commands that start other commands (`is_wrapper()`), `INTERPRETERS` and `command_name()` (the name a
command word runs under: the basename of `/bin/rm`, `./rm`). agentd.permissions.shellwords turns the
answer into parts; agentd.permissions.rules matches them. Pure functions of literal words (`None` is a
word whose value is only known when it runs). Imports the standard library and
agentd.permissions.inline_code (interpreters given their program inline).

A `Run` is one of: `words` (the command it starts: `sudo -u x rm f` -> `rm f`; `offset` is where those
words begin in the outer command's words, None when they are not a slice of it), `script` (a shell string
to parse: `sh -c STRING`, `eval`, `su -c`, `trap`, `watch`, `parallel`), or neither: a command that cannot
be known before it runs (`why`): a shell reading its commands from its input (`| sh`, `sh <<< ...`), an
interpreter's inline code (`python -c`, `perl -e`, `node -e`, an awk program calling `system`), a command
word that only a run would reveal (`xargs -I{} {}`, `sudo $CMD`), a variable naming a command (`PAGER=`,
`GIT_SSH_COMMAND=`, `PATH=`), or a definition that renames commands (`alias`, `hash -p`, `enable -f`).
`find -delete` runs as `rm` (it deletes what find matched: a rule on `rm` applies to it).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentd.permissions.inline_code import inline_code, interpreter

Words = tuple[str | None, ...]


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
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_STDIN_FILE = re.compile(r"^(-|/dev/stdin|/dev/fd/\d+|/proc/(self|\d+)/fd/\d+)$")
# variables whose value is a command some program runs (or that change which program a name runs)
_COMMAND_VARS = frozenset(
    {"PATH", "PAGER", "GIT_PAGER", "MANPAGER", "EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
     "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "LD_PRELOAD",
     "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELL", "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS"}
)  # fmt: skip
_GIT_COMMAND_KEYS = re.compile(
    r"^(alias\..*|core\.(pager|editor|sshcommand|fsmonitor|hookspath|askpass)|diff\..*\.(command|textconv)|"
    r"diff\.external|sequence\.editor|credential\..*helper|gpg\..*program|pager\..*|filter\..*|"
    r"merge\..*\.driver|include\..*|includeif\..*)$",
    re.I,
)


def command_name(word: str) -> str:
    """The name a command word runs under: `/usr/bin/rm` and `./rm` -> `rm`; `rm` -> `rm`."""
    return os.path.basename(word.rstrip("/")) or word


def unknowable(why: str) -> Unwrapped:
    return Unwrapped((Run(why=why),), transparent=True)


@dataclass(frozen=True)
class _Opts:
    """getopt-style options of one program: `short` letters and `long` names that take a value (a long
    name also takes `--name=value`), `optional` letters whose value can only be attached (`xargs -i{}`)."""

    short: str = ""
    long: frozenset[str] = frozenset()
    optional: str = ""


def _options(argv: Words, i: int, spec: _Opts) -> tuple[int | None, list[tuple[str, str | None]]]:
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


def _after(argv: Words, i: int | None, *, transparent: bool = True, positional: int = 0) -> Unwrapped:
    """The command from `argv[i + positional]` on (`timeout 5 CMD`: one positional word first)."""
    if i is None:
        return unknowable(f"`{argv[0]}` is given a word agentd cannot know before it runs")
    i += positional
    if i >= len(argv):
        return NOTHING
    return Unwrapped((Run(words=argv[i:], offset=i),), transparent=transparent)


def _simple(short: str = "", long: Sequence[str] = (), *, positional: int = 0, transparent: bool = True,
            writes: Sequence[str] = (), no_run: Sequence[str] = ()) -> Callable[[Words], Unwrapped]:  # fmt: skip
    """A wrapper whose command follows its options (and `positional` operands such as a duration)."""
    spec = _Opts(short, frozenset(long))

    def handle(argv: Words) -> Unwrapped:
        i, seen = _options(argv, 1, spec)
        if any(name in no_run for name, _ in seen):
            return NOTHING
        out = _after(argv, i, transparent=transparent, positional=positional)
        files = tuple(value for name, value in seen if name in writes)
        return Unwrapped(out.runs, out.transparent, files) if files else out

    return handle


def _env(argv: Words) -> Unwrapped:
    """`env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=VALUE]... [CMD...]`; with assignments not transparent."""
    i, seen = _options(argv, 1, _Opts("uCSP", frozenset({"--unset", "--chdir", "--split-string"})))
    if i is None:
        return unknowable("`env` is given a word agentd cannot know before it runs")
    split = [v for name, v in seen if name in ("-S", "--split-string")]
    if split:
        text = split[0]
        if text is None or "$" in text or "\\" in text:
            return unknowable("`env -S` splits a string agentd cannot know before it runs")
        try:
            words: Words = ("env", *shlex.split(text), *argv[i:])
        except ValueError:
            return unknowable("`env -S` splits a string agentd cannot read")
        return Unwrapped((Run(words=words),), transparent=False)
    names: list[str] = []
    while i < len(argv) and argv[i] is not None and _ASSIGNMENT.match(argv[i] or ""):
        names.append((argv[i] or "").split("=", 1)[0])
        i += 1
    if i < len(argv) and argv[i] is None:
        return unknowable("`env` is given a word agentd cannot know before it runs")
    return _assigned(argv, i, names) if names else _after(argv, i)


def _assigned(argv: Words, i: int, names: Sequence[str]) -> Unwrapped:
    """`NAME=VALUE CMD` (or through env/sudo): CMD runs with a changed environment (never transparent)."""
    runs = [Run(words=argv[i:], offset=i)] if i < len(argv) else []
    runs += [Run(why=f"`{n}=` names a command that a program runs") for n in names if n in _COMMAND_VARS]
    return Unwrapped(tuple(runs), transparent=False)


def _sudo(argv: Words) -> Unwrapped:
    """`sudo [options] [NAME=VALUE]... [CMD...]`: never transparent; `-i`/`-s` without CMD is a shell."""
    long = {"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot", "--role", "--type",
            "--command-timeout", "--other-user", "--user"}  # fmt: skip
    i, seen = _options(argv, 1, _Opts("CDghpRrtTUu", frozenset(long)))
    if i is None:
        return unknowable("`sudo` is given a word agentd cannot know before it runs")
    flags = {name for name, _ in seen}
    if flags & {"-e", "--edit", "-l", "--list", "-v", "--validate", "-V", "--version", "-h", "--help"}:
        return NOTHING
    names: list[str] = []
    while i < len(argv) and argv[i] is not None and _ASSIGNMENT.match(argv[i] or ""):
        names.append((argv[i] or "").split("=", 1)[0])
        i += 1
    if i >= len(argv):
        shell = flags & {"-i", "-s", "--login", "--shell"}
        return unknowable("`sudo -i`/`-s` starts a shell that reads its input") if shell else NOTHING
    if argv[i] is None:
        return unknowable("`sudo` runs a command agentd cannot know before it runs")
    return _assigned(argv, i, names)


def _su(argv: Words) -> Unwrapped:
    """`su [options] [-] [USER] -c STRING`, `runuser -u USER [--] CMD...`; else an interactive shell."""
    long = {"--command", "--session-command", "--shell", "--group", "--supp-group", "--whitelist-environment",
            "--user"}  # fmt: skip
    i, seen = _options(argv, 1, _Opts("cgGswu", frozenset(long)))
    scripts = [v for name, v in seen if name in ("-c", "--command", "--session-command")]
    if scripts and scripts[0] is not None:
        return Unwrapped((Run(script=scripts[0]),), transparent=False)
    if not scripts and any(name in ("-u", "--user") for name, _ in seen):
        return _after(argv, i, transparent=False)
    return unknowable(f"`{argv[0]}` starts a shell or runs a string agentd cannot know")


def _chroot(argv: Words) -> Unwrapped:
    i, _ = _options(argv, 1, _Opts("", frozenset({"--userspec", "--groups"})))
    if i is not None and i + 1 >= len(argv):
        return unknowable("`chroot` without a command starts a shell")
    return _after(argv, i, transparent=False, positional=1)


def _command(argv: Words) -> Unwrapped:
    """`command [-p] CMD` runs CMD; `command -v` / `-V` only describes it."""
    i, seen = _options(argv, 1, _Opts())
    if any(name in ("-v", "-V") for name, _ in seen):
        return NOTHING
    return _after(argv, i)


def _xargs(argv: Words) -> Unwrapped:
    """`xargs [options] [CMD [ARGS]]`: CMD (default `echo`) with the words it reads appended, or put where
    the replace string (`-I R`, `-i`, `--replace`) stands."""
    long = {"--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars",
            "--process-slot-var", "--eof"}  # fmt: skip
    i, seen = _options(argv, 1, _Opts("aEdILnPs", frozenset(long), optional="eil"))
    if i is None:
        return unknowable("`xargs` is given a word agentd cannot know before it runs")
    replace: list[str | None] = [
        v if name == "-I" else (v or "{}") for name, v in seen if name in ("-I", "-i", "--replace")
    ]
    cmd: Words = argv[i:] if i < len(argv) else ("echo",)
    offset = i if i < len(argv) else None
    if replace:
        mark = replace[-1]
        cmd = tuple(None if mark is None or w is None or mark in w else w for w in cmd)
    else:
        cmd = (*cmd, None)  # the words read from the input
    if cmd[0] is None:
        return unknowable("`xargs` runs a command it reads from its input")
    return Unwrapped((Run(words=cmd, offset=offset),), transparent=True)


_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = {"-fprint": 1, "-fprint0": 1, "-fls": 1, "-fprintf": 2}
_FIND_BARE = frozenset(
    {"-print", "-print0", "-delete", "-prune", "-quit", "-ls", "-depth", "-empty", "-true", "-false", "-o",
     "-a", "-or", "-and", "-not", "-readable", "-writable", "-executable", "-xdev", "-mount", "-nouser",
     "-nogroup", "-follow", "-noleaf", "-daystart", "-ignore_readdir_race", "-H", "-L", "-P"}
)  # fmt: skip


def _find(argv: Words) -> Unwrapped:
    """`find`: each `-exec/-execdir/-ok/-okdir CMD ... ;|+` is a command (`{}` a found path);
    `-delete` runs as `rm`; `-fprint F` and friends write F. find itself needs its own allow."""
    runs: list[Run] = []
    writes: list[str | None] = []
    i, expr = 1, False
    while i < len(argv):
        w, prev = argv[i], argv[i - 1]
        if w is None:
            if expr and (prev is None or not prev.startswith("-") or prev in _FIND_BARE):
                runs.append(Run(why="find's expression has a word agentd cannot know before it runs"))
            i += 1
            continue
        if w in _FIND_EXEC:
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+"):
                j += 1
            cmd = tuple(None if c is None or "{}" in c else c for c in argv[i + 1 : j])
            if cmd:
                runs.append(
                    Run(words=cmd, offset=i + 1) if cmd[0] else Run(why="find -exec {} runs a found file")
                )
            i, expr = j + 1, True
            continue
        if w == "-delete":
            runs.append(Run(words=("rm", None), why="find -delete deletes what find matched"))
        if w in _FIND_WRITES:
            writes.append(argv[i + 1] if i + 1 < len(argv) else None)
            i += _FIND_WRITES[w]
        expr = expr or w.startswith("-") or w in ("(", "!", ")", ",")
        i += 1
    return Unwrapped(tuple(runs), transparent=False, writes=tuple(writes))


def _fd(argv: Words) -> Unwrapped:
    """`fd ... -x|-X|--exec|--exec-batch CMD...`: CMD, with the found paths (`{}`) unknown."""
    for i, w in enumerate(argv):
        if w in ("-x", "-X", "--exec", "--exec-batch"):
            cmd = tuple(None if c is None or "{" in c else c for c in argv[i + 1 :] if c != ";")
            if not cmd or cmd[0] is None:
                return Unwrapped((Run(why="fd --exec runs a found file"),), transparent=False)
            return Unwrapped((Run(words=(*cmd, None), offset=i + 1),), transparent=False)
    return NOTHING


def _joined(argv: Words, i: int | None, what: str) -> Unwrapped:
    """A wrapper that runs its words joined as one shell string (`watch CMD`, `parallel CMD`, `eval`)."""
    if i is None or any(w is None for w in argv[i:]):
        return unknowable(f"`{what}` runs a string agentd cannot know before it runs")
    if i >= len(argv):
        return NOTHING
    return Unwrapped((Run(script=" ".join(w or "" for w in argv[i:])),), transparent=True)


def _eval(argv: Words) -> Unwrapped:
    return _joined(argv, 1, "eval")


def _trap(argv: Words) -> Unwrapped:
    """`trap STRING SIGNAL...` runs STRING later, in this shell."""
    if len(argv) < 3 or argv[1] in ("-", "--", "-l", "-p", ""):
        return NOTHING
    if argv[1] is None:
        return unknowable("`trap` runs a string agentd cannot know before it runs")
    return Unwrapped((Run(script=argv[1]),), transparent=True)


def _watch(argv: Words) -> Unwrapped:
    i, seen = _options(argv, 1, _Opts("n", frozenset({"--interval"}), optional="d"))
    if any(name in ("-x", "--exec") for name, _ in seen):
        return _after(argv, i)
    return _joined(argv, i, "watch")


def _parallel(argv: Words) -> Unwrapped:
    """GNU `parallel [options] CMD ::: ARGS`: CMD is a shell string; without CMD the arguments (or the
    input) are the commands (unknowable)."""
    long = {"--jobs", "--sshlogin", "--arg-file", "--colsep", "--delimiter", "--results", "--joblog",
            "--tmpdir", "--workdir", "--max-args", "--replace", "--basefile", "--env", "--timeout",
            "--retries", "--load", "--memfree", "--delay", "--halt", "--sshloginfile", "--tagstring"}  # fmt: skip
    i, _ = _options(argv, 1, _Opts("aCdEIjNnPSs", frozenset(long)))
    end = next((j for j, w in enumerate(argv) if w in (":::", "::::", ":::+", "::::+")), len(argv))
    cmd = argv[i:end] if i is not None and i < end else ()
    if not cmd or cmd[0] is None or "{" in (cmd[0] or ""):
        return unknowable("`parallel` runs commands it is given as arguments or reads from its input")
    out = _joined(cmd, 0, "parallel")  # not transparent: it may run the command elsewhere (`-S host`)
    return Unwrapped(out.runs, transparent=False)


def _applet(argv: Words) -> Unwrapped:
    """`busybox APPLET ARGS`, `toybox APPLET ARGS` run APPLET."""
    if len(argv) < 2 or (argv[1] or "").startswith("-"):
        return NOTHING
    return _after(argv, 1)


def _source(argv: Words) -> Unwrapped:
    """`source FILE` / `. FILE` run FILE's commands: like a script, unless FILE is the input or unknown."""
    if len(argv) > 1 and (argv[1] is None or _STDIN_FILE.match(argv[1])):
        return unknowable(f"`{argv[0]}` runs commands agentd cannot see (the input or an unknown file)")
    return NOTHING


def _renames(argv: Words) -> Unwrapped:
    """`alias x=rm`, `hash -p /bin/rm x`, `enable -f lib x`: a later command word may run something else."""
    name = command_name(argv[0] or "")
    words = [w or "" for w in argv[1:]]
    if (name == "alias" and any("=" in w for w in words)) or (name in ("hash", "enable") and any(
        w.startswith("-") and ("p" if name == "hash" else "f") in w for w in words
    )):  # fmt: skip
        return unknowable(f"`{name}` makes a command name run something else")
    return NOTHING


def _script(argv: Words) -> Unwrapped:
    """util-linux `script -c STRING [FILE]`; without -c an interactive shell."""
    i, seen = _options(argv, 1, _Opts("cEIOBTm", frozenset({"--command", "--log-io", "--log-in"})))
    scripts = [v for name, v in seen if name in ("-c", "--command")]
    if i is None or not scripts or scripts[0] is None:
        return unknowable("`script` runs a shell or a string agentd cannot know")
    return Unwrapped((Run(script=scripts[0]),), transparent=True)


def _flock(argv: Words) -> Unwrapped:
    """`flock [options] FILE CMD...` or `flock [options] FILE -c STRING` (or `flock FD`: nothing)."""
    i, seen = _options(argv, 1, _Opts("wEc", frozenset({"--timeout", "--conflict-exit-code", "--command"})))
    scripts = [v for name, v in seen if name in ("-c", "--command")]
    if i is not None and i + 1 < len(argv) and argv[i + 1] in ("-c", "--command"):
        scripts.append(argv[i + 2] if i + 2 < len(argv) else None)
    if scripts:
        return _joined((scripts[0],), 0, "flock -c")
    return _after(argv, i, positional=1)


_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash"})


def _shell(argv: Words) -> Unwrapped:
    """`sh [options] -c STRING [ARG0 ARGS]` runs STRING; `sh FILE` runs a script (the command itself);
    `sh`, `sh -s`, `sh -i`, `sh -` and `sh /dev/stdin` read their commands from the input (unknowable)."""
    i, cflag, stdin = 1, False, False
    while i < len(argv):
        w = argv[i]
        if w is None:
            return unknowable(f"`{argv[0]}` is given a word agentd cannot know before it runs")
        if w in ("-", "--"):
            stdin, i = stdin or w == "-", i + 1
            break
        if w in ("--rcfile", "--init-file", "--init-command"):
            i += 2
            continue
        if w == "--command":
            cflag, i = True, i + 1
            continue
        if len(w) < 2 or w[0] not in "-+" or w.startswith("--"):
            if w.startswith("--"):
                i += 1
                continue
            break
        cflag = cflag or "c" in w[1:]
        stdin = stdin or any(ch in w[1:] for ch in "si")
        i += 1 + sum(ch in "oO" for ch in w[1:])
    operands = argv[i:]
    if cflag:
        if not operands:
            return NOTHING
        if operands[0] is None:
            return unknowable(f"`{argv[0]} -c` runs a string agentd cannot know before it runs")
        return Unwrapped((Run(script=operands[0]),), transparent=True)
    if stdin or not operands or operands[0] is None or _STDIN_FILE.match(operands[0] or ""):
        return unknowable(f"`{argv[0]}` reads the commands it runs from its input or an unknown file")
    return NOTHING


def _git(argv: Words) -> Unwrapped:
    """git's global `-c KEY=VALUE` may name a command (`alias.x=!rm f`, `core.pager`, `core.sshCommand`)."""
    long = frozenset({"--git-dir", "--work-tree", "--namespace", "--config-env", "--exec-path"})
    _, seen = _options(argv, 1, _Opts("Cc", long))
    for name, value in seen:
        if name in ("-c", "--config-env", "--exec-path"):
            key = (value or "").split("=", 1)[0]
            if value is None or name == "--exec-path" or _GIT_COMMAND_KEYS.match(key):
                return Unwrapped((Run(why=f"`git {name} {value or '…'}` can make git run another command"),))
    return NOTHING


def _interpreted(argv: Words) -> Unwrapped:
    family = interpreter(command_name(argv[0] or ""))
    why = inline_code(family, argv) if family is not None else None
    return Unwrapped((Run(why=why),)) if why else NOTHING


_STRACE = "abeEIoOpPsSuUX"
_HANDLERS: dict[str, Callable[[Words], Unwrapped]] = {
    "env": _env,
    "command": _command,
    "builtin": _simple(),
    "exec": _simple("a"),
    "coproc": _simple(),
    "nice": _simple("n", ("--adjustment",)),
    "nohup": _simple(),
    "timeout": _simple("ks", ("--kill-after", "--signal"), positional=1),
    "stdbuf": _simple("ioe", ("--input", "--output", "--error")),
    "time": _simple("fo", ("--format", "--output"), writes=("-o", "--output")),
    "setsid": _simple(),
    "ionice": _simple(
        "cnpPu",
        ("--class", "--classdata", "--pid", "--pgid", "--uid"),
        no_run=("-p", "-P", "-u", "--pid", "--pgid", "--uid"),
    ),
    "taskset": _simple("", ("--cpu-list",), positional=1, no_run=("-p", "--pid")),
    "flock": _flock,
    "unbuffer": _simple(),
    "strace": _simple(_STRACE, ("--output",), writes=("-o", "--output")),
    "ltrace": _simple("aAeEnoOpsSuwXxL", ("--output",), writes=("-o", "--output")),
    "sudo": _sudo,
    "doas": _simple("uC", transparent=False, no_run=("-C",)),
    "pkexec": _simple("", ("--user",), transparent=False),
    "su": _su,
    "runuser": _su,
    "chroot": _chroot,
    "xargs": _xargs,
    "find": _find,
    "fd": _fd,
    "fdfind": _fd,
    "parallel": _parallel,
    "watch": _watch,
    "busybox": _applet,
    "toybox": _applet,
    "eval": _eval,
    "trap": _trap,
    "script": _script,
    "source": _source,
    ".": _source,
    "alias": _renames,
    "hash": _renames,
    "enable": _renames,
    "git": _git,
    **{shell: _shell for shell in _SHELLS},
}
_NOT_WRAPPERS = frozenset({"git", "alias", "hash", "enable"})


def is_wrapper(name: str) -> bool:
    """`name` (a command name, see `command_name`) starts other commands or runs a given program
    (sudo, env, xargs, find, sh, eval, source, python...): "always" offers no prefix for it alone."""
    return (name in _HANDLERS and name not in _NOT_WRAPPERS) or interpreter(name) is not None


def is_interpreter(name: str) -> bool:
    """`name` runs a program file it is given (`python3 script.py`, `bash build.sh`, `node x.js`)."""
    return name in _SHELLS or interpreter(name) is not None


def unwrap(words: Words, assigned: Sequence[str] = ()) -> Unwrapped:
    """What the simple command `words` starts. `assigned`: the names its leading `NAME=VALUE` words set
    (`words` begins with those words). Never raises; an unknown program starts nothing known here."""
    if assigned:
        return _assigned(words, len(assigned), assigned)
    if not words or words[0] is None:
        return NOTHING
    name = command_name(words[0])
    handler = _HANDLERS.get(name)
    if handler is None:
        return _interpreted(words) if interpreter(name) is not None else NOTHING
    return handler(words)
