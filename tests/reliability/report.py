"""The reliability report (issue 16): `python -m tests.reliability.report` prints one JSON line.

Keys (the issue's acceptance line): `crash_points`, `crash_resumes_ok` (tests/reliability/crash.py),
`fault_cases`, `fault_cases_ok` (faults.py), `sessions_concurrent`, `cross_talk`, `notify_p50_ms`,
`notify_p99_ms`, `idle_session_kib` (load.py; also `reply_notify_p50_ms`, `reply_notify_p99_ms`), `fuzz_frames`,
`daemon_alive` (the LSP frames of fuzz.py plus the ACP lines of acpfuzz.py: `fuzz_frames_lsp`,
`fuzz_frames_acp`), `hostile_cases`, `hostile_cases_ok` (hostile.py: 1 GiB of command output, a fork storm, a
full and a read-only data dir), `secrets_found` and
`private_modes_bad` (this module: after all of the above, every file under the run's folders is searched for
a 16-character piece of any canary key; files agentd wrote under its data dir must be 0600, dirs 0700).
Each part also reports its problems (`*_problems`), so a figure below target says why.

`--quick` runs the CI-sized version (5 crash points, 10 sessions, 60 fuzz examples, the fault matrix on the
Messages API only); the full run is the opt-in `AGENTD_RELIABILITY=1` tier (docs/reliability.md).
`--only crash,faults,load,fuzz,hostile` runs some parts. Every daemon and emulator lives under one temp folder,
removed at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.reliability.acpfuzz import fuzz_acp
from tests.reliability.crash import crash_fuzz
from tests.reliability.faults import run_matrix
from tests.reliability.fuzz import fuzz_lsp
from tests.reliability.hostile import hostile
from tests.reliability.load import concurrent_turns

PARTS = ("crash", "faults", "load", "fuzz", "hostile")
FULL = {"points": 20, "calls": 40, "apis": ("anthropic", "openai"), "sessions": 50, "examples": 300}
QUICK = {"points": 5, "calls": 12, "apis": ("anthropic",), "sessions": 10, "examples": 60}


def secrets_found(base: Path, keys: list[str]) -> list[str]:
    """Files under `base` holding a 16-character piece of any key (TESTING.md §4.6): `path: piece`."""
    pieces = {k[i : i + 16].encode() for k in keys for i in range(len(k) - 15)}
    out = []
    for path in sorted(base.rglob("*")):
        if not path.is_file() or path.is_symlink() or path.name == "scenario.json":
            continue
        blob = path.read_bytes()
        out += [f"{path.relative_to(base)}: {p.decode()}" for p in pieces if p in blob]
    return out


def private_modes_bad(base: Path) -> list[str]:
    """Files and dirs under every `data` dir of the run that are not 0600 / 0700 (CONTRACTS.md §10)."""
    out = []
    for data in base.rglob("data"):
        if not data.is_dir():
            continue
        for path in [data, *data.rglob("*")]:
            if path.is_symlink():
                continue
            mode = stat.S_IMODE(path.lstat().st_mode)
            want = 0o700 if path.is_dir() else 0o600
            if mode & ~want & 0o077:
                out.append(f"{path.relative_to(base)}: {oct(mode)}")
    return out


async def report(base: Path, sizes: dict[str, Any], parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """Run the parts under `base`; the report's dict (see the module docstring)."""
    out: dict[str, Any] = {}
    keys: list[str] = []
    timings: dict[str, float] = {}
    for part in parts:
        started = time.monotonic()
        if part == "crash":
            got = await crash_fuzz(base / "crash", points=sizes["points"], calls=sizes["calls"])
        elif part == "faults":
            outcomes = await run_matrix(base / "faults", sizes["apis"])
            got = {"fault_cases": len(outcomes), "fault_cases_ok": sum(o.ok for o in outcomes),
                   "fault_retry_s_max": max((o.retry_s for o in outcomes), default=0.0),
                   "fault_problems": [f"{o.api} {o.case}: {p}" for o in outcomes for p in o.problems]}  # fmt: skip
            keys += [o.key for o in outcomes if o.key]
        elif part == "load":
            got = await concurrent_turns(base / "load", sessions=sizes["sessions"])
        elif part == "fuzz":
            got = await _fuzz(base / "fuzz", sizes["examples"], keys)
        else:
            got = await hostile(base / "hostile")
        timings[part] = round(time.monotonic() - started, 1)
        if "key" in got:
            keys.append(got.pop("key"))
        out.update(got)
    leaks = secrets_found(base, keys)
    modes = private_modes_bad(base)
    out.update(secrets_found=len(leaks), secrets_problems=leaks[:20], private_modes_bad=len(modes),
               modes_problems=modes[:20], seconds=timings)  # fmt: skip
    return out


async def _fuzz(base: Path, examples: int, keys: list[str]) -> dict[str, Any]:
    """LSP frames then ACP lines, each against its own daemon; the counts add up, both must stay alive."""
    lsp = await fuzz_lsp(base / "lsp", examples=examples)
    acp = await fuzz_acp(base / "acp", examples=examples)
    keys += [lsp.pop("key"), acp.pop("key")]
    return {"fuzz_frames": lsp["fuzz_frames"] + acp["fuzz_frames_acp"], "fuzz_frames_lsp": lsp["fuzz_frames"],
            "fuzz_frames_acp": acp["fuzz_frames_acp"], "daemon_alive": lsp["daemon_alive"] and acp["daemon_alive_acp"],
            "fuzz_problems": lsp["fuzz_problems"] + [f"acp: {p}" for p in acp["fuzz_problems_acp"]]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.report", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="the CI-sized run")
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ",".join(PARTS))
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (its path is in the JSON)")
    args = parser.parse_args(argv)
    parts = tuple(p for p in args.only.split(",") if p)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    base = Path(tempfile.mkdtemp(prefix="agentd-reliability-"))
    try:
        out = asyncio.run(report(base, QUICK if args.quick else FULL, parts))
        if args.keep:
            out["folder"] = str(base)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
