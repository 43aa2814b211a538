"""Drive a real agentd daemon and a real emulator process, for the reliability report and its tests.

Owns: `Daemon` (one `python -m agentd` over stdio, as an editor runs it: frames parsed as they arrive and
stamped with `time.monotonic()`, updates kept per session, server requests answered by a policy),
`EmulatorProc` (`python -m agentd.testing.emulator` in its own process, so the measuring process parses
frames only; the journal over `/_emu/journal`) and `isolated_env()` (a fresh HOME, config dir, data dir and
canary API key; the proxies of TESTING.md §6 rule 5). Monotonic times are comparable across the three
processes (one machine, one clock). Not a test module: imported by `tests.reliability.report` and tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import secrets
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
Answer = Callable[[dict[str, Any]], Awaitable[Any]]


def canary_key() -> str:
    """A fake Anthropic key unique to a run (TESTING.md §4.6)."""
    return "sk-ant-emu-" + secrets.token_hex(16)


def isolated_env(base: Path, key: str, **extra: str) -> dict[str, str]:
    """The whole environment of a daemon whose files all live under `base`."""
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "AGENTD_"))}
    env.update(
        HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"),
        AGENTD_CONFIG_DIR=str(base / "config"), AGENTD_DATA_DIR=str(base / "data"), PYTHONPATH=str(ROOT),
        ANTHROPIC_API_KEY=key, OPENAI_API_KEY=key, HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9", ALL_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )  # fmt: skip
    env.update(extra)
    return env


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def allow_once(msg: dict[str, Any]) -> Any:
    """The default answer to server requests: allow approvals, pick the first action, accept edits."""
    method = msg.get("method")
    if method == "agentd/session/requestPermission":
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    if method == "window/showMessageRequest":
        actions = (msg.get("params") or {}).get("actions") or []
        return actions[0] if actions else None
    if method == "workspace/applyEdit":
        return {"applied": True}
    return None


@dataclass
class Update:
    at: float  # time.monotonic() when the frame was parsed
    update: dict[str, Any]


@dataclass
class Daemon:
    """One agentd over stdio (see the module docstring)."""

    proc: asyncio.subprocess.Process
    answer: Answer = allow_once
    updates: dict[str, list[Update]] = field(default_factory=lambda: defaultdict(list))
    messages: list[tuple[float, dict[str, Any]]] = field(default_factory=list)  # everything else received
    stdout_bytes: int = 0
    _pending: dict[Any, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _reader: asyncio.Task[None] | None = None
    framing_errors: list[str] = field(default_factory=list)
    _answering: set[asyncio.Future[None]] = field(default_factory=set)

    @classmethod
    async def spawn(cls, env: dict[str, str], *args: str, stderr: Path | None = None) -> Daemon:
        err = stderr.open("ab") if stderr is not None else asyncio.subprocess.DEVNULL
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentd", *args, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=err, env=env, cwd=str(ROOT), limit=1 << 24,
            )  # fmt: skip
        finally:
            if stderr is not None and not isinstance(err, int):
                err.close()
        d = cls(proc)
        d._reader = asyncio.ensure_future(d._read())
        return d

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.returncode is None

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        while chunk := await self.proc.stdout.read(1 << 20):
            self.stdout_bytes += len(chunk)
            buf += chunk
            while True:
                head, sep, rest = buf.partition(b"\r\n\r\n")
                if not sep:
                    break
                try:
                    length = int(head.split(b":", 1)[1])
                except (IndexError, ValueError):
                    self.framing_errors.append(head[:200].decode("latin-1"))
                    return
                if len(rest) < length:
                    break
                body, buf = rest[:length], rest[length:]
                self._route(time.monotonic(), json.loads(body))
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("agentd closed its stdout"))

    def _route(self, at: float, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method == "agentd/session/update":
            params = msg["params"]
            self.updates[params["sessionId"]].append(Update(at, params["update"]))
        elif method is not None and "id" in msg:
            task = asyncio.ensure_future(self._answer(msg))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        elif method is None and msg.get("id") in self._pending:
            fut = self._pending.pop(msg["id"])
            if not fut.done():
                fut.set_result(msg)
        else:
            self.messages.append((at, msg))

    async def _answer(self, msg: dict[str, Any]) -> None:
        result = await self.answer(msg)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    async def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame(obj) if not isinstance(obj, bytes) else obj)
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Any = None, timeout: float = 120.0) -> dict[str, Any]:
        """The whole response message (`result` or `error`)."""
        msg_id = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await asyncio.wait_for(fut, timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self, workspace: Path, options: dict[str, Any] | None = None) -> dict[str, Any]:
        caps = {"experimental": {"agentd": {"protocolVersion": 1, "requestPermission": True}},
                "workspace": {"applyEdit": False}, "window": {"workDoneProgress": False}}  # fmt: skip
        params = {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": caps,
                  "workspaceFolders": [{"uri": workspace.as_uri(), "name": workspace.name}],
                  "initializationOptions": options or {}}  # fmt: skip
        reply = await self.request("initialize", params, 60)
        await self.notify("initialized", {})
        return reply

    async def new_session(self, cwd: Path) -> str:
        reply = await self.request("agentd/session/new", {"cwd": str(cwd)})
        return str(reply["result"]["sessionId"])

    async def prompt(self, sid: str, text: str, timeout: float = 120.0) -> dict[str, Any]:
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        return await self.request("agentd/session/prompt", params, timeout)

    async def stop(self, timeout: float = 30.0) -> int | None:
        """shutdown + exit (or a kill when it does not answer); the exit code."""
        if self.alive():
            with contextlib.suppress(Exception):
                await self.request("shutdown", None, timeout)
                await self.notify("exit")
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.kill()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 5)
        answering = list(self._answering)
        for task in answering:  # an approval the daemon asked before it died is never answered
            task.cancel()
        await asyncio.gather(*answering, return_exceptions=True)
        return self.proc.returncode

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        for task in list(self._answering):
            task.cancel()


@dataclass
class EmulatorProc:
    """The emulator as a child process (`python -m agentd.testing.emulator`)."""

    proc: asyncio.subprocess.Process
    url: str

    @classmethod
    async def start(cls, scenario: dict[str, Any], path: Path, api: str = "anthropic") -> EmulatorProc:
        path.write_text(json.dumps(scenario), encoding="utf-8")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentd.testing.emulator", "--api", api, "--port", "0", "--scenario", str(path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
        if not line.startswith("http://"):
            raise RuntimeError(f"the emulator did not start: {(await proc.stderr.read()).decode()[-500:]}")
        return cls(proc, line)

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=60) as resp:
            return json.loads(resp.read())

    async def journal(self) -> list[dict[str, Any]]:
        return list(await asyncio.to_thread(self._get, "/_emu/journal"))

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 10)
        if self.proc.returncode is None:
            self.proc.kill()
