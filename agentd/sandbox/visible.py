"""What a program agentd starts in the sandbox must still see (docs/security.md, "Programs under /tmp").

Owns: `program_paths()`. The sandbox replaces `/tmp`, `/var/tmp` and `/run` with empty folders
(`agentd.sandbox.bwrap`), so a program installed there (a virtualenv's python in a checkout under /tmp,
node unpacked under /tmp, a tool under /run/user/...) would vanish from its own sandbox. The paths returned
here are bound back read-only by the backend (only those under a private folder; the rest of the file
system is visible anyway):
- the executable's installation: `argv[0]` as found on `PATH`, both as named and resolved (symlinks
  followed), and the interpreter its `#!` line names; an executable in a `bin` or `sbin` folder brings the
  folder above it (its prefix: a virtualenv, a node or JDK tree), any other its own folder;
- a Python virtualenv's base installation (`home` in its `pyvenv.cfg`), and, for agentd's own interpreter,
  `sys.prefix`, `sys.exec_prefix` and `sys.base_prefix`;
- for a command line from the user's configuration (an MCP server's, given with its configured
  environment; never one the model wrote): every absolute path argument naming an existing folder, or a
  file (with its folder), and the entries of `PYTHONPATH` and `NODE_PATH` in that environment, whose
  `PATH` also finds the executable.
Only existing regular files and folders, never a socket or a device. The executable and script files are
returned as well as their folders, so a backend that refuses a folder (one that is a private folder
itself, `/tmp/tool`'s `/tmp`) still binds the file. Imports only the standard library.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

BIN_DIRS = ("bin", "sbin")
SHEBANG_MAX = 256  # bytes read from an executable to find its `#!` interpreter
SEARCH_VARS = ("PYTHONPATH", "NODE_PATH")  # a configured environment's module search paths


def _existing(path: Path) -> bool:
    """A regular file or a folder (after symlinks); never a socket, fifo or device."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def _named(path: str) -> Path:
    """`path` absolute, with its folder resolved but the last name kept (a venv's `bin/python` link)."""
    p = Path(os.path.abspath(path))
    return Path(os.path.realpath(p.parent)) / p.name


def _installation(exe: Path) -> list[Path]:
    """The executable and its prefix: the folder above `bin`/`sbin`, else its own folder."""
    folder = exe.parent
    prefix = folder.parent if folder.name in BIN_DIRS and folder.parent != folder else folder
    out = [exe, prefix]
    cfg = prefix / "pyvenv.cfg"  # a virtualenv: its base interpreter's installation too
    home = _venv_home(cfg) if cfg.is_file() else None
    if home is not None:
        out.append(home.parent if home.name in BIN_DIRS else home)
    return out


def _venv_home(cfg: Path) -> Path | None:
    """The `home = <folder>` line of a `pyvenv.cfg` (the base interpreter's folder), resolved."""
    try:
        lines = cfg.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(os.path.realpath(value.strip()))
    return None


def _interpreter(exe: Path) -> str | None:
    """The absolute interpreter of a `#!` script (None for `#!/usr/bin/env ...`'s `env`, found anyway)."""
    try:
        with open(exe, "rb") as f:
            head = f.read(SHEBANG_MAX)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    return words[0] if words and words[0].startswith("/") else None


def _executable(argv0: str, search_path: str | None) -> list[Path]:
    """The installation of `argv0` (found on `search_path`, else on agentd's `PATH`), as named and
    resolved, and of the interpreter of a `#!` script; agentd's own interpreter brings its prefixes."""
    found = shutil.which(argv0, path=search_path) if "/" not in argv0 else argv0
    if not found:
        return []
    named = _named(found)
    real = Path(os.path.realpath(named))
    out = _installation(named) + _installation(real)
    script = _interpreter(real)
    if script is not None:
        out += _installation(_named(script)) + _installation(Path(os.path.realpath(script)))
    if real == Path(os.path.realpath(sys.executable)):
        out += [Path(os.path.realpath(p)) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix)]
    return out


def _arguments(args: Iterable[str]) -> list[Path]:
    """Absolute path arguments: a folder, or a file and its folder."""
    out: list[Path] = []
    for arg in args:
        if not arg.startswith("/"):
            continue
        p = Path(os.path.realpath(arg))
        out += [p] if p.is_dir() else [p, p.parent]
    return out


def program_paths(argv: list[str], config_env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The existing paths the program `argv` needs to see (see the module docstring), without repeats.
    `config_env`: given when `argv` comes from the user's configuration: the environment configured for
    it (its `PATH` finds the executable, else agentd's does); then the paths its arguments and module
    search variables name count too."""
    if not argv or not argv[0]:
        return ()
    paths = _executable(argv[0], None if config_env is None else config_env.get("PATH"))
    if config_env is not None:
        search = [e for v in SEARCH_VARS for e in config_env.get(v, "").split(os.pathsep)]
        paths += _arguments([*argv[1:], *search])
    out: list[Path] = []
    for p in paths:
        if p not in out and _existing(p):
            out.append(p)
    return tuple(out)
