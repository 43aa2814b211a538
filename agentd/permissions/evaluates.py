"""bash builtins and variables that evaluate a string as code (issue 12 §2, break12 R2; CONTRACTS.md §5;
docs/security.md §3).

Owns: `evaluated()` (why a builtin's words make bash run code held in a string, or None), `PROMPT_VARS`,
`COMMAND_VARS`
and `assigns_code()` (an assignment bash later runs as code). bash evaluates, beyond `eval`:
- arithmetic on a variable's value: `let`, and an array subscript in a variable name (`declare`,
  `typeset`, `local`, `export`, `readonly`, `unset`, `printf -v`, `read`/`read -a`, `mapfile`,
  `readarray`): `a[$(rm f)]` runs `rm f`, and so does a subscript naming a variable whose value does;
- the words of a declaration re-read as an assignment (`declare -a 'x=($(rm f))'`);
- prompt expansion (`PS1`..`PS4`, `PROMPT_COMMAND`; `${x@P}` is seen by agentd.permissions.shellwords), and
  variables a program runs (`COMMAND_VARS`: `GIT_SSH_COMMAND`, `PAGER`, `PATH`, `GIT_CONFIG_KEY_n`...);
- `mapfile`/`readarray -C CALLBACK`.
Arithmetic contexts in the syntax (`$((x))`, `((x))`, `[[ $x -eq 1 ]]`, `${a[$i]}`) are seen by
agentd.permissions.shellwords. All of these are unknowable: asked when a deny or ask rule exists, never
covered by an allow pattern. Pure; imports only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

PROMPT_VARS = frozenset({"PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND"})
# variables whose value is a command some program runs, or that change which program or configuration
# runs (git's GIT_CONFIG_COUNT/KEY_n/VALUE_n set any config key, `alias.x=!cmd` among them)
COMMAND_VARS = PROMPT_VARS | frozenset(
    {"PATH", "PAGER", "GIT_PAGER", "MANPAGER", "EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
     "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "LD_PRELOAD",
     "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "SHELL", "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS",
     "GIT_PROXY_COMMAND", "GIT_CONFIG_COUNT", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
     "GIT_TEMPLATE_DIR", "LESSOPEN", "LESSCLOSE", "BROWSER", "TAR_OPTIONS", "RSYNC_RSH", "RSYNC_CONNECT_PROG",
     "PYTHONSTARTUP", "PYTHONPATH", "PERL5OPT", "PERL5LIB", "RUBYOPT", "NODE_OPTIONS", "ZDOTDIR"}
)  # fmt: skip
_CODE_VAR = re.compile(r"^GIT_CONFIG_(KEY|VALUE)_\d+$")
_DECLARES = frozenset({"declare", "typeset", "local", "export", "readonly"})
_NAMES = frozenset({"unset", "read", "mapfile", "readarray", "printf", "let", "getopts"}) | _DECLARES
_SUBSCRIPT = re.compile(r"\[(?!\d*\])")  # a subscript that is not a plain number: evaluated as arithmetic
_CODE = re.compile(r"\$\(|`|\$\{|\$\[")  # text that expands again when re-read


def evaluates(name: str) -> bool:
    """`name` is a builtin whose words `evaluated()` reads."""
    return name in _NAMES


def evaluated(name: str, argv: Sequence[str | None]) -> str | None:
    """Why `argv` (a call of the builtin `name`) runs code held in a string, or None."""
    if name == "let":
        return "`let` evaluates arithmetic on variables' values, which can run commands (a[$(cmd)])"
    words = list(argv[1:])
    if name in ("mapfile", "readarray") and any(w is None or w.startswith("-C") for w in words):
        return f"`{name} -C` runs a callback string"
    if name == "printf":
        words = _printf_names(words)
    for w in words:
        if w is None:
            return f"`{name}` is given a word agentd cannot know before it runs (it may be read as code)"
        head = w.split("=", 1)[0]
        if _SUBSCRIPT.search(head) or (name in _DECLARES and "=" in w and _CODE.search(w.split("=", 1)[1])):
            return f"`{name} {w[:40]}` evaluates a subscript or value as code"
        if name in _DECLARES and assigns_code(head.lstrip("-+")):
            return f"`{name} {head}` sets a variable whose value is run as code"
    return None


def _printf_names(words: list[str | None]) -> list[str | None]:
    """The variable names `printf -v NAME` / `-vNAME` sets (its options come before the format); a word
    known only at run time among them could be `-v` with any name (None)."""
    names: list[str | None] = []
    i = 0
    while i < len(words) and (words[i] is None or (words[i] or "").startswith("-")) and words[i] != "--":
        w = words[i]
        if w is None or w == "-v":
            names.append(None if w is None or i + 1 >= len(words) else words[i + 1])
            i += 2
            continue
        if w.startswith("-v"):
            names.append(w[2:])
        i += 1
    return names


def assigns_code(name: str) -> bool:
    """An assignment to `name` is code bash or a program runs later (a prompt: `PS4='$(cmd)'; set -x`;
    `GIT_SSH_COMMAND`, `PAGER`, `PATH`, `GIT_CONFIG_KEY_0`...: COMMAND_VARS)."""
    return name in COMMAND_VARS or _CODE_VAR.match(name) is not None
