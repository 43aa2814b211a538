"""Daemon benchmark (TESTING.md §5.3): start-up and overhead per step. Run `python -m tests.benchmarks.daemon`.

Prints one JSON line:
- `initialize_ms`: median of N spawns of `python -m agentd`, from `Popen` to the `initialize` result (the
  SDKs are imported only after it); `python_ms` the same for `python -c pass`, `initialize_ratio` the ratio.
- `step_overhead_ratio`: median daemon overhead per step with a resumed 5,000-message session divided by the
  same with a 100-message one. Per step, overhead = `received_at` of request k+1 - `last_byte_at` of
  response k - the tool time agentd reports (`durationMs`), all from the emulator journal and the updates.
- `request_bytes_ratio`: request body size at 5,000 messages / at 100 (the serialisation no step avoids).
- `loop_cpu_ratio` (issue 16): agentd's own CPU per model request at 5,000 messages / at 100, SDK
  serialisation excluded: the daemon's CPU during a prompt of N tool steps (utime + stime from /proc) minus
  the CPU the anthropic SDK itself spends on the same request bodies (`sdk_cpu_s`: the SDK's
  `messages.create(**body, stream=True)` in this process, through an in-memory transport that answers a
  minimal stream at once: its copy of the params, the JSON encoding, the HTTP request; the garbage collector
  as agentd/heap.py runs it in the daemon), per request. Median
  of `--cpu-runs` runs of each size (interleaved, each on a fresh copy of the generated session), in one
  process; `loop_cpu_ms_*` are those medians, `sdk_cpu_ms_*` the SDK's share subtracted.
- `big_resume_ms`, `big_resume_peak_mib`, `big_load_bytes` (issue 16): `agentd/session/load` of a generated
  session of about 100 MiB whose last 0.5 MiB follow a compaction (`gen.generate_compacted`), in a daemon
  that loaded a small session first: the time to the answer, the peak RSS above the idle daemon (VmHWM
  reset first), the bytes sent to the editor for it; a prompt after it must pass the emulator.
Plus the absolute medians behind them. Sessions come from `tests.benchmarks.gen` (compression off, a
window large enough for the whole history); each step is an instant emulator reply calling `read_file`
on a one-line file. A run in which the emulator answered a 400 publishes nothing (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.benchmarks.gen import MODEL, generate, generate_compacted

ROOT = Path(__file__).resolve().parents[2]
HUGE = 100_000_000


class Client:
    """A minimal LSP client over the daemon's pipes: incremental framing, answers server requests."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.buf = b""
        self.updates: list[dict[str, Any]] = []
        self.read_bytes = 0  # everything read from the daemon's stdout

    async def send(self, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.proc.stdin.drain()

    async def _frame(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            head, sep, rest = self.buf.partition(b"\r\n\r\n")
            if sep:
                length = int(head.split(b":")[1])
                if len(rest) >= length:
                    self.buf = rest[length:]
                    return dict(json.loads(rest[:length]))
            chunk = await self.proc.stdout.read(1 << 20)
            if not chunk:
                raise RuntimeError("agentd closed its stdout")
            self.read_bytes += len(chunk)
            self.buf += chunk

    async def reply(self, msg_id: Any, timeout: float = 600) -> dict[str, Any]:
        async def wait() -> dict[str, Any]:
            while True:
                msg = await self._frame()
                if msg.get("method") == "agentd/session/update":
                    self.updates.append(msg["params"])
                elif "method" in msg and "id" in msg:
                    result = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                    await self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                elif msg.get("id") == msg_id and "method" not in msg:
                    return msg

        return await asyncio.wait_for(wait(), timeout)


async def _spawn(env: dict[str, str]) -> Client:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env, cwd=str(ROOT))  # fmt: skip
    return Client(proc)


def _init(folder: Path, options: dict[str, Any]) -> dict[str, Any]:
    caps = {"experimental": {"agentd": {"protocolVersion": 1, "requestPermission": True}}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": None, "rootUri": folder.as_uri(), "capabilities": caps,
                       "workspaceFolders": [{"uri": folder.as_uri(), "name": folder.name}],
                       "initializationOptions": options}}  # fmt: skip


async def _stop(client: Client) -> None:
    await client.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
    await client.reply("bye")
    await client.send({"jsonrpc": "2.0", "method": "exit"})
    await asyncio.wait_for(client.proc.wait(), 30)


async def initialize_ms(env: dict[str, str], folder: Path, runs: int) -> tuple[float, float]:
    """(median ms to the initialize result, median ms of `python -c pass`)."""
    starts, bare = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        client = await _spawn(env)
        await client.send(_init(folder, {}))
        await client.reply(1)
        starts.append((time.perf_counter() - t0) * 1000)
        await client.send({"jsonrpc": "2.0", "method": "exit"})
        await asyncio.wait_for(client.proc.wait(), 30)
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        await proc.wait()
        bare.append((time.perf_counter() - t0) * 1000)
    return statistics.median(starts), statistics.median(bare)


def _session(messages: int, base: Path) -> tuple[Path, str]:
    """A generated session of `messages` messages (and the one-line file the steps read)."""
    data = base / f"data-{messages}"
    sid = generate(data, messages=messages, seed=1)
    (data / "workspace" / "a.txt").write_text("a\n", encoding="utf-8")
    return data, sid


async def _run_copy(session: tuple[Path, str], k: int, steps: int) -> dict[str, float]:
    """One run on the session as generated (a run appends to the log it resumes, so every run after the
    first starts from a copy of the pristine data dir, at the same path: the log records its workspace)."""
    data, sid = session
    pristine = data.with_name(data.name + "-pristine")
    if k == 0:
        shutil.copytree(data, pristine)
    else:
        shutil.rmtree(data)
        shutil.copytree(pristine, data)
    return await _steps(data, sid, steps)


def _medians(results: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


async def step_overhead(messages: int, steps: int, base: Path, runs: int = 1) -> dict[str, float]:
    """Resume a generated session of `messages` messages and drive `steps` tool steps, `runs` times; the
    medians of the runs' figures."""
    session = _session(messages, base)
    return _medians([await _run_copy(session, k, steps) for k in range(runs)])


async def _steps(data: Path, sid: str, steps: int) -> dict[str, float]:
    workspace = data / "workspace"
    answers = [{"reply": [{"text": "Ready."}], "stop_reason": "end_turn"}] + [  # the warm-up turn, then the steps
               {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}], "stop_reason": "tool_use"}
               for _ in range(steps)] + [{"reply": [{"text": "Done."}], "stop_reason": "end_turn"}]  # fmt: skip
    emu = Emulator(
        api="anthropic", scenario={"models": {MODEL: {"context_window": HUGE}}, "answers": answers}
    )
    url = emu.start()
    try:
        env = _env(data, url)
        client = await _spawn(env)
        options = {"context": {"windowTokens": HUGE, "compressThresholdTokens": HUGE}}
        await client.send(_init(workspace, options))
        await client.reply(1)
        await client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        await client.send({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/load",
                           "params": {"sessionId": sid, "cwd": str(workspace)}})  # fmt: skip
        await client.reply(2)
        warm = {"sessionId": sid, "prompt": [{"type": "text", "text": "Warm up (imports, connection)."}]}
        await client.send({"jsonrpc": "2.0", "id": "warm", "method": "agentd/session/prompt", "params": warm})
        await client.reply("warm")
        client.updates.clear()
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "Read a.txt again and again."}]}
        cpu0 = cpu_s(client.proc.pid)
        await client.send({"jsonrpc": "2.0", "id": 3, "method": "agentd/session/prompt", "params": prompt})
        answered = await client.reply(3)
        if "result" not in answered:
            raise RuntimeError(f"the prompt failed: {answered.get('error')}")
        stop = answered["result"]["stopReason"]
        cpu = cpu_s(client.proc.pid) - cpu0
        await _stop(client)
        journal = emu.journal[1:]  # without the warm-up request
        if stop != "end_turn" or emu.problems or any(e["status"] != 200 for e in journal):
            raise RuntimeError(f"the run is invalid: stop {stop}, problems {emu.problems}")
    finally:
        emu.stop()
    tool_ms = [u["update"]["_meta"]["agentd"]["durationMs"] for u in client.updates
               if u["update"].get("sessionUpdate") == "tool_call_update" and u["update"].get("status") == "completed"]  # fmt: skip
    gaps = [
        (journal[k + 1]["received_at"] - journal[k]["last_byte_at"]) * 1000 - tool_ms[k] for k in range(steps)
    ]
    sizes = [len(json.dumps(e["body"]).encode()) for e in journal]
    sdk = _sdk_share_s(data / "bodies.jsonl", [e["body"] for e in journal])
    return {"overhead_ms": statistics.median(gaps), "request_bytes": statistics.median(sizes),
            "loop_cpu_ms": max(cpu - sdk, 0.0) * 1000 / len(journal),
            "sdk_cpu_ms": sdk * 1000 / len(journal)}  # fmt: skip


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SSE_REPLY = b"".join(
    b"event: %s\ndata: %s\n\n" % (e["type"].encode(), json.dumps(e).encode())
    for e in (
        {"type": "message_start", "message": {"id": "msg_sdk", "type": "message", "role": "assistant",
                                              "model": MODEL, "content": [], "stop_reason": None,
                                              "usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    )
)  # fmt: skip


def _sdk_share_s(path: Path, bodies: list[dict[str, Any]]) -> float:
    """The SDK's CPU seconds for `bodies` (`sdk_cpu_s`), measured in a fresh process that holds one body at
    a time, as the daemon holds one history (this process holds the emulator's whole journal, and the
    garbage collector's passes grow with the heap: measured here, the share came out too large)."""
    with path.open("w", encoding="utf-8") as f:
        for body in bodies:
            f.write(json.dumps(body) + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.daemon", "--sdk-share", str(path)],
        cwd=str(ROOT), capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    return float(out.stdout.strip())


async def sdk_cpu_s(path: Path) -> float:
    """CPU seconds the anthropic SDK spends to send the request bodies of `path` (JSON lines; what the
    daemon's SDK did for them: its copy of the params, JSON encoding, the HTTP request; the minimal reply is
    read too), through an in-memory transport; median of 3 passes. Reading the file is not counted. The
    SDK's share of the daemon's CPU, subtracted from `loop_cpu_ms`. The garbage collector runs under the
    daemon's policy (agentd/heap.py): the imports and the body frozen before each request is timed, so the
    SDK's share holds its own copies' collections, not passes over what the daemon would not walk."""
    import anthropic
    import httpx2

    def answer(request: Any) -> Any:
        request.read()
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=SSE_REPLY)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    client = anthropic.AsyncAnthropic(api_key="sk-ant-sdk-share", base_url="http://sdk.invalid", max_retries=0,
                                      http_client=http)  # fmt: skip
    runs = []
    try:
        for _ in range(3):
            spent = 0.0
            with path.open(encoding="utf-8") as f:
                for line in f:
                    params = {k: v for k, v in json.loads(line).items() if k != "stream"}
                    gc.unfreeze()  # as in the daemon (agentd/heap.py): the body, like its history, frozen
                    gc.collect()
                    gc.freeze()
                    t0 = time.process_time()
                    events = await client.messages.create(**params, stream=True)
                    async with events:
                        async for _event in events:
                            pass
                    spent += time.process_time() - t0
                    del params
            runs.append(spent)
    finally:
        await http.aclose()
    return statistics.median(runs)


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


async def big_resume(base: Path, mib: float, live_kib: float) -> dict[str, Any]:
    """Load a generated session of about `mib` MiB whose last `live_kib` KiB follow a compaction, in a daemon
    that loaded a small session first (imports warm); the load's time, the peak RSS above the idle daemon
    (VmHWM reset through /proc/<pid>/clear_refs), the bytes sent to the editor, and one prompt after it
    (the emulator must accept the request)."""
    data = base / "data-big"
    sid = generate_compacted(data, mib=mib, live_kib=live_kib, seed=2)
    small = generate(data, messages=100, seed=3)
    workspace = data / "workspace"
    emu = Emulator(api="anthropic", scenario={"models": {MODEL: {"context_window": HUGE}},
                                              "answers": [{"reply": [{"text": "Done."}]}]})  # fmt: skip
    url = emu.start()
    try:
        client = await _spawn(_env(data, url))
        await client.send(
            _init(workspace, {"context": {"windowTokens": HUGE, "compressThresholdTokens": HUGE}})
        )
        await client.reply(1)
        await client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        await client.send({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/load",
                           "params": {"sessionId": small, "cwd": str(workspace)}})  # fmt: skip
        await client.reply(2)
        pid = client.proc.pid
        idle = _status_kib(pid, "VmRSS")
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        sent0, t0 = client.read_bytes, time.perf_counter()
        await client.send({"jsonrpc": "2.0", "id": 3, "method": "agentd/session/load",
                           "params": {"sessionId": sid, "cwd": str(workspace)}})  # fmt: skip
        loaded = await client.reply(3)
        load_ms = (time.perf_counter() - t0) * 1000
        load_bytes, peak = client.read_bytes - sent0, _status_kib(pid, "VmHWM")
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "Go on."}]}
        await client.send({"jsonrpc": "2.0", "id": 4, "method": "agentd/session/prompt", "params": prompt})
        answered = await client.reply(4)
        await _stop(client)
        bad = [e for e in emu.journal if e["status"] != 200]
        if "result" not in loaded or "result" not in answered or bad:
            raise RuntimeError(
                f"the big session did not resume: {loaded.get('error')} {answered.get('error')} {bad[:1]}"
            )
    finally:
        emu.stop()
    log_bytes = (data / "sessions" / sid / "log.jsonl").stat().st_size
    return {"big_resume_ms": round(load_ms, 1), "big_resume_peak_mib": round((peak - idle) / 1024, 1),
            "big_load_bytes": load_bytes, "big_log_mib": round(log_bytes / 2**20, 1)}  # fmt: skip


def _env(data: Path, url: str | None = None) -> dict[str, str]:
    env = {**os.environ, "AGENTD_DATA_DIR": str(data), "ANTHROPIC_API_KEY": "sk-ant-emu-" + secrets.token_hex(16),
           "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}  # fmt: skip
    home = data / "home"
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), AGENTD_CONFIG_DIR=str(home / ".config/agentd")
    )
    if url is not None:
        env["ANTHROPIC_BASE_URL"] = url
    return env


async def run(
    runs: int, steps: int, small: int, large: int, big_mib: float = 100, cpu_runs: int = 3
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentd-bench-daemon-") as tmp:
        base = Path(tmp)
        folder = base / "ws"
        folder.mkdir()
        init_ms, bare_ms = await initialize_ms(_env(base / "init"), folder, runs)
        sessions = _session(small, base), _session(large, base)
        runs_a: list[dict[str, float]] = []
        runs_b: list[dict[str, float]] = []
        for k in range(cpu_runs):  # interleaved, so a change of the machine's load hits both sizes alike
            runs_a.append(await _run_copy(sessions[0], k, steps))
            runs_b.append(await _run_copy(sessions[1], k, steps))
        a, b = _medians(runs_a), _medians(runs_b)
        big = await big_resume(base, big_mib, 512) if big_mib else {}
    return {
        "loop_cpu_ratio": round(b["loop_cpu_ms"] / a["loop_cpu_ms"], 2),
        f"loop_cpu_ms_{small}": round(a["loop_cpu_ms"], 2),
        f"loop_cpu_ms_{large}": round(b["loop_cpu_ms"], 2),
        f"sdk_cpu_ms_{small}": round(a["sdk_cpu_ms"], 2),
        f"sdk_cpu_ms_{large}": round(b["sdk_cpu_ms"], 2),
        "cpu_runs": cpu_runs,
        **big,
        "initialize_ms": round(init_ms, 1),
        "python_ms": round(bare_ms, 1),
        "initialize_ratio": round(init_ms / bare_ms, 2),
        "step_overhead_ratio": round(b["overhead_ms"] / a["overhead_ms"], 2),
        "request_bytes_ratio": round(b["request_bytes"] / a["request_bytes"], 2),
        f"step_overhead_ms_{small}": round(a["overhead_ms"], 2),
        f"step_overhead_ms_{large}": round(b["overhead_ms"], 2),
        f"request_bytes_{small}": int(a["request_bytes"]),
        f"request_bytes_{large}": int(b["request_bytes"]),
        "runs": runs,
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks.daemon", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15, help="spawns for initialize_ms (default 15)")
    p.add_argument("--steps", type=int, default=30, help="tool steps per session (default 30)")
    p.add_argument("--cpu-runs", type=int, default=3, help="runs of each session size (default 3; medians)")
    p.add_argument("--small", type=int, default=100, help="messages of the small session (default 100)")
    p.add_argument("--large", type=int, default=5000, help="messages of the large session (default 5000)")
    p.add_argument(
        "--big-mib", type=float, default=100, help="size of the compacted session to resume (0: skip)"
    )
    p.add_argument("--sdk-share", metavar="BODIES", help=argparse.SUPPRESS)  # internal: `_sdk_share_s`
    args = p.parse_args(argv)
    if args.sdk_share:
        sys.stdout.write(f"{asyncio.run(sdk_cpu_s(Path(args.sdk_share)))}\n")
        return 0
    try:
        result = asyncio.run(run(args.runs, args.steps, args.small, args.large, args.big_mib, args.cpu_runs))
    except RuntimeError as exc:
        sys.stderr.write(f"tests.benchmarks.daemon: {exc}; nothing published\n")
        return 1
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
