"""Interpreters given their program on the command line or on their input (issue 12 §2, break12;
docs/security.md §3).

Owns: `interpreter()` (the family of a command name: `python3.11` -> `python`), `INTERPRETERS` and
`inline_code()`: why an interpreter's invocation runs code that is not in a file agentd can name
(`python -c`, `perl -e`, `node -e`, `ruby -e`, `php -r`, `deno eval`, an awk program that calls
`system()` or pipes to a command, a sed script with GNU sed's `e` command or `s///e` flag (or its `w`
command and `s///w` flag, which write a file), or a program
read from the input: `python`, `python -`, `node` with no script), or None when it runs a named file or
module (`python3 script.py`, `python3 -m pytest`). Pure; imports only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_FAMILY = re.compile(r"^(python|pypy|perl|ruby|php|lua|luajit|node|nodejs|Rscript|R|osascript|tclsh|wish|"
                     r"pwsh|powershell|expect|deno|bun|awk|gawk|mawk|nawk|sed|gsed)(\d[\d.]*)?$")  # fmt: skip


@dataclass(frozen=True)
class _Spec:
    """`inline`: options whose value (or the rest of the invocation) is program text; `takes`: other
    options that take a value (attached or the next word); `attached`: options whose optional value can only
    be attached (`perl -i.bak`, `-Mstrict`: the next word is not theirs); `digits`: those whose attached
    value is digits only, so a bundle goes on after them (`perl -lane`, `-0777ne`); `clusters`: short
    options may be bundled (`perl -ne`, `python -Bc`); `stdin`: with no script operand the program is
    read from the input."""

    inline: frozenset[str]
    takes: frozenset[str] = frozenset()
    clusters: bool = True
    stdin: bool = True
    attached: frozenset[str] = frozenset()
    digits: frozenset[str] = frozenset()


def _spec(
    inline: str,
    takes: str = "",
    *,
    clusters: bool = True,
    stdin: bool = True,
    attached: str = "",
    digits: str = "",
) -> _Spec:
    return _Spec(
        frozenset(inline.split()), frozenset(takes.split()), clusters, stdin, frozenset(attached.split()),
        frozenset(digits.split()),
    )  # fmt: skip


_SPECS: dict[str, _Spec] = {
    "python": _spec("-c", "-W -X --check-hash-based-pycs"),
    "pypy": _spec("-c", "-W -X"),
    "perl": _spec("-e -E", "-I", attached="-i -x -F -C -d -D -m -M", digits="-l -0"),
    "ruby": _spec("-e", "-I -r -C -E --encoding", attached="-i -x -F -K", digits="-0 -W -T"),
    "php": _spec("-r -B -R -F -E -a", "-c -d -z -f -t -S"),
    "lua": _spec("-e", "-l"),
    "luajit": _spec("-e", "-l -j -O -b"),
    "node": _spec(
        "-e --eval -p --print",
        "-r --require --import --loader --experimental-loader -C --conditions --input-type --title",
        clusters=False,
    ),
    "bun": _spec("-e --eval -p --print", "-r --preload --cwd --config", clusters=False),
    "Rscript": _spec("-e", "", clusters=False, stdin=False),
    "R": _spec("-e", "", clusters=False),
    "osascript": _spec("-e", "-l -s", clusters=False),
    "tclsh": _spec("", ""),
    "expect": _spec("-c", "-f", clusters=False),
    "wish": _spec("", ""),
    "pwsh": _spec("-c -command -Command -ec -EncodedCommand -encodedcommand", "-f -File", clusters=False),
}
_SPECS["nodejs"], _SPECS["powershell"] = _SPECS["node"], _SPECS["pwsh"]
INTERPRETERS = frozenset(_SPECS) | {"deno", "awk", "gawk", "mawk", "nawk", "sed", "gsed"}
_CODE_MODULES = frozenset({"timeit", "code", "cProfile", "profile", "trace"}) | {
    None
}  # code or -c/-s strings
_STDIN_FILE = re.compile(r"^(-|/dev/stdin|/dev/fd/\d+|/proc/(self|\d+)/fd/\d+)$")


def interpreter(name: str) -> str | None:
    """The interpreter family of a command name (`python3.11` -> `python`), or None."""
    m = _FAMILY.match(name)
    return m.group(1) if m else None


def inline_code(family: str, argv: Sequence[str | None]) -> str | None:
    """Why `argv` (an invocation of `family`) runs program text agentd cannot name, or None."""
    if family in ("awk", "gawk", "mawk", "nawk"):
        return _awk(argv)
    if family in ("sed", "gsed"):
        return _sed(argv)
    if family == "deno":
        sub = next((w for w in argv[1:] if w is None or not w.startswith("-")), "")
        return f"`deno {sub}` runs inline code" if sub in (None, "eval", "repl") else None
    spec = _SPECS.get(family)
    return _generic(argv, spec) if spec is not None else None


def _generic(argv: Sequence[str | None], spec: _Spec) -> str | None:
    name = argv[0]
    i = 1
    while i < len(argv):
        w = argv[i]
        if w is None:
            return f"`{name}` is given a word agentd cannot know before it runs"
        if w == "--" or not w.startswith("-") or w == "-":
            i += w == "--"
            break
        key = w.split("=", 1)[0]
        if key in spec.inline or (spec.clusters and not w.startswith("--") and _bundles(w, spec)):
            return f"`{name} {key}` runs inline code"
        if w == "-m" and name and interpreter(name) in ("python", "pypy"):
            module = argv[i + 1] if i + 1 < len(argv) else None
            if module in _CODE_MODULES or (
                module == "pdb" and any(a in ("-c", "--command") for a in argv[i:])
            ):
                return f"`{name} -m {module}` runs code given as arguments"
            return None  # python -m MODULE: a named module
        if key in spec.takes and "=" not in w:
            value = argv[i + 1] if i + 1 < len(argv) else None
            if value in spec.inline:  # `perl -I -e CODE`: whichever perl reads, -e is not a directory
                return f"`{name} {value}` runs inline code"
            i += 1
        i += 1
    if i >= len(argv):
        return f"`{name}` reads its program from its input" if spec.stdin else None
    script = argv[i]
    if script is None or _STDIN_FILE.match(script):
        return f"`{name}` runs a program from its input or an unknown file"
    return None


def _bundles(word: str, spec: _Spec) -> bool:
    """`-ne` bundles `-e` (perl); `-Bc` bundles `-c` (python); an option taking a value ends the bundle."""
    j = 1
    while j < len(word):
        flag = f"-{word[j]}"
        if flag in spec.inline:
            return True
        if flag in spec.takes or flag in spec.attached:
            return False  # the rest of the word is its value
        j += 1
        if flag in spec.digits:  # `-l`, `-0777`, `-0x1ff`: an optional number, then more options
            while j < len(word) and (word[j].isdigit() or (word[j] in "xXabcdefABCDEF" and flag == "-0")):
                j += 1
    return False


def _awk(argv: Sequence[str | None]) -> str | None:
    """awk's program (`-e`/`--source` or the first operand, unless `-f FILE`) runs a command through
    `system()`, `cmd | getline` or `print | cmd`: unknowable when it contains `system` or `|`."""
    programs: list[str | None] = []
    has_file, i = False, 1
    while i < len(argv):
        w = argv[i]
        if w is None or not w.startswith("-") or w == "-":
            break
        if w in ("-f", "--file", "-i", "--include", "-l", "--load"):
            has_file, i = True, i + 2
            continue
        if w in ("-e", "--source"):
            programs.append(argv[i + 1] if i + 1 < len(argv) else None)
            i += 2
            continue
        i += 2 if w in ("-F", "-v", "--assign", "--field-separator") else 1
        if w == "--":
            break
    if not programs and not has_file:
        programs.append(argv[i] if i < len(argv) else None)
    for program in programs:
        if program is None or "system" in program or "|" in program:
            return f"`{argv[0]}`'s program can run commands (system(), a pipe) or is not known"
    return None


_SED_E_CMD = re.compile(r"(?:^|[;\n{}!]|[\d$/IM])\s*e(?:\s|;|}|$)")  # `/x/Ie cmd`: address flags I, M
_SED_W_CMD = re.compile(r"(?:^|[;\n{}!]|[\d$/IM])\s*[wW]\s*\S")  # `w FILE`: writes a file
_SED_W_FLAG = re.compile(r"s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[0-9gpiImMe]*w")
_SED_TEXT = re.compile(r"([sy])([^\\\n])(?:\\.|(?!\2).)*\2(?:\\.|(?!\2).)*\2|/(?:\\.|[^/\n])*/")
_SED_E_FLAG = re.compile(r"s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[0-9gpiImMw]*e")


def _sed(argv: Sequence[str | None]) -> str | None:
    """GNU sed's `e` command and the `e` flag of `s` run shell commands; a script with either (or one
    agentd cannot know) is unknowable."""
    scripts: list[str | None] = []
    i, has_file = 1, False
    while i < len(argv):
        w = argv[i]
        if w is None or not w.startswith("-") or w == "-":
            break
        if w in ("-e", "--expression", "-f", "--file"):
            if w in ("-e", "--expression"):
                scripts.append(argv[i + 1] if i + 1 < len(argv) else None)
            has_file = has_file or w in ("-f", "--file")
            i += 2
            continue
        if w.startswith("--expression="):
            scripts.append(w.split("=", 1)[1])
        i += 1
    if not scripts and not has_file:
        scripts.append(argv[i] if i < len(argv) else None)
    for s in scripts:
        if s is None:
            return f"`{argv[0]}`'s script is not known before it runs"
        bare = _SED_TEXT.sub(lambda m: m.group(1) or "/", s)  # commands without s///, y/// and /re/ text
        if _SED_E_CMD.search(bare) or _SED_E_FLAG.search(s):
            return f"`{argv[0]}`'s script can run commands (GNU sed's e)"
        if _SED_W_CMD.search(bare) or _SED_W_FLAG.search(s):
            return f"`{argv[0]}`'s script writes a file it names (w, s///w), which agentd does not check"
    return None
