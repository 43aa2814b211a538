"""Generate `tests/benchmarks/sessions/long-reference.json`, the reference long coding session (TESTING.md §5.1).

Run once: `python -m tests.benchmarks.gen_reference`. The committed JSON is the reference; this generator only
documents how it was made (fixed seed). Shape: a project-instructions system prompt so that system + tools are
about 3,000 emulator tokens; about 40 user turns with 1-8 tool rounds each; tool results of 0.5-20 KB
(reads, edits, list_dir, run_command output) with a todo_write every few rounds; clock gaps of 2-40 s inside a
turn and 30 s-15 min between turns; an uncompressed peak below 200,000 tokens.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

OUT = Path(__file__).parent / "sessions" / "long-reference.json"
SEED = 20261129
WORDS = (
    "def return import class self value config parser token buffer request response session cache index "
    "module handler error retry test assert fixture path file line column offset limit stream chunk event "
    "update client server payload schema field model record store append replay lock compact summary"
).split()


def _code(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    n = 0
    while n < size:
        indent = "    " * rng.randint(0, 3)
        line = indent + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 11)))
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)[:size]


def _size(rng: random.Random) -> int:
    """0.5-20 KB, log-uniform: most outputs are small, a few are large."""
    return int(math.exp(rng.uniform(math.log(500), math.log(20_000))))


def _round(rng: random.Random, r: int, files: list[str]) -> dict[str, object]:
    kind = rng.choices(["read_file", "edit_file", "list_dir", "run_command"], [5, 2, 1, 2])[0]
    path = rng.choice(files)
    if kind == "read_file":
        call = {"name": "read_file", "input": {"path": path}}
        result = _code(rng, _size(rng))
    elif kind == "edit_file":
        old = _code(rng, rng.randint(40, 300))
        call = {
            "name": "edit_file",
            "input": {"path": path, "old_string": old, "new_string": old + "\n# fixed"},
        }
        result = f"Edited {path}: 1 replacement.\n" + _code(rng, _size(rng) // 4)
    elif kind == "list_dir":
        call = {"name": "list_dir", "input": {"path": path.rsplit("/", 1)[0]}}
        result = "\n".join(rng.choice(files) for _ in range(rng.randint(10, 80)))
    else:
        call = {
            "name": "run_command",
            "input": {"command": rng.choice(["pytest -q", "ruff check .", "git diff"])},
        }
        result = _code(rng, _size(rng)) + f"\n[exit code {rng.choice([0, 0, 1])}]"
    text = rng.choice(["", "", "Let me look at that.", "Checking the tests next.", "Now the fix."])
    return {"text": text, "tool": call, "result": result, "gap_s": rng.randint(2, 40)}


def generate() -> dict[str, object]:
    rng = random.Random(SEED)
    files = [f"src/pkg/{rng.choice(WORDS)}_{i}.py" for i in range(30)] + ["README.md", "tests/test_core.py"]
    instructions = "\n".join(
        f"- {' '.join(rng.choice(WORDS) for _ in range(rng.randint(8, 16)))}." for _ in range(120)
    )
    turns = []
    for t in range(40):
        rounds = [_round(rng, r, files) for r in range(rng.randint(1, 8))]
        if t % 3 == 0 or len(rounds) > 4:
            todos = [
                {
                    "content": f"step {k} of task {t}: {rng.choice(WORDS)} {rng.choice(WORDS)}",
                    "status": rng.choice(["pending", "in_progress", "done"]),
                }
                for k in range(rng.randint(3, 8))
            ]
            snapshot = json.dumps({"todos": todos}, ensure_ascii=True, separators=(",", ":"))
            rounds.insert(
                rng.randint(0, len(rounds)),
                {
                    "text": "",
                    "tool": {"name": "todo_write", "input": {"todos": todos}},
                    "result": snapshot,
                    "gap_s": rng.randint(2, 10),
                },
            )
        turns.append(
            {
                "prompt": f"Task {t}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))),
                "rounds": rounds,
                "final": "Done: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))),
                "think_s": rng.choice([rng.randint(30, 240), rng.randint(30, 240), rng.randint(300, 900)]),
            }
        )
    return {"seed": SEED, "project_instructions": instructions, "turns": turns}


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(generate(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
