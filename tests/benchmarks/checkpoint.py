"""Checkpoint benchmark (issue 13; docs/checkpoints.md "Cost"): `python -m tests.benchmarks.checkpoint` prints
one JSON line.

A session is created in-process on a workspace of 100,000 files in 100 folders (the search benchmark's tree),
and its own Checkpointer takes the checkpoints, exactly as a turn does before a prompt and before a
`run_command` (`Session.checkpointer.take`: the walk in a worker thread, the pack, the `checkpoint` record).
- `first_ms`: the session's first checkpoint (every file read, hashed and stored).
- `incremental_ms`: the median of 7 checkpoints, each after 3 files were changed (new bytes, same size or
  not); on Linux the walk looks only where inotify saw a change.
- `ratio`: `incremental_ms / first_ms`. Targets: `incremental_ms` <= 1,500 and `ratio` <= 0.05 (1/20).
- `store_bytes`: the session's checkpoint store on disk after all of them (packs of compressed objects).
- For information, `incremental_stat_ms`: the same incremental checkpoint when agentd has no watcher (macOS,
  inotify out of watches, the first checkpoint after a restart): every file is stat'ed, only the changed
  ones are read.
Every checkpoint's `changed` count is checked against what the benchmark changed, so a fast wrong answer
fails. HOME and the config dir point into the temporary folder, which is deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS = 7
CHANGED = 3
TARGET_MS, TARGET_RATIO = 1500.0, 0.05


def _isolate(tmp: Path) -> None:
    home = tmp / "home"
    (home / ".config").mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(home)
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")


def _change(files: list[Path], rng: random.Random, n: int) -> set[str]:
    picked = rng.sample(files, n)
    for p in picked:
        p.write_text(p.read_text() + f"# edited {rng.random()}\n")
    return {str(p) for p in picked}


async def _take(session: Any, before: str) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    record = await session.checkpointer.take(before)
    ms = (time.perf_counter() - t0) * 1000
    if record is None or record.get("error"):
        raise RuntimeError(f"the checkpoint failed: {record}")
    return ms, record


async def measure(root: Path, data: Path) -> dict[str, Any]:
    from agentd.config import Settings
    from agentd.core.factory import create_session
    from agentd.permissions.approver import QueueApprover
    from agentd.persistence.paths import DataDir
    from agentd.providers.scripted import ScriptedProvider

    session = create_session(cwd=root, settings=Settings(), provider=ScriptedProvider({"answers": []}),
                             data_dir=DataDir(data), approver=QueueApprover.of(), lines=lambda _l: None)  # fmt: skip
    try:
        files = sorted(root.rglob("*.py"))
        rng = random.Random(1)
        first_ms, first = await _take(session, "prompt")
        if first["files"] != len(files):
            raise RuntimeError(f"the first checkpoint covers {first['files']} files, not {len(files)}")
        incremental, stat_walk = [], []
        for i in range(2 * RUNS):
            _change(files, rng, CHANGED)
            no_watcher = i % 2 == 1  # interleaved, so both see the same machine
            if no_watcher:
                session.checkpointer.forget()  # as after a restart: the next walk stats everything
            ms, rec = await _take(session, "run_command")
            if len(rec["changed"]) != CHANGED:
                raise RuntimeError(f"checkpoint {rec['id']} saw {rec['changed']}, not {CHANGED} changes")
            (stat_walk if no_watcher else incremental).append(ms)
    finally:
        session.close()
    store_bytes = sum(p.stat().st_size for p in (data / "sessions" / session.id / "checkpoints").rglob("*")
                      if p.is_file())  # fmt: skip
    inc = statistics.median(incremental)
    return {
        "first_ms": round(first_ms, 1),
        "incremental_ms": round(inc, 1),
        "ratio": round(inc / first_ms, 4),
        "store_bytes": store_bytes,
        "files": len(files),
        "changed": CHANGED,
        "incremental_stat_ms": round(statistics.median(stat_walk), 1),
        "tree_bytes": sum(p.stat().st_size for p in files),
    }


def main(argv: list[str] | None = None) -> int:
    from tests.benchmarks.search import FILES, make_tree

    p = argparse.ArgumentParser(prog="python -m tests.benchmarks.checkpoint")
    p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="agentd-bench-checkpoint-"))
    try:
        _isolate(tmp)
        root = tmp / "tree"
        t0 = time.perf_counter()
        make_tree(root)
        sys.stderr.write(f"[bench] wrote {FILES} files in {time.perf_counter() - t0:.1f} s\n")
        (tmp / "data").mkdir(mode=0o700)
        result = asyncio.run(measure(root, tmp / "data"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["met"] = result["incremental_ms"] <= TARGET_MS and result["ratio"] <= TARGET_RATIO
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
