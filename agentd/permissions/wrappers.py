"""What a simple command starts besides itself (issue 12 §2, break12; CONTRACTS.md §5; docs/security.md
§3): the one table of commands that run other commands, and `unwrap()`.

Owns: `unwrap()` (one simple command's words -> the commands it starts, as agentd.permissions.argv's
`Unwrapped`), `is_wrapper()`, `is_interpreter()`, and the readers of the wrappers that change how, as whom
or where a command runs (`env`, `sudo`, `doas`, `su`, `runuser`, `chroot`, `command`, `exec`, `nice`,
`nohup`, `timeout`, `stdbuf`, `time`, `setsid`, `flock`, `strace`, `chrt`, `fakeroot`, `prlimit`,
`busybox`...), of the shells and
builtins that run strings (`sh -c`, `eval`, `trap`, `source`), of leading `NAME=VALUE` words and of what
renames commands (`alias`, `hash -p`, `enable -f`, git's `-c alias.x=!...`). Programs whose arguments
hold commands are read by agentd.permissions.runners, interpreters by agentd.permissions.inline_code.
Unknowable (`Run.why`): a shell reading its commands from its input (`| sh`, `sh <<< ...`), a command word
only a run reveals (`sudo $CMD`), a variable naming a command (`PAGER=`, `GIT_SSH_COMMAND=`, `PATH=`).
agentd.permissions.shellwords turns the answer into parts; agentd.permissions.rules matches them. Pure;
imports the standard library and agentd.permissions.argv / runners / inline_code.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence

from agentd.permissions.argv import (
    NOTHING,
    STDIN_FILE,
    Opts,
    Run,
    Unwrapped,
    Words,
    after,
    command_name,
    joined,
    options,
    simple,
    unknowable,
)
from agentd.permissions.evaluates import assigns_code, evaluated, evaluates
from agentd.permissions.inline_code import inline_code, interpreter
from agentd.permissions.optionruns import option_runs
from agentd.permissions.runners import PREFIXED, RUNNERS

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_GIT_COMMAND_KEYS = re.compile(
    r"^(alias\..*|core\.(pager|editor|sshcommand|fsmonitor|hookspath|askpass)|diff\..*\.(command|textconv)|"
    r"diff\.external|sequence\.editor|credential\..*helper|gpg\..*program|pager\..*|filter\..*|"
    r"merge\..*\.driver|include\..*|includeif\..*|protocol\..*|remote\..*\.(uploadpack|receivepack|vcs)|"
    r"core\.gitproxy|uploadpack\..*|receive\..*|submodule\..*\.update|difftool\..*|mergetool\..*)$",
    re.I,
)


def _env(argv: Words) -> Unwrapped:
    """`env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=VALUE]... [CMD...]`; with assignments not transparent."""
    i, seen = options(argv, 1, Opts("uCSP", frozenset({"--unset", "--chdir", "--split-string"})))
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
    while i < len(argv) and argv[i] == "-":  # `env - CMD`: `-` is env's -i
        i += 1
    while i < len(argv) and argv[i] is not None and _ASSIGNMENT.match(argv[i] or ""):
        names.append((argv[i] or "").split("=", 1)[0])
        i += 1
    if i < len(argv) and argv[i] is None:
        return unknowable("`env` is given a word agentd cannot know before it runs")
    return _assigned(argv, i, names) if names else after(argv, i)


def _assigned(argv: Words, i: int, names: Sequence[str]) -> Unwrapped:
    """`NAME=VALUE CMD` (or through env/sudo): CMD runs with a changed environment (never transparent)."""
    runs = [Run(words=argv[i:], offset=i)] if i < len(argv) else []
    runs += [Run(why=f"`{n}=` names a command that a program runs") for n in names if assigns_code(n)]
    return Unwrapped(tuple(runs), transparent=False)


def _sudo(argv: Words) -> Unwrapped:
    """`sudo [options] [NAME=VALUE]... [CMD...]`: never transparent; `-i`/`-s` without CMD is a shell."""
    long = {"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot", "--role", "--type",
            "--command-timeout", "--other-user", "--user"}  # fmt: skip
    i, seen = options(argv, 1, Opts("CDghpRrtTUu", frozenset(long)))
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
    i, seen = options(argv, 1, Opts("cgGswu", frozenset(long)))
    scripts = [v for name, v in seen if name in ("-c", "--command", "--session-command")]
    if not scripts and i is not None:  # su permutes: `su root -c STRING`
        scripts = [argv[j + 1] if j + 1 < len(argv) else None for j in range(i, len(argv)) if argv[j] == "-c"]
    if scripts and scripts[0] is not None:
        return Unwrapped((Run(script=scripts[0]),), transparent=False)
    if not scripts and any(name in ("-u", "--user") for name, _ in seen):
        return after(argv, i, transparent=False)
    return unknowable(f"`{argv[0]}` starts a shell or runs a string agentd cannot know")


def _sg(argv: Words) -> Unwrapped:
    """`sg GROUP [-c] STRING` runs STRING with another group."""
    rest = argv[2:]
    if rest and rest[0] == "-c":
        rest = rest[1:]
    if not rest:
        return unknowable("`sg` without a command starts a shell")
    return Unwrapped(joined(rest[:1], 0, "sg").runs, transparent=False)


def _gdb(argv: Words) -> Unwrapped:
    """`gdb --args CMD...` runs CMD; `-ex`/`-x` commands (`shell ...`) can run anything."""
    if any(w is None or w in ("-ex", "--eval-command", "-x", "--command", "-iex", "-ix") for w in argv):
        return unknowable("`gdb` runs commands agentd cannot see (-ex, -x)")
    if "--args" in argv:
        return after(argv, argv.index("--args") + 1)
    return NOTHING


def _chroot(argv: Words) -> Unwrapped:
    i, _ = options(argv, 1, Opts("", frozenset({"--userspec", "--groups"})))
    if i is not None and i + 1 >= len(argv):
        return unknowable("`chroot` without a command starts a shell")
    return after(argv, i, transparent=False, positional=1)


def _command(argv: Words) -> Unwrapped:
    """`command [-p] CMD` runs CMD; `command -v` / `-V` only describes it."""
    i, seen = options(argv, 1, Opts())
    if any(name in ("-v", "-V") for name, _ in seen):
        return NOTHING
    return after(argv, i)


def _eval(argv: Words) -> Unwrapped:
    return joined(argv, 1, "eval")


def _trap(argv: Words) -> Unwrapped:
    """`trap STRING SIGNAL...` runs STRING later, in this shell."""
    if len(argv) > 1 and argv[1] == "--":
        argv = argv[:1] + argv[2:]
    if len(argv) < 3 or argv[1] in ("-", "-l", "-p", ""):
        return NOTHING
    if argv[1] is None:
        return unknowable("`trap` runs a string agentd cannot know before it runs")
    return Unwrapped((Run(script=argv[1]),), transparent=True)


def _applet(argv: Words) -> Unwrapped:
    """`busybox APPLET ARGS`, `toybox APPLET ARGS` run APPLET."""
    if len(argv) < 2 or (argv[1] or "").startswith("-"):
        return NOTHING
    return after(argv, 1)


def _source(argv: Words) -> Unwrapped:
    """`source FILE` / `. FILE` run FILE's commands: like a script, unless FILE is the input or unknown."""
    if len(argv) > 1 and (argv[1] is None or STDIN_FILE.match(argv[1])):
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
    i, seen = options(argv, 1, Opts("cEIOBTm", frozenset({"--command", "--log-io", "--log-in"})))
    scripts = [v for name, v in seen if name in ("-c", "--command")]
    if i is None or not scripts or scripts[0] is None:
        return unknowable("`script` runs a shell or a string agentd cannot know")
    return Unwrapped((Run(script=scripts[0]),), transparent=True)


def _flock(argv: Words) -> Unwrapped:
    """`flock [options] FILE CMD...` or `flock [options] FILE -c STRING` (or `flock FD`: nothing)."""
    i, seen = options(argv, 1, Opts("wEc", frozenset({"--timeout", "--conflict-exit-code", "--command"})))
    scripts = [v for name, v in seen if name in ("-c", "--command")]
    if i is not None and i + 1 < len(argv) and argv[i + 1] in ("-c", "--command"):
        scripts.append(argv[i + 2] if i + 2 < len(argv) else None)
    if scripts:
        return joined((scripts[0],), 0, "flock -c")
    return after(argv, i, positional=1)


_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash", "csh",
                     "tcsh", "ksh93", "pdksh", "oksh", "loksh", "elvish", "xonsh", "nu"})  # fmt: skip


_FOREIGN = frozenset({"csh", "tcsh", "fish", "elvish", "xonsh", "nu"})  # not read with bash's grammar


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
        if command_name(argv[0] or "") in _FOREIGN:
            return unknowable(f"`{argv[0]} -c` runs a string in a syntax other than bash's")
        if operands[0] is None:
            return unknowable(f"`{argv[0]} -c` runs a string agentd cannot know before it runs")
        return Unwrapped((Run(script=operands[0]),), transparent=True)
    if stdin or not operands or operands[0] is None or STDIN_FILE.match(operands[0] or ""):
        return unknowable(f"`{argv[0]}` reads the commands it runs from its input or an unknown file")
    return NOTHING


def _git(argv: Words) -> Unwrapped:
    """git's global `-c KEY=VALUE` may name a command (`alias.x=!rm f`, `core.pager`, `core.sshCommand`)."""
    long = frozenset({"--git-dir", "--work-tree", "--namespace", "--config-env", "--exec-path"})
    if any(w is not None and "ext::" in w for w in argv):
        return Unwrapped((Run(why="a git `ext::` URL runs a command"),))
    _, seen = options(argv, 1, Opts("Cc", long))
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
_UNSHARE = ("--setuid", "--setgid", "--root", "--wd", "--map-user", "--map-group")
_SYSTEMD_RUN = ("--property", "--setenv", "--unit", "--machine", "--host", "--working-directory", "--uid", "--gid",
                "--slice", "--description")  # fmt: skip
_HANDLERS: dict[str, Callable[[Words], Unwrapped]] = {
    "env": _env,
    "command": _command,
    "builtin": simple(),
    "exec": simple("a"),
    "coproc": simple(),
    "nice": simple("n", ("--adjustment",)),
    "nohup": simple(),
    "timeout": simple("ks", ("--kill-after", "--signal"), positional=1),
    "stdbuf": simple("ioe", ("--input", "--output", "--error")),
    "time": simple("fo", ("--format", "--output"), writes=("-o", "--output")),
    "setsid": simple(),
    "ionice": simple(
        "cnpPu",
        ("--class", "--classdata", "--pid", "--pgid", "--uid"),
        no_run=("-p", "-P", "-u", "--pid", "--pgid", "--uid"),
    ),
    "taskset": simple("", ("--cpu-list",), positional=1, no_run=("-p", "--pid")),
    "flock": _flock,
    "unbuffer": simple(),
    "strace": simple(_STRACE, ("--output",), writes=("-o", "--output")),
    "ltrace": simple("aAeEnoOpsSuwXxL", ("--output",), writes=("-o", "--output")),
    "valgrind": simple(),
    "caffeinate": simple("tw"),
    "chronic": simple(),
    "rlwrap": simple("acfFhHlmMoOpPqsSwz"),
    "chrt": simple(
        "TPD",
        ("--sched-runtime", "--sched-period", "--sched-deadline"),
        positional=1,
        no_run=("-p", "--pid", "-m", "--max"),
    ),
    "fakeroot": simple("lsib", ("--lib", "--faked"), writes=("-s",)),
    "prlimit": simple("po", ("--pid", "--output"), no_run=("-p", "--pid")),
    "unshare": simple("SGRwl", _UNSHARE, transparent=False),
    "nsenter": simple("tSGrw", ("--target", "--setuid", "--setgid", "--root", "--wd"), transparent=False),
    "firejail": simple(transparent=False),
    "systemd-run": simple("pEuMHdG", _SYSTEMD_RUN, transparent=False),
    "sg": _sg,
    "gdb": _gdb,
    "sudo": _sudo,
    "doas": simple("uC", transparent=False, no_run=("-C",)),
    "pkexec": simple("", ("--user",), transparent=False),
    "su": _su,
    "runuser": _su,
    "chroot": _chroot,
    **RUNNERS,
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
_NOT_WRAPPERS = frozenset({"git", "alias", "hash", "enable"}) | PREFIXED


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
    found = _unwrap(words)
    extra = option_runs(words)
    if not extra:
        return found
    return Unwrapped(
        found.runs + extra, transparent=found.transparent and bool(found.runs), writes=found.writes
    )


def _unwrap(words: Words) -> Unwrapped:
    name = command_name(words[0] or "")
    if evaluates(words[0] or ""):  # a builtin (its own name, not a path) that reads a string as code
        why = evaluated(words[0] or "", words)
        return unknowable(why) if why else NOTHING
    handler = _HANDLERS.get(name)
    if handler is None:
        return _interpreted(words) if interpreter(name) is not None else NOTHING
    return handler(words)
