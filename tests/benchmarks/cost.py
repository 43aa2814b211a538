"""Cost benchmark (issue 15; TESTING.md §5.1): `python -m tests.benchmarks.cost [--workloads NAMES] [--keep DIR]`.

The real product, billed by what the emulator served. For each workload of `tests/benchmarks/workloads/` (made by
`tests.benchmarks.workloads` from a seed and a declared shape), `tests.benchmarks.drive` runs agentd as an editor
would (the daemon over LSP, the real anthropic SDK over HTTP to the bundled Messages-API emulator, user think time
on a fake clock both sides see), once per agentd configuration:

- `auto`, `fixed_5m`, `fixed_1h`: agentd with `cache.ttl` = "auto", "5m", "1h" (the workload's other settings
  unchanged). Their requests must be the same but for `cache_control` (checked): only caching differs.
- `seed_design`: agentd compressing at 12,000 tokens and keeping the last 8 messages (the seed's numbers).

Baselines billed on the same requests and times (`billing.rebill`: the emulator's `CacheSim`, fresh, on the
`auto` run's journal with its breakpoints replaced): `nocache`; `seed_cache` (the seed's caching: the system
block only, 5m, same compression); `system_last_5m` (the system block and the last block, 5m: what Claude Code
does). The seed's whole design is the `seed_design` run's journal with the seed's caching. `lower_bound`: the
least any client could pay for the `auto` run's requests at their times, knowing the future
(`tests/benchmarks/lower_bound.py`), plus the same output tokens.

Bills are USD at the model's prices: input, 5m writes 1.25x, 1h writes 2x, reads 0.1x, output tokens at the
output price. Prints one JSON line per workload, then one summary line (the last line: what `python -m
tests.benchmarks all` publishes) with the targets of issue 15 and whether each is met. A run in which a turn
failed, the emulator rejected a request or had an answer left, or agentd's reported usage differs from the
journal's publishes nothing (exit 1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks import billing, drive
from tests.benchmarks.lower_bound import Split, lower_bound
from tests.benchmarks.workloads import SHAPES, load

RUNS: dict[str, dict[str, Any]] = {  # agentd initializationOptions per run, over the workload's settings
    "auto": {"cache": {"ttl": "auto"}},
    "fixed_5m": {"cache": {"ttl": "5m"}},
    "fixed_1h": {"cache": {"ttl": "1h"}},
    "seed_design": {"context": {"compressThresholdTokens": 12000, "keepRecentMessages": 8}},
}
TARGETS = {
    "bill_ratio_vs_lower_bound": ("<=", 1.10, None),
    "auto_vs_best_fixed": ("<=", 1.03, None),
    "bill_ratio_vs_seed_cache": ("<=", 0.30, ("agentic", "heavy", "resumed")),
    "cache_read_share": (">=", 0.90, ("agentic", "heavy")),
}


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _same_requests(runs: dict[str, drive.Played]) -> None:
    """The three caching runs sent the same requests but for cache_control: only caching differs."""
    bodies = {
        name: [billing.strip(e["body"]) for e in runs[name].journal]
        for name in ("auto", "fixed_5m", "fixed_1h")
    }
    if not bodies["auto"] == bodies["fixed_5m"] == bodies["fixed_1h"]:
        raise RuntimeError("the caching runs sent different requests: the comparison would not be fair")


def _round(x: float, n: int = 4) -> float:
    return round(x, n)


def evaluate(workload: dict[str, Any], base: Path) -> dict[str, Any]:
    """Run and bill one workload (module docstring); returns its JSON line as a dict."""
    model = workload["model"]
    minimum = int(drive.MODELS[model]["min_cacheable"])
    runs: dict[str, drive.Played] = {}
    seconds: dict[str, float] = {}
    for name, options in RUNS.items():
        t0 = time.monotonic()
        here = base / "run"  # one path for every run: the workspace path is in the system prompt
        runs[name] = drive.run(workload, _merge(workload["settings"], options), here)
        here.rename(base / name)
        seconds[name] = round(time.monotonic() - t0, 1)
    _same_requests(runs)
    auto = runs["auto"].journal
    output = billing.served(auto)[1]
    splits: dict[str, Split] = {
        name: billing.served(runs[name].journal)[0] for name in ("auto", "fixed_5m", "fixed_1h")
    }
    if billing.rebill(auto, "as_sent", minimum) != splits["auto"]:
        raise RuntimeError("re-billing the auto run as sent does not reproduce the served usage")
    for name, placement in (("nocache", "none"), ("seed_cache", "system"), ("system_last_5m", "system_last")):
        splits[name] = billing.rebill(auto, placement, minimum)
    splits["lower_bound"] = lower_bound([(e["clock"], billing.strip(e["body"])) for e in auto], minimum)
    seed_journal = runs["seed_design"].journal
    splits["seed_design"] = billing.rebill(seed_journal, "system", minimum)
    outputs = {name: output for name in splits} | {"seed_design": billing.served(seed_journal)[1]}
    usd = {name: billing.usd(s, outputs[name], model) for name, s in splits.items()}
    a = splits["auto"]
    prompt = a.uncached + a.write_5m + a.write_1h + a.read
    agentd_story, seed_story = billing.context_story(auto), billing.context_story(seed_journal)
    return {
        "workload": workload["name"],
        "model": model,
        "requests": len(auto),
        "compressions": agentd_story["compressions"],
        "bill_ratio_vs_lower_bound": _round(usd["auto"] / usd["lower_bound"]),
        "input_bill_ratio_vs_lower_bound": _round(a.equivalents / splits["lower_bound"].equivalents),
        "auto_vs_best_fixed": _round(usd["auto"] / min(usd["fixed_5m"], usd["fixed_1h"])),
        "bill_ratio_vs_seed_cache": _round(usd["auto"] / usd["seed_cache"]),
        "bill_ratio_vs_nocache": _round(usd["auto"] / usd["nocache"]),
        "bill_ratio_vs_system_last_5m": _round(usd["auto"] / usd["system_last_5m"]),
        "cache_read_share": _round(a.read / prompt),
        "bill_usd": {name: round(v, 4) for name, v in usd.items()},
        "tokens": {name: {k: int(v) for k, v in vars(s).items()} for name, s in splits.items()},
        "output_tokens": outputs["auto"],
        "agentd_vs_seed_design": {"agentd": agentd_story, "seed_design": seed_story},
        "system_tokens": _system_tokens(auto[0]["body"]),
        "seconds": seconds,
    }


def _system_tokens(body: dict[str, Any]) -> int:
    from agentd.testing.emulator import count_tokens

    return sum(count_tokens(b) for b in billing.strip(body).get("system") or [])


def _target(op: str, bound: float, only: tuple[str, ...] | None) -> str:
    return f"{op} {bound}" + (f" on {', '.join(only)}" if only else " on every workload")


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The last line: per-workload key figures (a table in docs/benchmarks.md) and the targets, met or not."""
    met: dict[str, bool] = {}
    for key, (op, bound, only) in TARGETS.items():
        for r in results:
            if only is None or r["workload"] in only:
                ok = r[key] <= bound if op == "<=" else r[key] >= bound
                met[key] = met.get(key, True) and ok
    columns = (
        "system_tokens",
        "requests", "compressions", "bill_ratio_vs_lower_bound", "input_bill_ratio_vs_lower_bound",
        "auto_vs_best_fixed", "bill_ratio_vs_seed_cache", "bill_ratio_vs_system_last_5m", "cache_read_share",
    )  # fmt: skip
    table = {r["workload"]: {c: r[c] for c in columns} for r in results}
    bills = {r["workload"]: dict(r["bill_usd"]) for r in results}
    forgetting = {}
    for r in results:
        story = r["agentd_vs_seed_design"]
        forgetting[r["workload"]] = {
            f"{who}_{k}": v for who in ("agentd", "seed_design") for k, v in story[who].items()
        } | {"agentd_usd": r["bill_usd"]["auto"], "seed_design_usd": r["bill_usd"]["seed_design"]}
    return {
        "module": "tests.benchmarks.cost",
        "worst_bill_ratio_vs_lower_bound": max(r["bill_ratio_vs_lower_bound"] for r in results),
        "worst_input_bill_ratio_vs_lower_bound": max(r["input_bill_ratio_vs_lower_bound"] for r in results),
        "worst_auto_vs_best_fixed": max(r["auto_vs_best_fixed"] for r in results),
        "workloads": table,
        "bills_usd": bills,
        "agentd_vs_seed_design": forgetting,
        "targets": {k: _target(op, bound, only) for k, (op, bound, only) in TARGETS.items()},
        "met": met,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks.cost", description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=",".join(SHAPES), help="comma-separated names (default: all)")
    p.add_argument("--keep", metavar="DIR", help="keep every run's workspace, data and journal under DIR")
    args = p.parse_args(argv)
    names = [n for n in args.workloads.split(",") if n]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; known: {', '.join(SHAPES)}")
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="agentd-bench-cost-"))
    results = []
    try:
        for name in names:
            sys.stderr.write(f"[cost] {name} ...\n")
            results.append(evaluate(load(name), tmp / name))
            sys.stdout.write(json.dumps(results[-1], separators=(",", ":")) + "\n")
            sys.stdout.flush()
    except (RuntimeError, OSError, TimeoutError) as exc:
        sys.stderr.write(f"tests.benchmarks.cost: {exc}; nothing published\n")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write(json.dumps(summary(results), separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
