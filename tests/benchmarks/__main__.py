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
  that fails publishes nothing: the file is left as it was and the exit code is 1. `--only NAME[,NAME]` runs
  those modules only; with `--write`, their sections (each between `<!-- bench:NAME:begin -->` and
  `<!-- bench:NAME:end -->`, with its own commit and date) are replaced and the others kept as they were.
  A result's nested table (a key whose value maps row names to rows of figures, such as the cost
  benchmark's `workloads`) is rendered as a Markdown table.
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
MODULES = (
    "cost",
    "store",
    "daemon",
    "search",
    "checkpoint",
    "rules",
)  # run in this order, when tests/benchmarks/<name>.py exists
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
TARGETS: dict[str, dict[str, str]] = {  # TESTING.md §5 table: key -> target, per module
    "cost": {
        "worst_bill_ratio_vs_lower_bound": "<= 1.10 (goal 1.05)",
        "worst_auto_vs_best_fixed": "<= 1.03",
    },
    "store": {"append_ratio": "<= 1.5", "resume_ratio": "<= 3"},
    "daemon": {
        "initialize_ms": "goal <= 500",
        "loop_cpu_ratio": "<= 3",
        "big_resume_ms": "<= 1000",
        "big_resume_peak_mib": "<= 64",
        "big_load_bytes": "<= 2097152 (2 MiB)",
    },
    "search": {"ratio": "< 2"},
    "checkpoint": {"incremental_ms": "<= 1500", "ratio": "<= 0.05 (1/20)"},
    "rules": {"long_argument_ms": "<= 3", "heredoc_ms": "<= 3"},
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


def _env_lines(when: datetime, dirty: bool, load: float | None = None) -> list[str]:
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    if dirty:
        commit += " (with uncommitted changes)"
    return [
        f"- commit: `{commit}`",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}",
        f"- date: {when.strftime('%Y-%m-%d %H:%M UTC')}",
        *([f"- load average (1 min) when the run started: {load:.2f} (absolute times scale with it; ratios less)"]
          if load is not None else []),
    ]  # fmt: skip


def _table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """A Markdown table: one line per row name, one column per key (the union, in first-seen order)."""
    columns = list(dict.fromkeys(k for row in rows.values() for k in row))
    out = ["| | " + " | ".join(f"`{c}`" for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    out += [f"| `{n}` | " + " | ".join(_fmt(r.get(c, "")) for c in columns) + " |" for n, r in rows.items()]
    return out


def _is_table(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, dict) for v in value.values())


def section(
    name: str, result: dict[str, Any], when: datetime, dirty: bool = False, load: float | None = None
) -> str:
    """One module's section: its environment, its figures with their targets, its tables, its JSON line."""
    targets = TARGETS.get(name, {})
    out = [
        f"<!-- bench:{name}:begin -->",
        f"### `tests.benchmarks.{name}`",
        "",
        *_env_lines(when, dirty, load),
        "",
    ]
    out += ["| Key | Value | Target |", "|---|---|---|"]
    for key, value in result.items():
        if key in ("module", "targets", "met") or isinstance(value, dict | list):
            continue  # nested figures: tables below, and the JSON line
        out.append(f"| `{key}` | {_fmt(value)} | {targets.get(key, '')} |")
    if isinstance(result.get("targets"), dict):
        met = result.get("met") or {}
        out += ["", "| Target | | Met |", "|---|---|---|"]
        out += [f"| `{k}` | {t} | {_fmt(met.get(k, ''))} |" for k, t in result["targets"].items()]
    for key, value in result.items():
        if _is_table(value):
            out += ["", f"`{key}`:", "", *_table(value)]
    out += ["", "```json", json.dumps(result, separators=(",", ":")), "```", f"<!-- bench:{name}:end -->"]
    return "\n".join(out)


def sections_of(text: str) -> dict[str, str]:
    """The module sections already in a file's block, by module name. A block written before sections had
    markers (one header, then `### tests.benchmarks.NAME` headings) is read too: each of its modules becomes
    a section carrying that header's commit, date and load lines."""
    found = re.finditer(r"<!-- bench:([\w-]+):begin -->.*?<!-- bench:\1:end -->", text, re.S)
    sections = {m.group(1): m.group(0) for m in found}
    block = re.search(re.escape(BEGIN) + r"(.*?)" + re.escape(END), text, re.S)
    if sections or block is None:
        return sections
    head, *parts = re.split(r"^(?=### `tests\.benchmarks\.)", block.group(1), flags=re.M)
    env = [ln for ln in head.splitlines() if ln.startswith("- ")]
    for part in parts:
        title, _, body = part.partition("\n")
        name = title.removeprefix("### `tests.benchmarks.").rstrip("`")
        lines = [
            f"<!-- bench:{name}:begin -->",
            title,
            "",
            *env,
            "",
            body.strip("\n"),
            f"<!-- bench:{name}:end -->",
        ]
        sections[name] = "\n".join(lines)
    return sections


def render(
    results: dict[str, dict[str, Any]],
    when: datetime,
    dirty: bool = False,
    keep: dict[str, str] | None = None,
    load: float | None = None,
) -> str:
    """The Markdown block that goes between the markers: a header, then one section per module (fresh ones
    from `results`, the others from `keep`), in MODULES order."""
    out = [
        BEGIN,
        "",
        "Reproduce with `python -m tests.benchmarks all --write docs/benchmarks.md` "
        "(some modules: `--only cost,store`; one module alone: `python -m tests.benchmarks.<name>`). "
        "Last written:",
        "",
        *_env_lines(when, dirty, load),
        "",
    ]
    kept = keep or {}
    for name in [*MODULES, *(n for n in results if n not in MODULES)]:
        if name in results:
            out += [section(name, results[name], when, dirty, load), ""]
        elif name in kept:
            out += [kept[name], ""]
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
    p.add_argument("--only", metavar="NAMES", help="comma-separated modules to run (default: all)")
    a = p.parse_args(argv)
    only = [n for n in (a.only or "").split(",") if n]
    unknown = [n for n in only if n not in MODULES]
    if unknown:
        p.error(f"unknown module(s) {unknown}; known: {', '.join(MODULES)}")
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
    present = [m for m in MODULES if (Path(__file__).parent / f"{m}.py").exists() and (not only or m in only)]
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
        target = Path(a.write)
        keep = sections_of(target.read_text(encoding="utf-8")) if target.exists() else {}
        write_block(target, render(results, datetime.now(UTC), dirty=bool(dirty), keep=keep, load=load))
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
