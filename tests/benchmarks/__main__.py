"""`python -m tests.benchmarks gen-session | all` (TESTING.md §5).

- `gen-session --messages N --seed S [--data-dir D]`: write a generated session (tests/benchmarks/gen.py)
  into D (default: a new temporary folder) and print `{"dataDir", "sessionId", "messages", "records",
  "bytes"}` as one JSON line.
- `all [--write FILE [--allow-dirty]]`: run every benchmark module present (`tests.benchmarks.<name>` for
  the names in MODULES), each as its own process, and collect the one JSON line each prints. With `--write`,
  rewrite the block between `<!-- bench:begin -->` and `<!-- bench:end -->` of FILE (appended when missing)
  with the results, the reproducing command, the commit, the Python version, the CPU count, the date and the
  load average when the run started (a busy machine slows every absolute time).
  Published figures come from a committed tree (issue 9 H17): `--write` refuses, before running anything
  (exit 2), when the work tree has changes other than FILE itself (`git status --porcelain`, untracked
  files included); `--allow-dirty` runs anyway and marks the commit `(with uncommitted changes)`. A module
  that fails publishes nothing: the file is left as it was and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("cost", "store", "daemon", "search")  # run in this order, when tests/benchmarks/<name>.py exists
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
TARGETS: dict[str, dict[str, str]] = {  # TESTING.md §5 table: key -> target, per module
    "cost": {
        "cache_read_share": ">= 0.85",
        "bill_ratio_vs_seed_cache": "<= 0.30",
        "bill_ratio_vs_lower_bound": "<= 1.25",
    },
    "store": {"append_ratio": "<= 1.5", "resume_ratio": "<= 3"},
    "daemon": {"initialize_ms": "goal <= 500"},
    "search": {"ratio": "< 2"},
}


def gen_session(argv: list[str]) -> int:
    from tests.benchmarks.gen import generate

    p = argparse.ArgumentParser(prog="python -m tests.benchmarks gen-session")
    p.add_argument("--messages", type=int, required=True, help="number of message records")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", help="the data dir to write into (default: a new temporary folder)")
    a = p.parse_args(argv)
    data_dir = Path(a.data_dir) if a.data_dir else Path(tempfile.mkdtemp(prefix="agentd-bench-"))
    sid = generate(data_dir, messages=a.messages, seed=a.seed)
    log = data_dir / "sessions" / sid / "log.jsonl"
    out = {
        "dataDir": str(data_dir),
        "sessionId": sid,
        "messages": a.messages,
        "records": len(log.read_bytes().splitlines()),
        "bytes": log.stat().st_size,
    }
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def _run_module(name: str) -> dict[str, Any]:
    """Run `python -m tests.benchmarks.<name>` and return its JSON line; raises RuntimeError on failure."""
    proc = subprocess.run(
        [sys.executable, "-m", f"tests.benchmarks.{name}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"tests.benchmarks.{name} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except OSError:
        return ""


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def uncommitted_changes(exclude: Path | None = None) -> list[str]:
    """`git status --porcelain` lines of the work tree (untracked files included), without `exclude`."""
    skip = str(exclude.resolve().relative_to(ROOT.resolve())) if exclude is not None else None
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=ROOT, capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ["(not a git work tree: the commit cannot be recorded)"]
    return [ln for ln in out.splitlines() if ln[3:].strip('"') != skip]


def render(
    results: dict[str, dict[str, Any]], when: datetime, dirty: bool = False, load: float | None = None
) -> str:
    """The Markdown block that goes between the markers."""
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    if dirty:
        commit += " (with uncommitted changes)"
    out = [
        BEGIN,
        "",
        "Reproduce with `python -m tests.benchmarks all --write docs/benchmarks.md` "
        "(one module: `python -m tests.benchmarks.<name>`).",
        "",
        f"- commit: `{commit}`",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}",
        f"- date: {when.strftime('%Y-%m-%d %H:%M UTC')}",
        *(
            [
                f"- load average (1 min) when the run started: {load:.2f} (absolute times scale with it; ratios less)"
            ]
            if load is not None
            else []
        ),
        "",
    ]
    for name, result in results.items():
        targets = TARGETS.get(name, {})
        out += [f"### `tests.benchmarks.{name}`", "", "| Key | Value | Target |", "|---|---|---|"]
        for key, value in result.items():
            if key in ("module", "targets", "met") or isinstance(value, dict | list):
                continue  # nested figures are in the JSON line below the table
            out.append(f"| `{key}` | {_fmt(value)} | {targets.get(key, '')} |")
        out += ["", "```json", json.dumps(result, separators=(",", ":")), "```", ""]
    out.append(END)
    return "\n".join(out)


def write_block(path: Path, block: str) -> None:
    """Replace the marked block of `path` (or append it, or create the file) with `block`."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")


def run_all(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks all")
    p.add_argument(
        "--write", metavar="FILE", help="rewrite the bench block of FILE (e.g. docs/benchmarks.md)"
    )
    p.add_argument(
        "--allow-dirty", action="store_true", help="with --write: publish from uncommitted changes, marked so"
    )
    a = p.parse_args(argv)
    dirty = uncommitted_changes(Path(a.write)) if a.write else []
    if dirty and not a.allow_dirty:
        sys.stderr.write(
            "[bench] refusing to --write from a tree with uncommitted changes (docs/benchmarks.md must come "
            "from a commit):\n"
            + "\n".join(f"  {ln}" for ln in dirty[:20])
            + "\n[bench] commit or stash them, "
            "or pass --allow-dirty to publish figures marked '(with uncommitted changes)'\n"
        )
        return 2
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    present = [m for m in MODULES if (Path(__file__).parent / f"{m}.py").exists()]
    results: dict[str, dict[str, Any]] = {}
    for name in present:
        sys.stderr.write(f"[bench] tests.benchmarks.{name} ...\n")
        try:
            results[name] = _run_module(name)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            sys.stderr.write(f"[bench] {exc}\n[bench] nothing written\n")
            return 1
        sys.stdout.write(json.dumps(results[name], separators=(",", ":")) + "\n")
    if a.write:
        write_block(Path(a.write), render(results, datetime.now(UTC), dirty=bool(dirty), load=load))
        sys.stderr.write(f"[bench] wrote {a.write}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    commands = {"gen-session": gen_session, "all": run_all}
    if not args or args[0] not in commands:
        sys.stderr.write("usage: python -m tests.benchmarks {gen-session,all} ...\n")
        return 2
    return commands[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
