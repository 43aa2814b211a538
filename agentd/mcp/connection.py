"""One MCP server of one session, through the official `mcp` SDK (issue 11).

Owns: `ServerSpec` (a server as configured, or as an ACP client passes it), `MCPConnection` (start, list
the tools, call one, notice a dead server and restart it on the next call, stop), `MCPStartError` and
`MCPCallError`. The SDK is imported here only, and lazily (it is heavy; the daemon answers `initialize`
first). Imports the standard library, pydantic and `agentd.sandbox.launcher`; never pygls, lsprotocol, acp
or `agentd.adapters`.

Each connection runs in its own asyncio task: the SDK's `Client` is an anyio context, entered and left in
that one task; calls from the session's task go through it. A stdio server gets, as its whole environment,
the SDK's safe defaults (HOME, LOGNAME, PATH, SHELL, TERM, USER) plus the `env` its configuration gives it,
minus any provider API key variable (never passed on). It is started through the session's `Launcher`, as
`run_command` is (issue 12 §1): inside the sandbox when one is active (the workspace writable, the rest
read-only, the data dir, config and credential stores hidden, no network unless `network = true`, agentd's
process invisible, everything it starts dies with it), unless its `sandbox = false`. Its stderr goes to a
temporary file, whose tail explains a failed start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentd.mcp import bounded
from agentd.mcpnames import server_problem
from agentd.sandbox.launcher import Launcher, SandboxRefused
from agentd.text import visible

log = logging.getLogger("agentd.mcp")

STDERR_TAIL_CHARS = 1500
STOP_WAIT_S = 10.0
State = Literal["stopped", "starting", "running", "failed", "dead"]


class ServerSpec(BaseModel):
    """One MCP server: `command`/`args`/`env` (stdio) or `url`/`headers` (Streamable HTTP); `timeout_s` per
    call (None: the session's `tools.run_timeout_s`); `sandbox`: a stdio server runs in the session's
    sandbox when it is active; `network`: there, it may use the network."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = Field(default_factory=dict)
    timeout_s: float | None = None
    sandbox: bool = True
    network: bool = False

    @classmethod
    def from_acp(cls, raw: Mapping[str, Any]) -> ServerSpec:
        """An ACP `McpServer` (`session/new` `mcpServers`): `{name, command, args, env: [{name, value}]}`,
        or `{type: "http", name, url, headers: [{name, value}]}`. Raises ValueError for anything else, and
        for a name agentd.mcpnames refuses (break11: it would make tool names the API refuses)."""
        problem = server_problem(str(raw.get("name", "")))
        if problem is not None:
            raise ValueError(problem)
        pairs = {p["name"]: p["value"] for p in raw.get("env") or raw.get("headers") or []}
        if raw.get("command"):
            return cls(
                name=str(raw["name"]),
                command=str(raw["command"]),
                args=tuple(raw.get("args") or ()),
                env=pairs,
            )
        if raw.get("url") and raw.get("type", "http") == "http":
            return cls(name=str(raw["name"]), url=str(raw["url"]), headers=pairs)
        raise ValueError(f"unsupported MCP server {raw.get('name')!r}: give a command (stdio) or an http url")


class MCPStartError(Exception):
    """A server that did not start; `str()` names it, says why and ends with its stderr tail."""


class MCPCallError(Exception):
    """A call that failed without a result; `dead`: the server is gone (it is restarted on the next call)."""

    def __init__(self, text: str, *, dead: bool) -> None:
        super().__init__(text)
        self.dead = dead


def _tail(f: IO[str] | None) -> str:
    if f is None:
        return ""
    with contextlib.suppress(OSError, ValueError):
        f.flush()
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - STDERR_TAIL_CHARS * 4))
        return f.read()[-STDERR_TAIL_CHARS:].strip()
    return ""


def _why(exc: BaseException) -> str:
    """`Type: message` of the innermost error (anyio wraps them in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


SERVER_ERROR_MAX_CHARS = 2000


def server_error(exc: BaseException) -> str:
    """The text of an error answer from the server, for the model: its message, then its `data` (JSON),
    at most `SERVER_ERROR_MAX_CHARS`, control characters escaped (`agentd.text.visible`)."""
    error = getattr(exc, "error", None)
    message = str(getattr(error, "message", None) or exc)
    data = getattr(error, "data", None)
    code = getattr(error, "code", None)
    text = f"the server answered with an error{f' ({code})' if code is not None else ''}: {message}"
    if data is not None:
        text += f"; data: {json.dumps(data, ensure_ascii=False, default=str)}"
    if len(text) > SERVER_ERROR_MAX_CHARS:
        text = text[:SERVER_ERROR_MAX_CHARS] + f"... [{len(text) - SERVER_ERROR_MAX_CHARS} more characters]"
    return visible(text)


def _is_protocol_error(exc: BaseException) -> bool:
    """An error answer from a live server (an `MCPError`), as opposed to a broken connection (which the
    SDK reports as an `MCPError` with code `CONNECTION_CLOSED`)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


class MCPConnection:
    """One server for one session. `state`: stopped, starting, running, failed (did not start), dead (it
    stopped answering; restarted on the next call). `tools`: the server's tool list from the last start."""

    def __init__(
        self, spec: ServerSpec, cwd: Path, *, secret_env: frozenset[str], start_timeout_s: float,
        launcher: Launcher | None = None, max_message_bytes: int = bounded.MAX_MESSAGE_BYTES,
    ) -> None:  # fmt: skip
        self.spec = spec
        self.launcher = launcher
        self.sandboxed = False  # the last start ran the server inside the sandbox
        self._argv: list[str] = []
        self._tmpdir: Path | None = None
        self.cwd = cwd
        self.secret_env = secret_env
        self.start_timeout_s = start_timeout_s
        self.state: State = "stopped"
        self.error: str | None = None
        self.tools: list[Any] = []
        self.starts = 0
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._errlog: IO[str] | None = None
        self._closing: set[asyncio.Task[None]] = set()  # abandoned starts still cleaning up
        self.max_message_bytes = max_message_bytes
        self._over = 0  # the size of a message over the limit during the current call

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        """The SDK transport of this server, its messages bounded (`agentd.mcp.bounded`)."""
        if self.spec.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            client = bounded.http_client(dict(self.spec.headers), self.max_message_bytes, self._note_over)
            stack.push_async_callback(client.aclose)
            return streamable_http_client(self.spec.url, http_client=client, max_sse_event_size=None)
        from mcp.client.stdio import StdioServerParameters

        env = {k: v for k, v in self.spec.env.items() if k not in self.secret_env}
        params = StdioServerParameters(command=self._argv[0], args=self._argv[1:], env=env, cwd=str(self.cwd))
        self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        return bounded.stdio_client(params, self._errlog, self.max_message_bytes, self._note_over)

    def _note_over(self, size: int) -> None:
        self._over = max(self._over, size)

    def _command(self) -> list[str]:
        """The stdio server's command line: through the session's launcher (inside the sandbox when it is
        active and `spec.sandbox`; else under the process-lifetime helper), as `run_command` is. Raises
        `SandboxRefused` when `sandbox = "required"` cannot be honoured."""
        argv = [self.spec.command or "", *self.spec.args]
        self.sandboxed, self._tmpdir = False, None
        if self.spec.url is not None or self.launcher is None:
            return argv
        try:
            launch = self.launcher.launch(
                argv, self.cwd, network=self.spec.network, unsandboxed=not self.spec.sandbox,
                config_env=self.spec.env,
            )  # fmt: skip
        except SandboxRefused:
            why = (
                "this server is configured with sandbox = false"
                if self.launcher.status.available
                else f"no sandbox works here ({self.launcher.status.problem})"
            )
            raise SandboxRefused(f'sandbox = "required" and {why}') from None
        self.sandboxed, self._tmpdir = launch.sandboxed, launch.tmpdir
        return launch.argv

    async def start(self) -> None:
        """Start the server and list its tools (every page). Raises `MCPStartError` (start failure, no
        answer within `start_timeout_s`, a sandbox that is required but cannot hold it); the connection is
        then `failed`."""
        await self.stop()
        self.state, self.error = "starting", None
        self.starts += 1
        try:
            self._argv = await asyncio.to_thread(self._command)  # the sandbox's guard walks the workspace
        except SandboxRefused as exc:
            self.state, self.error = "failed", str(exc)
            raise MCPStartError(f"MCP server {self.spec.name} did not start ({self.error})") from None
        self._stop = asyncio.Event()
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.ensure_future(self._run(ready, self._stop))
        try:
            self.tools = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout_s)
        except BaseException as exc:
            why = (
                f"no answer within {self.start_timeout_s:g} s" if isinstance(exc, TimeoutError) else _why(exc)
            )
            ready.cancel()  # a late answer or error of the abandoned start is dropped, never left unretrieved
            self._abandon()
            tail = _tail(self._errlog)
            self.state, self.error = "failed", why + (f"; stderr: {tail}" if tail else "")
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise MCPStartError(f"MCP server {self.spec.name} did not start ({self.error})") from None
        self.state = "running"

    async def _run(self, ready: asyncio.Future[list[Any]], stop: asyncio.Event) -> None:
        from mcp import Client

        try:
            async with (
                contextlib.AsyncExitStack() as stack,
                Client(self._transport(stack), client_info=_client_info()) as client,
            ):
                self._client = client
                tools, cursor = [], None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
                ready.set_result(tools)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            elif not stop.is_set():
                log.warning("MCP server %s stopped: %r", self.spec.name, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None
            if self.state == "running" and not stop.is_set():
                self.state = "dead"

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """`tools/call`; returns the SDK's `CallToolResult`. A dead or failed server is started again
        first. Raises `MCPCallError` (`dead=True` when the connection broke: the server is restarted on
        the next call), `TimeoutError`; asyncio cancellation propagates (the SDK tells the server)."""
        if self.state in ("dead", "failed", "stopped") or self._client is None:
            try:
                await self.start()
            except MCPStartError as exc:
                raise MCPCallError(str(exc), dead=True) from None
        client, self._over = self._client, 0
        try:
            return await asyncio.wait_for(client.call_tool(tool, arguments), timeout_s)
        except (TimeoutError, asyncio.CancelledError):
            raise
        except Exception as exc:
            too_large = (
                bounded.over_limit_text(self._over, self.max_message_bytes, partial=self.spec.url is not None)
                if self._over
                else None
            )
            if too_large is not None and (_is_protocol_error(exc) or self.spec.url is not None):
                raise MCPCallError(too_large, dead=False) from None  # the server stays usable
            if _is_protocol_error(exc):
                raise MCPCallError(server_error(exc), dead=False) from None
            self.state, self.error = "dead", too_large or _why(exc)
            await self.stop(keep_state=True)
            tail = _tail(self._errlog)
            raise MCPCallError(
                f"the MCP server {self.spec.name} stopped during the call ({self.error})"
                + (f"; stderr: {tail}" if tail else "")
                + "; it will be started again on the next call",
                dead=True,
            ) from None

    def _abandon(self) -> None:
        """Give up a start that failed or timed out without waiting for it: its task is cancelled and
        cleans up in the background (the SDK closes stdin, then terminates the process tree); `stop()`
        waits for it later. So a server that never answers costs its start no more than the timeout."""
        task, self._task = self._task, None
        if self._stop is not None:
            self._stop.set()
        if task is not None and not task.done():
            task.cancel()
            task.add_done_callback(_retrieve)
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def stop(self, *, keep_state: bool = False) -> None:
        """Stop the server (the SDK closes stdin, then terminates the process tree) and wait for it (and
        for any abandoned start)."""
        task, stop = self._task, self._stop
        self._task = None
        if stop is not None:
            stop.set()
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_WAIT_S)
            except BaseException:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        for old in list(self._closing):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(old), STOP_WAIT_S)
        if not keep_state and self.state in ("running", "starting"):
            self.state = "stopped"
        if self._tmpdir is not None:  # the private temporary folder of a sandbox-exec start (macOS)
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def stop_soon(self) -> None:
        """Ask the server to stop without waiting (from synchronous code; the task finishes on its own)."""
        if self._stop is not None:
            self._stop.set()
        if self.state in ("running", "starting"):
            self.state = "stopped"


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark an abandoned task's outcome as seen (no "exception was never retrieved" on stderr)."""
    if not task.cancelled():
        task.exception()


def _client_info() -> Any:
    from mcp_types import Implementation

    import agentd

    return Implementation(name="agentd", version=agentd.__version__)
