"""Hostile frames and params against the ACP adapter (issue 16 §6): its part of `fuzz_frames`, `daemon_alive`.

As tests/reliability/fuzz.py does for LSP: hypothesis generates (derandomized) JSON-RPC lines for every ACP
method agentd serves (session/new, load, resume, list, prompt, set_mode, set_config_option, close, cancel,
authenticate, initialize) and unknown ones, with ids of every JSON type and params that are valid-looking,
mutated or arbitrary JSON (deep nesting, huge strings, lone surrogates, NUL, bidi controls), plus raw lines
that are not JSON or not UTF-8. One `agentd --acp` (scripted provider with no answers, so a prompt that gets
through fails cleanly) receives them after `initialize`; every `PROBE_EVERY` lines a `session/list` request
must be answered (the params' shared keys, the flood and its probes are fuzz.py's). At the
end: the daemon is alive and answers, every line of its stdout is a JSON-RPC object, and its stderr holds no
traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.driver import ROOT, canary_key, isolated_env
from tests.reliability.fuzz import IDS, JSON, SCALARS, flood, params, prepare, traceback_problems

METHODS = ["initialize", "authenticate", "session/new", "session/load", "session/resume", "session/list",
           "session/prompt", "session/set_mode", "session/set_config_option", "session/close",
           "session/cancel", "$/cancel_request", "fs/read_text_file", "unknown/method"]  # fmt: skip


ACP_PARAMS = params(
    mcpServers=st.one_of(st.just([]), JSON), modeId=st.one_of(st.just("plan"), SCALARS),
    protocolVersion=st.one_of(st.just(1), SCALARS), configId=SCALARS, value=SCALARS,
)  # fmt: skip


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line (without its newline)."""
    kind = draw(st.integers(0, 9))
    if kind == 0:  # not JSON, not UTF-8, not an object
        raw = draw(st.one_of(st.binary(max_size=200), st.just(b"\xff\xfe{}"), st.just(b"{" * 100_000),
                             st.just(b"[]"), st.just(b"42")))  # fmt: skip
        return raw.replace(b"\n", b" ")
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", None]))}
    if draw(st.booleans()):
        msg["id"] = draw(IDS)
    if kind != 1:
        msg["method"] = draw(st.one_of(st.sampled_from(METHODS), st.text(max_size=30)))
    if draw(st.integers(0, 4)):
        msg["params"] = draw(ACP_PARAMS)
    try:
        return json.dumps(msg).encode()
    except (ValueError, RecursionError):
        return b"{}"


def generate(examples: int) -> list[bytes]:
    out: list[bytes] = []

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.lists(lines(), min_size=1, max_size=10))
    def collect(batch: list[bytes]) -> None:
        out.extend(batch)

    collect()
    return out


class AcpDaemon:
    """`agentd --acp` over a pipe: lines out, responses routed by id, server requests refused."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.bad_lines: list[str] = []
        self.ids = itertools.count(1_000_000_000)
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def spawn(cls, env: dict[str, str], stderr: Path) -> AcpDaemon:
        with stderr.open("ab") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentd", "--acp", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=err, env=env, cwd=str(ROOT), limit=1 << 26,
            )  # fmt: skip
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                msg = json.loads(line)
                assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0"
            except (ValueError, AssertionError):
                self.bad_lines.append(line[:200].decode("latin-1"))
                continue
            fut = self.pending.pop(msg.get("id"), None) if "method" not in msg else None
            if fut is not None and not fut.done():
                fut.set_result(msg)
            elif "method" in msg and "id" in msg:  # a server request: refuse it
                with contextlib.suppress(ConnectionError):
                    await self.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                                                "error": {"code": -32601, "message": "no"}}).encode())  # fmt: skip
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("agentd closed its stdout"))

    async def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Any, timeout: float = 60) -> dict[str, Any]:
        msg_id = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = fut
        await self.send(
            json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
        )
        return await asyncio.wait_for(fut, timeout)

    async def answers(self) -> bool:
        try:
            return "result" in await self.request("session/list", {})
        except (TimeoutError, ConnectionError):
            return False

    def alive(self) -> bool:
        return self.proc.returncode is None

    async def stop(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.reader, 5)


async def fuzz_acp(base: Path, examples: int = 200) -> dict[str, Any]:
    """Send the generated lines; `fuzz_frames_acp`, `daemon_alive_acp`, `fuzz_problems_acp`, `key`."""
    bodies = generate(examples)
    _ws, scenario = prepare(base)
    config = base / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text(f'provider = "scripted"\nscenario = "{scenario}"\n', encoding="utf-8")
    key = canary_key()
    daemon = await AcpDaemon.spawn(isolated_env(base, key), base / "stderr")
    problems: list[str] = []
    sent, alive = 0, False
    try:
        init = await daemon.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, 120)
        if "result" not in init:
            problems.append(f"initialize failed: {init}")
        sent, flooded = await flood(bodies, daemon.send, daemon.answers, "line")
        problems += flooded
        alive = not flooded and daemon.alive() and await daemon.answers()
    except (ConnectionError, BrokenPipeError) as exc:
        problems.append(f"the connection broke at initialize: {exc}")
    finally:
        await daemon.stop()
    problems += traceback_problems(base / "stderr")
    problems += [f"a line on stdout that is not a JSON-RPC object: {b!r}" for b in daemon.bad_lines]
    return {"fuzz_frames_acp": sent, "daemon_alive_acp": alive and not problems,
            "fuzz_problems_acp": problems, "key": key}  # fmt: skip
