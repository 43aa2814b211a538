"""Harness of the acp tier (TESTING.md §1.4): the real `python -m agentd --acp` subprocess driven by the
`agent-client-protocol` SDK's client side, as an editor drives it.

- `Editor` is the SDK `Client`: it records every message the agent sends (raw, through a stream observer:
  `updates`, `permissions`, `reads`, `writes`), answers `session/request_permission` from `answers` (a list of
  option ids, consumed in order; `cancelled` for a cancelled outcome; not before `hold` is set, when given),
  and serves `fs/read_text_file` /
  `fs/write_text_file` from the disk, or from `buffers` (unsaved editor text by path) when given (a write
  raises `write_error` when set);
  `expect(pred)` waits, with a deadline, for a predicate over what was recorded, and `of(sid, kind)` lists
  one session's updates (tests/recorded.py, shared with the LSP harness); `agent_env()` is agentd's
  environment (the same one as the LSP harness's `daemon_env()`).
- `start()` spawns agentd with its own data dir and emulator URL, stderr to a file, and
  initializes it; `Agent.kill()` ends it with SIGKILL (as an editor closing a window may).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import connect_to_agent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

from tests.recorded import ROOT, Recording
from tests.recorded import agentd_env as agent_env  # noqa: F401 (the tier's name for it)

DEADLINE = 20.0


@dataclass
class Editor(Recording):
    """An ACP client that records what it is sent (see the module docstring)."""

    deadline = DEADLINE

    answers: list[str] = field(default_factory=list)
    buffers: dict[str, str] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)
    permissions: list[dict[str, Any]] = field(default_factory=list)
    reads: list[dict[str, Any]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)
    others: list[dict[str, Any]] = field(default_factory=list)
    write_error: Exception | None = None  # raised by fs/write_text_file instead of writing
    hold: asyncio.Event | None = None  # when set: permission answers wait for it
    _waiters: list[tuple[Callable[[Any], bool], asyncio.Future[None]]] = field(default_factory=list)

    # ---- the raw stream ------------------------------------------------------------------------------
    def observe(self, event: Any) -> None:
        if event.direction.value != "incoming":
            return
        msg = event.message
        method = msg.get("method")
        if method == "session/update":
            self.updates.append(msg["params"])
        elif method == "session/request_permission":
            self.permissions.append(msg["params"])
        elif method == "fs/read_text_file":
            self.reads.append(msg["params"])
        elif method == "fs/write_text_file":
            self.writes.append(msg["params"])
        elif method is not None:
            self.others.append(msg)
        self.check()

    # ---- the SDK's Client ----------------------------------------------------------------------------
    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **kw: Any) -> Any:
        if self.hold is not None:
            await self.hold.wait()
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        return None

    async def read_text_file(self, path: str, session_id: str, **kw: Any) -> ReadTextFileResponse:
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))

    async def write_text_file(
        self, content: str, path: str, session_id: str, **kw: Any
    ) -> WriteTextFileResponse:
        if self.write_error is not None:
            raise self.write_error
        self.buffers.pop(path, None)
        Path(path).write_text(content, encoding="utf-8")  # the editor saves what the agent wrote
        return WriteTextFileResponse()


@dataclass
class Agent:
    """One `agentd --acp` process and the client connected to it."""

    conn: Any
    proc: asyncio.subprocess.Process
    editor: Editor
    stderr: Path
    init: Any = None

    async def call(self, coro: Any, timeout: float = DEADLINE) -> Any:
        return await asyncio.wait_for(coro, timeout)

    async def new(self, cwd: Path, **kw: Any) -> str:
        result = await self.call(self.conn.new_session(cwd=str(cwd), mcp_servers=[], **kw))
        return str(result.session_id)

    async def prompt(self, session_id: str, text: str, timeout: float = 30.0) -> str:
        from acp import text_block

        result = await self.call(self.conn.prompt(session_id=session_id, prompt=[text_block(text)]), timeout)
        return str(result.stop_reason)

    def kill(self) -> None:
        """SIGKILL, as a client that gives up on the agent: no cleanup runs."""
        self.proc.send_signal(signal.SIGKILL)

    async def close(self) -> int:
        """Close stdin (end of input) and wait for the exit code."""
        if self.proc.returncode is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            return await asyncio.wait_for(self.proc.wait(), DEADLINE)
        finally:
            await self.conn.close()


async def start(
    env: dict[str, str],
    stderr: Path,
    *,
    fs: bool = True,
    editor: Editor | None = None,
    args: tuple[str, ...] = (),
) -> Agent:
    """Spawn `agentd --acp`, connect the SDK's client side and initialize (fs capabilities when `fs`)."""
    editor = editor or Editor()
    err = stderr.open("ab")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--acp", *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=err, env=env, cwd=str(ROOT), limit=64 * 2**20,
    )  # fmt: skip
    err.close()
    assert proc.stdin is not None and proc.stdout is not None
    conn = connect_to_agent(editor, proc.stdin, proc.stdout, observers=[editor.observe])  # type: ignore[arg-type]
    agent = Agent(conn=conn, proc=proc, editor=editor, stderr=stderr)
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs))
    agent.init = await agent.call(conn.initialize(protocol_version=1, client_capabilities=caps))
    return agent
