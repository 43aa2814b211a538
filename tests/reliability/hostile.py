"""Hostile tool inputs and a hostile data dir (issue 16 §6): `hostile_cases`, `hostile_cases_ok`.

Each case drives a real daemon over stdio (the emulator plays the model) and is ok when every check holds:

- `output_1gib`: `run_command` prints 1 GiB. The daemon's peak RSS grows by less than `RSS_BOUND_MIB`, the
  tool result is capped (head and tail, `truncated`, the total byte count), the daemon answers after.
- `fork_storm`: `run_command` starts a bounded fork bomb (a binary tree of 511 shells, each waiting) with a
  15 s timeout. Once 200 of them run, a second session's turn must complete; at the timeout every process of the storm is
  gone (the sandbox's process group / PID namespace is killed whole); the daemon answers after. An
  unbounded fork bomb is not run: as root (CI) no RLIMIT_NPROC applies and it would take the shared machine
  down, not just the daemon.
- `data_dir_full`: the data dir is a 4 MiB tmpfs (a user+mount namespace, `unshare -rm`); after one turn it
  is filled. The next prompt gets one clear error (the StorageError text: cannot write, no space), the
  daemon stays up, and the session log copied out at exit parses line by line, with contiguous `seq`, and
  keeps every record of the first turn.
- `data_dir_read_only`: the data dir is a read-only mount from the start: the answer to `initialize` is the
  StorageError saying the data dir is not writable and what to pass instead (H12), and the process ends
  without a traceback (over stdio it serves one editor and can store nothing for it).

The tmpfs cases need `unshare` and user namespaces (as bubblewrap does); without them they are reported as
skipped (`hostile_skipped`), not ok. Not a test module: used by the report and test_hostile.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.lsp.harness import wait_until
from tests.reliability.driver import ROOT, Daemon, EmulatorProc, canary_key, isolated_env

MODEL = "claude-sonnet-4-6"
RSS_BOUND_MIB = 64
STORM_MARK = "6061"
STORM_TIMEOUT_S = 15  # `sleep 6061`: the storm's processes, found in /proc by their command line


@dataclass
class Outcome:
    case: str
    problems: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.skipped is None


def _run(command: str, timeout_s: float | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"command": command}
    if timeout_s is not None:
        args["timeout_s"] = timeout_s
    return {"tool_use": {"name": "run_command", "input": args}}


def _read(path: str) -> dict[str, Any]:
    return {"tool_use": {"name": "read_file", "input": {"path": path}}}


def _scenario() -> dict[str, Any]:
    big = "head -c 1073741824 /dev/zero | tr '\\0' x"
    storm = f"f(){{ if [ $1 -gt 0 ]; then f $(($1-1)) & f $(($1-1)) & fi; exec sleep {STORM_MARK}; }}; f 8"
    return {
        "conversations": {
            "[case output]": [{"reply": [_run(big, 300)]}, {"reply": [{"text": "printed"}]}],
            "[case storm]": [{"reply": [_run(storm, STORM_TIMEOUT_S)]}, {"reply": [{"text": "stormed"}]}],
            "[case bystander]": [{"reply": [_read("a.txt")]}, {"reply": [{"text": "read"}]}],
            "[case full]": [
                {"reply": [_read("a.txt")]},
                {"reply": [{"text": "first"}]},
                {"reply": [{"text": "x"}]},
            ],
        }
    }


def _hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _storm_pids() -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd[:2] == [b"sleep", STORM_MARK.encode()]:
                out.append(int(proc.name))
    return out


def _completed(d: Daemon, sid: str) -> list[dict[str, Any]]:
    return [u.update for u in d.updates.get(sid, []) if u.update.get("status") in ("completed", "failed")]


async def _tool_cases(base: Path) -> list[Outcome]:
    root = base / "ws"
    for name in ("output", "storm", "bystander"):
        (root / name).mkdir(parents=True)
        (root / name / "a.txt").write_text("bystander\n", encoding="utf-8")
    emu = await EmulatorProc.start(_scenario(), base / "scenario.json")
    env = isolated_env(base, canary_key(), ANTHROPIC_BASE_URL=emu.url)
    d = await Daemon.spawn(env, stderr=base / "stderr")
    outcomes = [Outcome("output_1gib"), Outcome("fork_storm")]
    try:
        await d.initialize(root, {"model": MODEL})
        await _output(d, root / "output", outcomes[0])
        await _storm(d, root, outcomes[1])
    finally:
        await d.stop()
        await emu.stop()
    if "Traceback" in (base / "stderr").read_text(encoding="utf-8", errors="replace"):
        outcomes[0].problems.append("a traceback on the daemon's stderr")
    return outcomes


async def _output(d: Daemon, ws: Path, out: Outcome) -> None:
    sid = await d.new_session(ws)
    before = _hwm_kib(d.pid)
    reply = await d.prompt(sid, "[case output] Print a lot.", 600)
    grew = (_hwm_kib(d.pid) - before) / 1024
    if reply.get("result", {}).get("stopReason") != "end_turn":
        out.problems.append(f"the turn did not end: {reply}")
    if grew >= RSS_BOUND_MIB:
        out.problems.append(f"peak RSS grew by {grew:.0f} MiB (bound {RSS_BOUND_MIB})")
    raw = next((u.get("rawOutput") or {} for u in _completed(d, sid)), {})
    if not raw.get("truncated") or raw.get("bytes") != 1 << 30:
        out.problems.append(f"the output was not capped and counted: {json.dumps(raw)[:300]}")
    if not await _answers(d):
        out.problems.append("the daemon did not answer after the command")


async def _storm(d: Daemon, root: Path, out: Outcome) -> None:
    storm, bystander = await d.new_session(root / "storm"), await d.new_session(root / "bystander")
    storming = asyncio.ensure_future(d.prompt(storm, "[case storm] Fork.", 300))
    try:
        await wait_until(lambda: len(_storm_pids()) >= 200, "the storm's processes", STORM_TIMEOUT_S - 1)
    except AssertionError as exc:
        out.problems.append(str(exc))
    other = await d.prompt(bystander, "[case bystander] Read a.txt.", 120)
    if other.get("result", {}).get("stopReason") != "end_turn":
        out.problems.append(f"another session's turn failed during the storm: {other}")
    reply = await storming
    if reply.get("result", {}).get("stopReason") != "end_turn":
        out.problems.append(f"the storm's turn did not end: {reply}")
    left = _storm_pids()
    if left:
        out.problems.append(f"{len(left)} process(es) of the storm outlived its timeout")
        for pid in left:
            with _suppress():
                os.kill(pid, 9)
    if not await _answers(d):
        out.problems.append("the daemon did not answer after the storm")


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


async def _answers(d: Daemon) -> bool:
    try:
        return "result" in await d.request("agentd/session/list", {}, 60)
    except (TimeoutError, ConnectionError):
        return False


def namespaces_usable() -> str | None:
    """None when `unshare -rm` can mount a tmpfs here, else why not."""
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True,
                           timeout=30, check=False)  # fmt: skip
    return None if probe.returncode == 0 else f"unshare -rm cannot mount: {probe.stderr.decode()[-200:]}"


async def _spawn_in_tmpfs(env: dict[str, str], base: Path, prelude: str) -> Daemon:
    """A daemon whose data dir is a fresh tmpfs in its own user+mount namespace; `prelude` runs first
    (after the mount); the data dir is copied to `base/data-out` when the daemon exits."""
    data, out = shlex.quote(env["AGENTD_DATA_DIR"]), shlex.quote(str(base / "data-out"))
    script = (f"mkdir -p -m 0700 {data} && mount -t tmpfs -o size=4m,mode=0700 tmpfs {data} && {prelude}"
              f"{shlex.quote(sys.executable)} -m agentd; rc=$?; cp -a {data} {out}; exit $rc")  # fmt: skip
    with (base / "stderr").open("ab") as err:
        proc = await asyncio.create_subprocess_exec(
            "unshare", "-rm", "sh", "-c", script, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=err, env=env, cwd=str(ROOT), limit=1 << 24,
        )  # fmt: skip
    d = Daemon(proc)
    d._reader = asyncio.ensure_future(d._read())
    return d


def _clear(error: Any, *words: str) -> bool:
    text = json.dumps(error).lower()
    return any(w in text for w in words)


async def _full(base: Path) -> Outcome:
    out = Outcome("data_dir_full")
    ws = base / "ws"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("hello\n", encoding="utf-8")
    go, done = base / "go", base / "done"
    os.mkfifo(go)
    os.mkfifo(done)
    fill = (f"( read x < {shlex.quote(str(go))}; head -c 8m /dev/zero > {shlex.quote(str(base / 'data'))}/filler "
            f"2>/dev/null; echo filled > {shlex.quote(str(done))} ) & ")  # fmt: skip
    emu = await EmulatorProc.start(_scenario(), base / "scenario.json")
    d = await _spawn_in_tmpfs(isolated_env(base, canary_key(), ANTHROPIC_BASE_URL=emu.url), base, fill)
    try:
        await d.initialize(ws, {"model": MODEL})
        sid = await d.new_session(ws)
        first = await d.prompt(sid, "[case full] Read a.txt.", 120)
        if first.get("result", {}).get("stopReason") != "end_turn":
            out.problems.append(f"the turn before the disk filled failed: {first}")
        await asyncio.to_thread(go.write_text, "go\n")
        await asyncio.to_thread(done.read_text)
        second = await d.prompt(sid, "[case full] Go on.", 120)
        if "error" not in second or not _clear(second["error"], "no space", "cannot write", "disk"):
            out.problems.append(f"the prompt on a full disk did not get one clear error: {second}")
        if not await _answers(d):
            out.problems.append("the daemon did not answer on a full disk")
    finally:
        await d.stop()
        await emu.stop()
    out.problems += _log_intact(base / "data-out", first_turn_kinds={"prompt", "message", "tool_call"})
    return out


def _log_intact(data: Path, first_turn_kinds: set[str]) -> list[str]:
    logs = list(data.glob("sessions/*/log.jsonl"))
    if len(logs) != 1:
        return [f"expected one session log in the copied data dir, found {len(logs)}"]
    problems, seqs, kinds = [], [], set()
    for n, line in enumerate(logs[0].read_bytes().splitlines(), 1):
        try:
            rec = json.loads(line)
        except ValueError:
            problems.append(f"log line {n} does not parse: {line[:120]!r}")
            continue
        seqs.append(rec.get("seq"))
        kinds.add(rec.get("kind"))
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append(f"log seqs are not contiguous: {seqs}")
    if not first_turn_kinds <= kinds:
        problems.append(f"records of the first turn are missing: {sorted(first_turn_kinds - kinds)}")
    return problems


async def _read_only(base: Path) -> Outcome:
    out = Outcome("data_dir_read_only")
    ws = base / "ws"
    ws.mkdir(parents=True)
    ro = f"mount -o remount,ro,size=4m {shlex.quote(str(base / 'data'))} && "
    d = await _spawn_in_tmpfs(isolated_env(base, canary_key()), base, ro)
    try:
        init = await d.initialize(ws, {"model": MODEL})
    finally:
        await d.stop()
    error = init.get("error") or {}
    if error.get("data", {}).get("name") != "StorageError" or "not writable" not in error.get("message", ""):
        out.problems.append(
            f"initialize did not say the data dir cannot be written: {json.dumps(init)[:400]}"
        )
    stderr = (base / "stderr").read_text(encoding="utf-8", errors="replace")
    if "Traceback" in stderr:
        out.problems.append("a traceback on the daemon's stderr")
    return out


Case = Callable[[Path], Awaitable[Outcome]]


async def hostile(base: Path) -> dict[str, Any]:
    """Every case; the report's keys (module docstring) and each failing case's problems."""
    outcomes = await _tool_cases(base / "tools")
    why_not = namespaces_usable()
    for name, case in (("data_dir_full", _full), ("data_dir_read_only", _read_only)):
        if why_not:
            outcomes.append(Outcome(name, skipped=why_not))
        else:
            outcomes.append(await case(base / name))
    return {
        "hostile_cases": len(outcomes),
        "hostile_cases_ok": sum(o.ok for o in outcomes),
        "hostile_skipped": {o.case: o.skipped for o in outcomes if o.skipped},
        "hostile_problems": [f"{o.case}: {p}" for o in outcomes for p in o.problems],
    }
