"""Rules-by-command benchmark (issue 12, break12): `python -m tests.benchmarks.rules` prints one JSON line.

What is timed is agentd's own decision input for one `run_command` call: `agentd.permissions.rules.
subject_of()` (tree-sitter-bash parse, the walk into parts, wrappers, `sh -c` strings) and `verdicts()`
against three rules (a deny on `rm`, two allow prefixes), each on a fresh 10 KB line (the parse cache
never helps). Figures are medians of 15 runs, in milliseconds:

- `long_argument_ms`: one command with a 10 KB quoted argument (`git commit -m '...'`). Target <= 3.
- `heredoc_ms`: a 10 KB here-document into a file. Target <= 3.
- `script_ms`: `bash -c` of a 10 KB script of about 130 commands (the string parsed again).
- `joined_ms`: about 150 commands joined by `&&` and `|` (about 300 parts).
- `wrapped_ms`: about 280 `timeout 5 sh -c '...'` commands (about 840 parts).
- `parse_ms`: tree-sitter's parse alone of the `joined` line, the floor no walk goes below;
  `joined_vs_parse` = `joined_ms / parse_ms`; `min_line_bytes`: the shortest of the five lines.
The cost grows with the number of commands, not bytes: the walk visits each syntax node once in Python.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd.permissions.rules import Rule, subject_of, verdicts
from agentd.permissions.shellwords import _parser

RUNS = 15
SIZE = 10_240
RULES = (
    Rule(tool="run_command(rm)", action="deny"),
    Rule(tool="run_command(git status *)", action="allow"),
    Rule(tool="run_command(npm test)", action="allow"),
)


def _fit(text: str, sep: str) -> str:
    """`text` cut to at most SIZE bytes at a separator."""
    return text if len(text) <= SIZE else text[: text.rindex(sep, 0, SIZE)]


def lines() -> dict[str, str]:
    script = "; ".join(f"npm test -- --grep case{i} --reporter dot --timeout 5000 --bail" for i in range(200))
    return {
        "long_argument": "git commit -m '" + "x" * (SIZE - 20) + "'",
        "heredoc": "cat > notes.txt <<'EOF'\n" + "a line of text here\n" * ((SIZE - 40) // 20) + "EOF",
        "script": "bash -c '" + _fit(script, ";") + "'",
        "joined": _fit(
            " && ".join(f"git status -s src/m{i}/f{i}.py | grep -v p{i}" for i in range(400)), " &&"
        ),
        "wrapped": _fit("; ".join(f"timeout 5 sh -c 'git status -s {i}'" for i in range(600)), ";"),
    }


def _median_ms(fn: Callable[[int], object]) -> float:
    times = []
    for i in range(RUNS):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 3)


def decide(line: str, i: int) -> None:
    fresh = f"{line}\ntrue {i}"  # a new line each run: split_command's cache must not help
    verdicts(subject_of("run_command", command=fresh, path=None, roots=[Path("/w")]), RULES)


def main() -> int:
    cases = lines()
    decide(cases["joined"], -1)  # warm up: the parser and the pattern caches
    result: dict[str, Any] = {
        f"{k}_ms": _median_ms(lambda i, line=v: decide(line, i)) for k, v in cases.items()
    }
    parser = _parser()
    joined = cases["joined"].encode()
    result["parse_ms"] = _median_ms(lambda i: parser.parse(joined + f"\ntrue {i}".encode()))
    result["joined_vs_parse"] = round(result["joined_ms"] / result["parse_ms"], 2)
    result["min_line_bytes"] = min(len(v.encode()) for v in cases.values())
    result["met"] = result["long_argument_ms"] <= 3 and result["heredoc_ms"] <= 3
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
