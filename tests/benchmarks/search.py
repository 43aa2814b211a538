"""Search benchmark (issue 11): `python -m tests.benchmarks.search` prints one JSON line.

- `grep_ms`: median wall time of agentd's `grep` tool (`agentd.tools.search.Grep`, validated, checked and
  run as the loop runs it: containment, the pinned folder, ripgrep, parsing, sorting, the page) for one
  query over a generated 100,000-file tree.
- `rg_ms`: median wall time of a bare `rg PATTERN` (the same ripgrep binary, default flags, output to a
  pipe that is read to the end) on the same tree and query.
- `ratio` = `grep_ms / rg_ms`. Target < 2.

Runs alternate between the two (7 each after one warm-up of each, so both see a warm page cache). The main
query is an identifier planted in 1 % of the files (1,000 files, 2,000 matching lines). For information,
`heavy_*` repeat the measure for a query matching 100,000 lines (one in every file), where parsing and
sorting all results costs more than the page shown.

The tree (100 folders x 1,000 files of about 600 bytes of Python-like text, seeded) is written to a
temporary folder and deleted afterwards; `--tree DIR` keeps and reuses it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentd.tools import ripgrep
from agentd.tools.base import PathRefused, ToolContext, ToolOutput
from agentd.tools.search import Grep

FILES, FOLDERS = 100_000, 100
QUERY, HEAVY = "handle_checkout_total", "def run_[0-9]+"
RUNS = 7


def make_tree(root: Path, seed: int = 1) -> None:
    """100 folders of 1,000 files; 1 % of the files use `handle_checkout_total` twice."""
    rng = random.Random(seed)
    words = ["order", "cart", "user", "price", "item", "stock", "ship", "tax", "coupon", "audit"]
    per = FILES // FOLDERS
    for d in range(FOLDERS):
        folder = root / f"pkg{d:03}"
        folder.mkdir(parents=True)
        for f in range(per):
            n = d * per + f
            body = [f"# module {n}", "import os", ""]
            for k in range(6):
                a, b = rng.choice(words), rng.choice(words)
                body.append(f"def {a}_{b}_{k}(x):\n    return x + {rng.randint(0, 999)}")
            body.append(f"def run_{n}():\n    return {rng.choice(words)}_{rng.choice(words)}_0(1)")
            if n % 100 == 7:
                body.append(f"def {QUERY}(cart):\n    return {QUERY}(cart.items)")
            (folder / f"mod_{f:04}.py").write_text("\n".join(body) + "\n", encoding="utf-8")


async def _grep(ctx: ToolContext, pattern: str) -> ToolOutput:
    tool = Grep()
    args, err = tool.validate({"pattern": pattern}, ctx)
    if args is None:
        raise RuntimeError(err)
    try:
        tool.check(args, ctx)
    except PathRefused as exc:
        raise RuntimeError(exc.text()) from None
    return await tool.run(args, ctx)


def _time_grep(ctx: ToolContext, pattern: str) -> tuple[float, ToolOutput]:
    t0 = time.perf_counter()
    out = asyncio.run(_grep(ctx, pattern))
    return (time.perf_counter() - t0) * 1000, out


def _time_rg(rg: str, root: Path, pattern: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [rg, pattern], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    ms = (time.perf_counter() - t0) * 1000
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"rg exited {proc.returncode}")
    return ms, proc.stdout.count(b"\n")


def measure(root: Path, pattern: str) -> dict[str, Any]:
    """Medians of `RUNS` interleaved runs of the grep tool and of bare rg, after one warm-up of each."""
    rg = ripgrep.find_rg()
    ctx = ToolContext(root=root.resolve())
    _time_grep(ctx, pattern)
    _time_rg(rg, root, pattern)
    grep_ms, rg_ms = [], []
    out: ToolOutput | None = None
    lines = 0
    for _ in range(RUNS):
        ms, out = _time_grep(ctx, pattern)
        grep_ms.append(ms)
        ms, lines = _time_rg(rg, root, pattern)
        rg_ms.append(ms)
    assert out is not None and not out.is_error, out
    g, r = statistics.median(grep_ms), statistics.median(rg_ms)
    matches = (out.raw_output or {}).get("matches")
    if matches != lines:
        raise RuntimeError(f"grep counted {matches} matches, rg printed {lines} lines")
    return {"grep_ms": round(g, 1), "rg_ms": round(r, 1), "ratio": round(g / r, 3), "matches": lines}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks.search")
    p.add_argument("--tree", help="generate the tree here once and reuse it (default: a temporary folder)")
    a = p.parse_args(argv)
    root = Path(a.tree) if a.tree else Path(tempfile.mkdtemp(prefix="agentd-bench-search-")) / "tree"
    try:
        if not root.exists():
            t0 = time.perf_counter()
            make_tree(root)
            sys.stderr.write(f"[bench] wrote {FILES} files in {time.perf_counter() - t0:.1f} s\n")
        main_q = measure(root, QUERY)
        heavy = measure(root, HEAVY)
    finally:
        if not a.tree:
            shutil.rmtree(root.parent, ignore_errors=True)
    result: dict[str, Any] = {
        **{k: main_q[k] for k in ("grep_ms", "rg_ms", "ratio", "matches")},
        "files": FILES,
        "query": QUERY,
        "heavy_query": HEAVY,
        **{f"heavy_{k}": v for k, v in heavy.items()},
        "met": main_q["ratio"] < 2,
    }
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
