"""`agentd --acp`: the ACP adapter on stdin/stdout (PROTOCOL.md §3.1, §3.3, §3.4, §4.4, §4.5).

Owns: `serve()`. fd 1 is moved aside for protocol lines first (fd 1 and `sys.stdout` then write to stderr), so
only ACP messages ever reach the client's stdout; logs, the accounting lines and the SDK's own records go to
stderr (or `--log-file`). With `--resume ID` the session is replayed, validated and locked before stdin is
read (exit 3, 4 or 5 otherwise). End of input, SIGTERM or a stdout that is gone cancel every turn, flush and
release every lock, then the process exits 0. A data dir agentd cannot write is reported in the answer to
`initialize` (H12), not by a silent exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from acp.agent.connection import AgentSideConnection

from agentd import loopwatch
from agentd.adapters.acp.agent import AgentdAgent
from agentd.adapters.acp.host import AcpHost
from agentd.adapters.acp.transport import MAX_LINE, LineTransport
from agentd.adapters.stdio import frames_fd, stdin_reader, stdout_writer, tty_hint
from agentd.persistence.paths import DataDir

log = logging.getLogger("agentd.acp")

REQUESTS = frozenset({
    "initialize", "authenticate", "session/new", "session/load", "session/resume", "session/list",
    "session/prompt", "session/set_mode", "session/set_config_option", "session/close",
})  # fmt: skip
NOTIFICATIONS = frozenset({"session/cancel"})
TTY_HINT = (
    "agentd: serving ACP (Agent Client Protocol) on stdin/stdout for an editor; for the terminal use "
    '"agentd run --prompt TEXT" (Ctrl-C to quit)\n'
)


def serve(data_dir: DataDir, *, data_dir_error: str | None = None, resume: str | None = None) -> int:
    """Run the ACP adapter until end of input or SIGTERM; the exit code (0)."""
    _route_sdk_logs()
    tty_hint(TTY_HINT)
    fd = frames_fd()
    return asyncio.run(_serve(data_dir, fd, data_dir_error, resume))


async def _serve(data_dir: DataDir, fd: int, data_dir_error: str | None, resume: str | None) -> int:
    loopwatch.watch()
    reader = await stdin_reader(MAX_LINE + 1)
    writer = await stdout_writer(fd)
    transport = LineTransport(reader, writer, REQUESTS, NOTIFICATIONS)
    host = AcpHost(data_dir, transport, data_dir_error=data_dir_error)
    if resume:
        host.open_resume(resume)  # SessionNotFound / SessionLocked / StorageError: the caller's exit code
    agent: Any = AgentdAgent(host)  # the SDK's Agent protocol, methods answering plain dicts
    conn = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True)
    listening = asyncio.ensure_future(conn.listen())
    transport.on_gone = lambda: _stop(listening)
    loop = asyncio.get_running_loop()
    for num in (signal.SIGTERM, signal.SIGHUP):  # SIGHUP (the terminal closed) as SIGTERM
        loop.add_signal_handler(num, _stop, listening)
    with contextlib.suppress(asyncio.CancelledError):
        await listening
    log.info("end of input; closing the sessions")
    await host.shutdown()
    await conn.close()
    await writer.flush(5.0)  # the last answers (cancelled prompts) reach a client that still reads
    return 0


def _stop(listening: asyncio.Future[Any]) -> None:
    listening.cancel()


def _route_sdk_logs() -> None:
    """The SDK logs through the root logger (tracebacks of failures it caught): those records go where
    agentd's go, warnings and errors only (never the libraries' debug chatter, whatever `-v` says)."""
    root = logging.getLogger()
    root.handlers[:] = logging.getLogger("agentd").handlers
    root.setLevel(logging.WARNING)
