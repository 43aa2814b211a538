"""Harness of the protocol tier (TESTING.md §1.4): the real `python -m agentd` subprocess driven by pytest-lsp as
Neovim 0.11 and as VS Code 1.65 (`--stdio` added, as vscode-languageclient does).

- `AgentdTestProtocol` maps `agentd/*` to the same plain-dict envelopes as `agentd/adapters/lsp/wire.py`.
- `Recorder` collects `agentd/session/update` params and answers every server->client request
  (`agentd/session/requestPermission`, `window/showMessageRequest`, `workspace/applyEdit`); `expect(pred)`
  waits, with a deadline, for a predicate over what was recorded, and `of(sid, kind)` lists one session's
  updates (tests/recorded.py, shared with the acp harness).
- `daemon_env()` is the daemon's whole environment (`server_env` replaces it, TESTING.md §2 item 4;
  tests/recorded.py's `agentd_env`).
- `start_agentd()` spawns a daemon with its own data dir and emulator URL and initializes it.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from agentd.adapters.lsp.wire import WireMixin
from tests.recorded import ROOT, Recording  # noqa: F401 (ROOT: tests import it from here)
from tests.recorded import agentd_env as daemon_env  # noqa: F401 (the tier's name for it)

CLIENTS = {"neovim": ("neovim@v0.11.0", []), "vscode": ("visual-studio-code@v1.65.2", ["--stdio"])}
AGENTD_CAP = {"protocolVersion": 1, "requestPermission": True, "saveAfterApply": True}
ALLOW_ONCE = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
DEADLINE = 15.0


class AgentdTestProtocol(WireMixin, pytest_lsp.LanguageClientProtocol):  # type: ignore[misc]
    """pytest-lsp's client protocol with dict envelopes for `agentd/*` (TESTING.md §2 item 6)."""


def make_agentd_test_client() -> LanguageClient:
    client = LanguageClient(protocol_cls=AgentdTestProtocol, converter_factory=default_converter)
    pytest_lsp.client.register_lsp_features(client)
    return client


def with_agentd(
    caps: types.ClientCapabilities, agentd: dict[str, Any] | None = AGENTD_CAP
) -> types.ClientCapabilities:
    caps = copy.deepcopy(caps)
    if agentd is not None:
        caps.experimental = {**(caps.experimental or {}), "agentd": dict(agentd)}  # type: ignore[dict-item]
    return caps


Answer = Callable[[Any], Any]


@dataclass
class Recorder(Recording):
    """What the client saw, and how it answers the server's requests."""

    deadline = DEADLINE

    client: LanguageClient
    updates: list[dict[str, Any]] = field(default_factory=list)
    permissions: list[dict[str, Any]] = field(default_factory=list)
    message_requests: list[dict[str, Any]] = field(default_factory=list)
    apply_edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    cancels: list[Any] = field(default_factory=list)
    permission_answer: Answer = lambda _p: ALLOW_ONCE
    message_answer: Answer = lambda _p: {"title": "Allow once"}
    apply_answer: Answer = lambda _p: {"applied": True}
    _waiters: list[tuple[Callable[[Any], bool], asyncio.Future[None]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        c = self.client

        @c.feature("agentd/session/update")
        def _update(params: Any) -> None:
            self.updates.append(params)
            self.check()

        @c.feature("agentd/session/requestPermission")
        async def _permission(params: Any) -> Any:
            self.permissions.append(params)
            self.check()
            return await _answer(self.permission_answer, params)

        @c.feature("window/showMessageRequest")
        async def _message_request(params: Any) -> Any:
            self.message_requests.append(params)
            self.check()
            return await _answer(self.message_answer, params)

        @c.feature(types.WORKSPACE_APPLY_EDIT)
        async def _apply(params: types.ApplyWorkspaceEditParams) -> Any:
            self.apply_edits.append(params)
            self.check()
            return await _answer(self.apply_answer, params)


async def _answer(answer: Answer, params: Any) -> Any:
    result = answer(params)
    return await result if inspect.isawaitable(result) else result


@dataclass
class Agentd:
    """One daemon driven by one client."""

    client: LanguageClient
    rec: Recorder
    name: str
    init: types.InitializeResult | None = None

    async def request(self, method: str, params: Any, timeout: float = DEADLINE) -> Any:
        return await asyncio.wait_for(self.client.protocol.send_request_async(method, params), timeout)

    async def error(self, method: str, params: Any, timeout: float = DEADLINE) -> dict[str, Any]:
        """The error of a request that must fail, as `{code, message, data}`."""
        try:
            result = await self.request(method, params, timeout)
        except JsonRpcException as exc:
            return {"code": exc.code, "message": exc.message, "data": exc.data}
        raise AssertionError(f"{method} succeeded with {result!r}; an error was expected")

    def notify(self, method: str, params: Any) -> None:
        self.client.protocol.notify(method, params)

    async def new(self, cwd: Path) -> str:
        result = await self.request("agentd/session/new", {"cwd": str(cwd)})
        return str(result["sessionId"])

    async def prompt(self, session_id: str, text: str, timeout: float = 30.0) -> str:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        result = await self.request("agentd/session/prompt", params, timeout)
        return str(result["stopReason"])

    async def stop(self) -> int | None:
        """shutdown + exit, then wait for the process; returns its exit code."""
        await asyncio.wait_for(self.client.shutdown_session(), DEADLINE)
        await asyncio.wait_for(self.client.stop(), DEADLINE)
        server = self.client._server
        return server.returncode if server is not None else None


async def start_agentd(
    name: str, env: dict[str, str], folders: list[Path], *, agentd_cap: dict[str, Any] | None = AGENTD_CAP,
    init_options: dict[str, Any] | None = None, args: tuple[str, ...] = (),
) -> Agentd:  # fmt: skip
    spec, extra = CLIENTS[name]
    config = ClientServerConfig(server_command=[sys.executable, "-m", "agentd", *extra, *args], server_env=env,
                                client_factory=make_agentd_test_client)  # fmt: skip
    client = await asyncio.wait_for(config.start(), DEADLINE)
    assert isinstance(client, LanguageClient)
    rec = Recorder(client)
    params = types.InitializeParams(
        capabilities=with_agentd(client_capabilities(spec), agentd_cap),
        root_uri=folders[0].as_uri() if folders else None,
        workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders] or None,
        initialization_options=init_options,
    )
    init = await asyncio.wait_for(client.initialize_session(params), DEADLINE)
    return Agentd(client=client, rec=rec, name=name, init=init)


def session_files(data_dir: Path, session_id: str) -> Path:
    return data_dir / "sessions" / session_id


def write_scenario(path: Path, scenario: dict[str, Any]) -> Path:
    import json

    path.write_text(json.dumps(scenario), encoding="utf-8")
    return path


_VOLATILE = [
    (re.compile(r"sess_[0-9a-z]{26}"), "<sess>"),
    (re.compile(r"msg_[0-9a-z]{26}"), "<msg>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<ts>"),
]
_COUNTS = frozenset({"used", "amount", "durationMs", "inputTokens", "outputTokens", "cacheReadTokens",
                     "cacheWriteTokens", "pid", "usedTokens", "tokensBefore", "tokensAfter"})  # fmt: skip


def scrub(obj: Any, paths: dict[str, str] | None = None) -> Any:
    """Volatile values replaced (TESTING.md §6 rule 2): ids, times, tmp paths (`paths`: real path ->
    placeholder, longest first) and token/cost/duration figures (`<n>`)."""
    paths = paths or {}
    if isinstance(obj, dict):
        return {
            k: ("<n>" if k in _COUNTS and isinstance(v, (int, float)) else scrub(v, paths))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [scrub(v, paths) for v in obj]
    if isinstance(obj, str):
        for real, name in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            obj = obj.replace(real, name)
        for pattern, name in _VOLATILE:
            obj = pattern.sub(name, obj)
    return obj


def merged_chunks(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive `agent_message_chunk`s of one message joined into one (chunk sizes are the stream's)."""
    out: list[dict[str, Any]] = []
    for u in updates:
        prev = out[-1] if out else None
        if (prev is not None and u["sessionUpdate"] == "agent_message_chunk" == prev["sessionUpdate"]
                and u.get("messageId") == prev.get("messageId")):  # fmt: skip
            prev["content"] = {"type": "text", "text": prev["content"]["text"] + u["content"]["text"]}
        else:
            out.append(copy.deepcopy(u))
    return out


async def wait_until(pred: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    """A readiness poll with a deadline (TESTING.md §6 rule 3) for state outside the protocol (files, pids)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def frame(obj: Any) -> bytes:
    """One LSP frame for a JSON value (or raw body bytes)."""
    import json

    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def parse_frames(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """Every complete `Content-Length` frame of `data` as JSON, and the bytes left over (TESTING.md §1.4:
    stdout purity). Raises AssertionError for anything that is not a well-formed frame."""
    import json

    out: list[dict[str, Any]] = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            return out, data
        lines = head.split(b"\r\n")
        assert all(re.fullmatch(rb"[A-Za-z-]+: [^\r\n]+", ln) for ln in lines), (
            f"bad header block {head[:200]!r}"
        )
        length = [int(ln.split(b":")[1]) for ln in lines if ln.lower().startswith(b"content-length:")]
        assert len(length) == 1, f"no Content-Length in {head[:200]!r}"
        if len(rest) < length[0]:
            return out, data
        out.append(json.loads(rest[: length[0]]))
        data = rest[length[0] :]
    return out, b""


class RawPipe:
    """`python -m agentd` over raw pipes: bytes in, every stdout byte kept and parsed as frames."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stdout = b""
        self.frames: list[dict[str, Any]] = []
        self._seen = 0

    @classmethod
    async def start(cls, env: dict[str, str], *args: str) -> RawPipe:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentd", *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env)  # fmt: skip
        return cls(proc)

    async def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def send(self, obj: Any) -> None:
        await self.write(frame(obj))

    async def next(
        self, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = DEADLINE
    ) -> dict[str, Any]:
        """The first unseen frame matching `pred`; server requests seen on the way are answered."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            while self._seen < len(self.frames):
                msg = self.frames[self._seen]
                self._seen += 1
                if "method" in msg and "id" in msg:
                    await self._answer(msg)
                if pred(msg):
                    return msg
            assert self.proc.stdout is not None
            try:
                chunk = await asyncio.wait_for(
                    self.proc.stdout.read(65536), max(0.01, deadline - loop.time())
                )
            except TimeoutError:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}") from None
            if not chunk:
                raise AssertionError(f"agentd closed stdout while waiting for {what}")
            self.stdout += chunk
            self.frames, _ = parse_frames(self.stdout)

    async def _answer(self, msg: dict[str, Any]) -> None:
        result: Any = None
        if msg["method"] == "agentd/session/requestPermission":
            result = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        elif msg["method"] == "window/showMessageRequest":
            result = msg["params"]["actions"][0]
        await self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    async def reply(self, msg_id: Any, timeout: float = DEADLINE) -> dict[str, Any]:
        return await self.next(lambda m: "method" not in m and m.get("id") == msg_id, f"the answer to {msg_id!r}",
                               timeout)  # fmt: skip

    async def finish(self, timeout: float = 10.0) -> tuple[int, bytes]:
        """Close stdin, read stdout to the end, wait for the exit; (exit code, stderr)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        if not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        out, err = await asyncio.wait_for(
            asyncio.gather(self.proc.stdout.read(), self.proc.stderr.read()), timeout
        )
        self.stdout += out
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        self.frames, _ = parse_frames(self.stdout)
        return code, err

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


def init_params(
    folder: Path | None, options: dict[str, Any] | None = None, agentd: bool = True
) -> dict[str, Any]:
    caps: dict[str, Any] = {"window": {"workDoneProgress": False}}
    if agentd:
        caps["experimental"] = {"agentd": dict(AGENTD_CAP)}
    params: dict[str, Any] = {"processId": None, "capabilities": caps, "initializationOptions": options or {}}
    if folder is not None:
        params["rootUri"] = folder.as_uri()
        params["workspaceFolders"] = [{"uri": folder.as_uri(), "name": folder.name}]
    return params
