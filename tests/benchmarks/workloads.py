"""The cost benchmark's workloads (issue 15): each generated from a seed and a declared shape, committed as data.

`python -m tests.benchmarks.workloads` regenerates `tests/benchmarks/workloads/<name>.json` from `SHAPES`; the
unit tier checks that the committed files are exactly what the generator makes (tests/unit/test_cost_workloads.py).
A workload is a script for the emulator and the benchmark's user, never a copy of agentd's logic:

- `files`: the workspace (path, bytes); their text is made by `file_text(seed, path, bytes)` when the benchmark
  builds the workspace (`materialize`), so the JSON stays small. Source files carry unique `# anchor <n>` lines
  that the scripted edits replace (an edit the real `edit_file` tool must apply). `AGENTS.md` is a file like the
  others: the product loads it (or not) as it loads project instructions.
- `turns`: per turn, `pause_s` (the user's think time before the prompt, on the fake clock), the `prompt`, and
  the model's `replies` in order (the emulator's answers: text and tool_use blocks, the last one text only).
  Tool outputs are not in the script: the product's real tools produce them from the workspace.
- `resume`: for the `resumed` shape, the turn before which the daemon exits, `resume_pause_s` pass, and a new
  daemon loads the session.
- `model`, `settings` (agentd configuration for every run of the workload, e.g. the seed's compression threshold).

Randomness: one `random.Random(f"{name}:{seed}")` per workload, consumed in a fixed order; sizes are log-normal
around the shape's median, clipped to its range; pauses are log-uniform over the shape's range.
"""

from __future__ import annotations

import json
import math
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DIR = Path(__file__).parent / "workloads"
WORDS = (
    "parser token buffer index config cache session record loader handler request reply stream limit retry "
    "window budget anchor block prefix summary review module schema option result error path value entry"
).split()


@dataclass(frozen=True)
class Shape:
    """What a workload looks like; every figure is a declared input of the generator."""

    name: str
    seed: int
    turns: int
    steps_per_turn: tuple[int, int]  # replies with tool calls per turn (min, max), uniform
    calls_per_step: tuple[int, int]  # tool calls per reply (min, max), uniform
    output_bytes: tuple[int, int, int]  # tool output size: (min, median, max), log-normal
    pause_s: tuple[float, float]  # user think time before each prompt (min, max), log-uniform
    model: str = "claude-sonnet-4-5"
    agents_md_bytes: int = 1800  # project instructions at the workspace root
    resume_before: int | None = None  # turn index: the session is resumed before it
    resume_pause_s: float = 86_400.0
    settings: dict[str, Any] = field(default_factory=dict)
    note: str = ""


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("interactive", 1501, 8, (0, 3), (1, 1), (200, 1200, 8000), (20.0, 240.0),
              note="8 turns, user pauses of 20 s to 4 min, a few tool calls"),
        Shape("agentic", 1502, 40, (1, 8), (1, 1), (250, 2000, 16000), (3.0, 3600.0),
              note="40 turns, about 180 tool calls, pauses from seconds to an hour"),
        Shape("heavy", 1503, 60, (1, 8), (1, 1), (750, 6000, 48000), (3.0, 3600.0),
              note="the agentic shape, 60 turns, tool outputs 3x larger: several compressions"),
        Shape("parallel", 1504, 20, (1, 4), (2, 5), (250, 1500, 12000), (10.0, 1200.0),
              note="replies with 2 to 5 tool calls"),
        Shape("resumed", 1505, 22, (1, 6), (1, 2), (250, 2000, 16000), (3.0, 1800.0), resume_before=12,
              note="12 turns, then the session is resumed after a day, then 10 turns"),
        Shape("seed-article", 1506, 14, (1, 3), (1, 1), (300, 1500, 6000), (20.0, 600.0),
              model="claude-opus-4-5", agents_md_bytes=16_300,
              settings={"context": {"compressThresholdTokens": 12000}},
              note="the seed's numbers: a 4,600-token system (AGENTS.md), compression at 12,000 tokens"),
    )
}  # fmt: skip


# ---- file contents -------------------------------------------------------------------------------------------
def file_text(seed: int, path: str, size: int) -> str:
    """Deterministic text of about `size` bytes for `path`: code-like lines for sources (with `# anchor <n>`
    lines every 12 lines), log-like lines for `logs/`, prose for Markdown."""
    rng = random.Random(f"{seed}:{path}")
    lines: list[str] = []
    total, n = 0, 0
    while total < size:
        if path.startswith("logs/"):
            line = f"[{n:05d}] {rng.choice(('PASS', 'PASS', 'PASS', 'FAIL', 'SKIP'))} tests/test_{rng.choice(WORDS)}.py::test_{rng.choice(WORDS)}_{rng.randint(1, 99)}"
        elif path.endswith(".md"):
            line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))).capitalize() + "."
        elif n % 12 == 0:
            line = f"# anchor {n // 12}"
        else:
            a, b, c = (rng.choice(WORDS) for _ in range(3))
            line = (
                f"def {a}_{b}_{n}(value):  return {c}_{rng.randint(1, 999)}(value) + {rng.randint(0, 9999)}"
            )
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines) + "\n"


def materialize(workload: dict[str, Any], root: Path) -> None:
    """Write the workload's workspace into `root` (which must exist)."""
    for f in workload["files"]:
        path = root / f["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(file_text(workload["seed"], f["path"], f["bytes"]), encoding="utf-8")


# ---- the generator -----------------------------------------------------------------------------------------------
class _Gen:
    def __init__(self, shape: Shape) -> None:
        self.s = shape
        self.rng = random.Random(f"{shape.name}:{shape.seed}")
        self.files: list[dict[str, Any]] = []
        self.anchors: dict[str, list[int]] = {}  # source path -> anchors not yet edited
        self.todos: list[dict[str, str]] = []
        self.written = 0

    def size(self) -> int:
        lo, median, hi = self.s.output_bytes
        return int(min(hi, max(lo, median * math.exp(self.rng.gauss(0.0, 0.9)))))

    def words(self, lo: int, hi: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(lo, hi)))

    def new_file(self, folder: str, ext: str) -> str:
        path = f"{folder}/{self.rng.choice(WORDS)}_{len(self.files):03d}.{ext}"
        size = self.size()
        self.files.append({"path": path, "bytes": size})
        if ext == "py":
            text = file_text(self.s.seed, path, size)
            self.anchors[path] = [k for k in range(text.count("# anchor ")) if f"# anchor {k}\n" in text]
        return path

    def call(self) -> dict[str, Any]:
        kind = self.rng.choices(
            ["read_file", "run_command", "edit_file", "list_dir", "write_file", "todo_write"],
            weights=[44, 20, 14, 5, 5, 12],
        )[0]
        editable = [p for p, left in self.anchors.items() if left]
        if kind == "edit_file" and editable:
            path = self.rng.choice(editable)
            k = self.anchors[path].pop(0)
            new = f"# anchor {k}\ndef {self.words(1, 1)}_fix_{k}(value):  return value  # {self.words(3, 8)}"
            return _use(
                "edit_file", {"path": path, "old_string": f"# anchor {k}\n", "new_string": new + "\n"}
            )
        if kind == "list_dir":
            return _use("list_dir", {"path": "src"})
        if kind == "write_file":
            self.written += 1
            body = file_text(self.s.seed, f"written/{self.written}.py", self.size() // 3)
            return _use("write_file", {"path": f"src/added_{self.written}.py", "content": body})
        if kind == "todo_write":
            return _use("todo_write", {"todos": self.plan()})
        if kind == "run_command":
            return _use("run_command", {"command": f"cat {self.new_file('logs', 'log')}"})
        return _use("read_file", {"path": self.new_file("src", "py")})

    def plan(self) -> list[dict[str, str]]:
        if not self.todos or all(t["status"] == "done" for t in self.todos):
            self.todos = [
                {"content": self.words(3, 7), "status": "pending"} for _ in range(self.rng.randint(2, 5))
            ]
        for t in self.todos:  # one step forward: finish the current item, start the next
            if t["status"] == "in_progress":
                t["status"] = "done"
                break
        nxt = next((t for t in self.todos if t["status"] == "pending"), None)
        if nxt is not None:
            nxt["status"] = "in_progress"
        return [dict(t) for t in self.todos]

    def turn(self, k: int) -> dict[str, Any]:
        lo, hi = self.s.pause_s
        pause = round(math.exp(self.rng.uniform(math.log(lo), math.log(hi))), 1)
        replies: list[list[dict[str, Any]]] = []
        for _ in range(self.rng.randint(*self.s.steps_per_turn)):
            calls = [self.call() for _ in range(self.rng.randint(*self.s.calls_per_step))]
            lead = [{"text": self.words(6, 30).capitalize() + "."}] if self.rng.random() < 0.7 else []
            replies.append(lead + calls)
        replies.append([{"text": self.words(30, 160).capitalize() + "."}])
        return {"pause_s": pause, "prompt": f"Turn {k}: " + self.words(8, 60) + ".", "replies": replies}


def _use(name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": input}}


def generate(shape: Shape) -> dict[str, Any]:
    """The workload of `shape`: a JSON-ready dict (module docstring)."""
    g = _Gen(shape)
    if shape.agents_md_bytes:
        g.files.append({"path": "AGENTS.md", "bytes": shape.agents_md_bytes})
    turns = [g.turn(k) for k in range(shape.turns)]
    resume = (
        None
        if shape.resume_before is None
        else {"before": shape.resume_before, "pause_s": shape.resume_pause_s}
    )
    workload = {
        "name": shape.name,
        "seed": shape.seed,
        "shape": {k: v for k, v in asdict(shape).items() if k not in ("name", "seed")},
        "model": shape.model,
        "settings": shape.settings,
        "files": g.files,
        "turns": turns,
        "resume": resume,
    }
    return dict(json.loads(json.dumps(workload)))  # JSON types only (tuples become lists), as committed


def dumps(workload: dict[str, Any]) -> str:
    """The committed form: stable key order, one turn per line."""
    head = {k: v for k, v in workload.items() if k != "turns"}
    lines = json.dumps(head, sort_keys=True, ensure_ascii=False)[:-1] + ', "turns": [\n'
    lines += ",\n".join(json.dumps(t, sort_keys=True, ensure_ascii=False) for t in workload["turns"])
    return lines + "\n]}\n"


def load(name: str) -> dict[str, Any]:
    """The committed workload `name`."""
    data: dict[str, Any] = json.loads((DIR / f"{name}.json").read_text(encoding="utf-8"))
    return data


def main() -> int:
    DIR.mkdir(exist_ok=True)
    for shape in SHAPES.values():
        w = generate(shape)
        (DIR / f"{shape.name}.json").write_text(dumps(w), encoding="utf-8")
        calls = sum(len([b for b in r if "tool_use" in b]) for t in w["turns"] for r in t["replies"])
        sys.stdout.write(
            f"{shape.name}: {len(w['turns'])} turns, {calls} tool calls, {len(w['files'])} files\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
