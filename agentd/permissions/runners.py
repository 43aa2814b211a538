"""Programs whose arguments hold the commands they run (issue 12 §2, break12; docs/security.md §3):
`xargs`, `find -exec/-execdir/-ok/-okdir` (and `find -delete`, which runs as `rm`), `fd -x/-X`, `parallel`,
`watch`, and the package and environment runners (`uv run`, `poetry run`, `npm exec`, `npx`, `bundle
exec`, `conda run`, `nix-shell --run`, `make --eval`...).

Owns: `RUNNERS` (command name -> the reader of what it starts) and `PREFIXED` (runners whose own
subcommand "always" may still offer as a prefix: `uv run pytest`). Pure; imports only the standard library
and agentd.permissions.argv.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentd.permissions.argv import (
    NOTHING,
    STDIN_FILE,
    Opts,
    Run,
    Unwrapped,
    Words,
    after,
    joined,
    options,
    unknowable,
)


def _xargs(argv: Words) -> Unwrapped:
    """`xargs [options] [CMD [ARGS]]`: CMD (default `echo`) with the words it reads appended, or put where
    the replace string (`-I R`, `-i`, `--replace`) stands."""
    long = {"--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars",
            "--process-slot-var", "--eof"}  # fmt: skip
    i, seen = options(argv, 1, Opts("aEdILnPs", frozenset(long), optional="eil"))
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


def _watch(argv: Words) -> Unwrapped:
    i, seen = options(argv, 1, Opts("n", frozenset({"--interval"}), optional="d"))
    if any(name in ("-x", "--exec") for name, _ in seen):
        return after(argv, i)
    return joined(argv, i, "watch")


def _parallel(argv: Words) -> Unwrapped:
    """GNU `parallel [options] CMD ::: ARGS`: CMD is a shell string; without CMD the arguments (or the
    input) are the commands (unknowable)."""
    long = {"--jobs", "--sshlogin", "--arg-file", "--colsep", "--delimiter", "--results", "--joblog",
            "--tmpdir", "--workdir", "--max-args", "--replace", "--basefile", "--env", "--timeout",
            "--retries", "--load", "--memfree", "--delay", "--halt", "--sshloginfile", "--tagstring"}  # fmt: skip
    i, _ = options(argv, 1, Opts("aCdEIjNnPSs", frozenset(long)))
    end = next((j for j, w in enumerate(argv) if w in (":::", "::::", ":::+", "::::+")), len(argv))
    cmd = argv[i:end] if i is not None and i < end else ()
    if not cmd or cmd[0] is None or "{" in (cmd[0] or ""):
        return unknowable("`parallel` runs commands it is given as arguments or reads from its input")
    out = joined(cmd, 0, "parallel")  # not transparent: it may run the command elsewhere (`-S host`)
    return Unwrapped(out.runs, transparent=False)


def _runner(
    top: Opts, subs: Mapping[str, Opts], *, scripts: tuple[str, ...] = (), positional: int = 0
) -> Callable[[Words], Unwrapped]:
    """`TOOL [options] SUB [options] CMD...` for the subcommands in `subs` (`uv run`, `npm exec`, `bundle
    exec`); `scripts`: options whose value is a shell string (`npm exec -c STRING`). Not transparent: the
    command runs in the tool's environment (a virtualenv, node_modules/.bin), so an allow names the tool."""

    def handle(argv: Words) -> Unwrapped:
        i, seen = options(argv, 1, top)
        if i is None:
            return unknowable(f"`{argv[0]}` is given a word agentd cannot know before it runs")
        if subs and (i >= len(argv) or argv[i] not in subs):
            return NOTHING
        spec = subs.get(argv[i] or "", Opts()) if subs else top
        j, seen = options(argv, i + 1, spec) if subs else (i, seen)
        given = [v for name, v in seen if name in scripts]
        if given:
            return joined((given[0],), 0, f"{argv[0]} -c")
        out = after(argv, j, positional=positional)  # `direnv exec DIR CMD`: one word first
        return Unwrapped(out.runs, transparent=False)

    return handle


def _flagged(flags: tuple[str, ...], *, rest: bool) -> Callable[[Words], Unwrapped]:
    """A tool that runs a command only after one of `flags`: the rest of the words (`nix develop -c CMD`)
    or one shell string (`nix-shell --run STRING`); without the flag an interactive shell (unknowable)."""

    def handle(argv: Words) -> Unwrapped:
        for i, w in enumerate(argv):
            if w in flags:
                if rest:
                    return Unwrapped(after(argv, i + 1).runs, transparent=False)
                return Unwrapped(joined(argv[i + 1 : i + 2], 0, f"{argv[0]} {w}").runs, transparent=False)
        if argv[0] == "nix" and (len(argv) < 2 or argv[1] not in ("develop", "shell")):
            return NOTHING
        return unknowable(f"`{argv[0]}` without {'/'.join(flags)} starts a shell that reads its input")

    return handle


def _make(argv: Words) -> Unwrapped:
    """make runs the recipes of its makefile (a file, like a script), unless they are given inline
    (`--eval`, `-E`) or read from the input (`-f -`)."""
    for i, w in enumerate(argv[1:], start=1):
        value = argv[i + 1] if i + 1 < len(argv) else None
        if w is None or w.startswith(("--eval", "-E")):
            return unknowable(f"`{argv[0]}` runs recipes agentd cannot see (--eval, or an unknown word)")
        if w in ("-f", "--file", "--makefile") and (value is None or STDIN_FILE.match(value)):
            return unknowable(f"`{argv[0]}` reads its makefile from its input")
    return NOTHING


_NONE = Opts()
_UV = Opts("", frozenset({"--directory", "--project", "--cache-dir", "--config-file", "--color"}))
_UV_RUN = Opts("pw", frozenset({"--with", "--with-requirements", "--with-editable", "--python", "--package", "--extra",
                                "--group", "--env-file", "--index", "--index-url", "--default-index",
                                "--extra-index-url", "--directory", "--project", "--only-group", "--no-group"}))  # fmt: skip
RUNNERS: dict[str, Callable[[Words], Unwrapped]] = {
    "xargs": _xargs,
    "find": _find,
    "fd": _fd,
    "fdfind": _fd,
    "parallel": _parallel,
    "watch": _watch,
    "uv": _runner(_UV, {"run": _UV_RUN}),
    "poetry": _runner(Opts("C", frozenset({"--directory", "--project"})), {"run": _NONE}),
    "pipenv": _runner(_NONE, {"run": _NONE}),
    "pdm": _runner(_NONE, {"run": _NONE}),
    "hatch": _runner(_NONE, {"run": _NONE}),
    "rye": _runner(_NONE, {"run": _NONE}),
    "bundle": _runner(_NONE, {"exec": _NONE}),
    "conda": _runner(_NONE, {"run": Opts("np", frozenset({"--name", "--prefix", "--cwd"}))}),
    "mamba": _runner(_NONE, {"run": Opts("np", frozenset({"--name", "--prefix", "--cwd"}))}),
    "micromamba": _runner(_NONE, {"run": Opts("np", frozenset({"--name", "--prefix", "--cwd"}))}),
    "npm": _runner(
        Opts("w", frozenset({"--prefix", "--workspace"})),
        {s: Opts("c", frozenset({"--package", "--call"})) for s in ("exec", "x")},
        scripts=("-c", "--call"),
    ),
    "npx": _runner(Opts("pc", frozenset({"--package", "--call"})), {}, scripts=("-c", "--call")),
    "pnpm": _runner(Opts("C", frozenset({"--dir", "--filter"})), {"exec": _NONE}),
    "yarn": _runner(Opts("", frozenset({"--cwd"})), {"exec": _NONE}),
    "direnv": _runner(_NONE, {"exec": _NONE}, positional=1),
    "nix-shell": _flagged(("--run", "--command"), rest=False),
    "nix": _flagged(("-c", "--command"), rest=True),
    "make": _make,
    "gmake": _make,
}
PREFIXED = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "rye", "bundle", "conda", "mamba",
                      "micromamba", "npm", "npx", "pnpm", "yarn", "make", "gmake"})  # fmt: skip
