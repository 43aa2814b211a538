"""Store benchmark (TESTING.md §5.2): `python -m tests.benchmarks.store` prints one JSON line.

- `append_ratio`: median time to append one record, with its fsync, to the log of a 10,000-message session
  ÷ the same for a 100-message session. Appends alternate between the two logs, so both see the same
  machine. Target <= 1.5 (an append must not depend on the log's size).
- `resume_ratio`: median of runs 2-7 of 7 in-process resumes of the 10,000-message session
  (`agentd.core.factory.open_session`: lock, read, torn-tail check, replay, repair check, validator; then
  `close`) ÷ the median (runs 2-7 of 7, interleaved with the resumes) of `json.loads` of every line of the
  same file, read from disk, into the list of records (a replay needs them all at once, so the baseline
  keeps them too: holding 27,000 records costs allocation and collector passes that a loop discarding each
  object never pays). Target <= 3 (a resume costs a small constant times parsing the log).
  For information, `resume_ratio_vs_discarding_loads` divides by a loop that drops each parsed object.

Both sessions are generated with `tests.benchmarks.gen` (seed 1) in a temporary data dir that is deleted
afterwards. Absolute medians are printed beside the ratios; compare ratios, not absolute times, across runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentd.config import Settings
from agentd.core.factory import open_session
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.persistence.store import SessionStore
from agentd.providers.scripted import ScriptedProvider
from tests.benchmarks.gen import generate

TARGETS = {"append_ratio": 1.5, "resume_ratio": 3.0}


def _record(i: int) -> dict[str, Any]:
    """A typical appended record: one tool_result message of about 1 KB."""
    text = "\n".join(f"{n:>6}\tdef handler_{i}_{n}(request): return render(request.value)" for n in range(16))
    block = {"type": "tool_result", "tool_use_id": f"toolu_bench_{i:06d}", "content": text}
    return {"messageId": f"msg_bench_{i:010d}", "message": {"role": "user", "content": [block]}}


def _timed(fn: Any) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_resume(data_dir: Path, sid: str, runs: int) -> tuple[list[float], list[float], list[float]]:
    """(resume times, parse-every-line times, parse-and-discard times), `runs` of each, interleaved."""
    dd = DataDir(data_dir)
    log_path = dd.log_path(sid)

    def resume() -> None:
        session = open_session(
            session_id=sid, settings=Settings(), provider=ScriptedProvider({"answers": []}), data_dir=dd,
            approver=QueueApprover(), lines=lambda _line: None,
        )  # fmt: skip
        session.close()

    def parse() -> None:
        records = [json.loads(line) for line in log_path.read_bytes().splitlines()]
        assert len(records) > 0

    def parse_discarding() -> None:
        for line in log_path.read_bytes().splitlines():
            json.loads(line)

    resumes: list[float] = []
    loads: list[float] = []
    discarding: list[float] = []
    for _ in range(runs):
        resumes.append(_timed(resume))
        loads.append(_timed(parse))
        discarding.append(_timed(parse_discarding))
    return resumes, loads, discarding


def bench_append(small: tuple[Path, str], large: tuple[Path, str], n: int) -> tuple[list[float], list[float]]:
    """Append `n` records (fsynced) to each log, alternating; the time of each append."""
    stores = [SessionStore.open(d, sid) for d, sid in (small, large)]
    times: list[list[float]] = [[], []]
    try:
        for i in range(n):
            payload = _record(i)
            for k in (0, 1) if i % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                stores[k].append("message", payload, fsync=True)
                times[k].append(time.perf_counter() - t0)
    finally:
        for s in stores:
            s.close()
    return times[0], times[1]


def run(*, large_messages: int = 10_000, small_messages: int = 100, seed: int = 1, appends: int = 200,
        resumes: int = 7) -> dict[str, Any]:  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="agentd-bench-store-") as tmp:
        large_dir, small_dir = Path(tmp) / "large", Path(tmp) / "small"
        large = generate(large_dir, messages=large_messages, seed=seed)
        small = generate(small_dir, messages=small_messages, seed=seed)
        log = DataDir(large_dir).log_path(large)
        size, lines = log.stat().st_size, len(log.read_bytes().splitlines())
        resume_t, loads_t, discard_t = bench_resume(large_dir, large, resumes)
        small_t, large_t = bench_append((small_dir, small), (large_dir, large), appends)
    resume_med, loads_med = statistics.median(resume_t[1:]), statistics.median(loads_t[1:])
    discard_med = statistics.median(discard_t[1:])
    small_med, large_med = statistics.median(small_t), statistics.median(large_t)
    result = {
        "module": "tests.benchmarks.store",
        "append_ratio": round(large_med / small_med, 3),
        "resume_ratio": round(resume_med / loads_med, 3),
        "append_median_ms_small": round(small_med * 1000, 4),
        "append_median_ms_large": round(large_med * 1000, 4),
        "resume_median_ms": round(resume_med * 1000, 2),
        "json_loads_median_ms": round(loads_med * 1000, 2),
        "json_loads_discarding_median_ms": round(discard_med * 1000, 2),
        "resume_ratio_vs_discarding_loads": round(resume_med / discard_med, 3),
        "messages_small": small_messages,
        "messages_large": large_messages,
        "records_large": lines,
        "log_bytes_large": size,
        "appends_per_log": appends,
        "resume_runs": resumes,
        "seed": seed,
        "targets": TARGETS,
    }
    result["met"] = {k: result[k] <= v for k, v in TARGETS.items()}
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks.store", description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=10_000, help="messages of the large session")
    p.add_argument("--small-messages", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--appends", type=int, default=200, help="appends timed per log")
    p.add_argument("--resumes", type=int, default=7, help="resumes timed (the first is a warm-up)")
    a = p.parse_args(argv)
    result = run(large_messages=a.messages, small_messages=a.small_messages, seed=a.seed, appends=a.appends,
                 resumes=a.resumes)  # fmt: skip
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
