"""The MCP servers of one session (issue 11): started together at session start, their tools in a stable
order fixed then, stopped with the session.

Owns: `MCPManager`, `specs_from_settings()` and `start_servers()`, the core entry point that takes server
definitions at session creation (from `config.toml` `[mcp.servers.NAME]`, and from an ACP client's
`session/new` `mcpServers` through `ServerSpec.from_acp`). A server that does not start is a warning naming
it, why and its stderr tail, never a failed session; its tools are missing from that session. Imports the
standard library, `agentd.mcp` and `agentd.sandbox.launcher`; never pygls, lsprotocol, acp or `agentd.adapters`.

The tool list is part of the cached prompt prefix (CONTRACTS.md §4, §6), so it is fixed at session start:
servers by name, each server's tools by name. A server restarted later keeps that list; a tool it no longer
has answers with the server's own error. A resumed session starts its servers again and lists them the same
way, so unchanged servers give byte-identical tool definitions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agentd.mcp.bounded import MAX_MESSAGE_BYTES
from agentd.mcp.connection import MCPConnection, MCPStartError, ServerSpec
from agentd.mcp.tools import MCPTool, schema_problem
from agentd.sandbox.launcher import Launcher
from agentd.text import visible

SECRET_ENV = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"})


def specs_from_settings(settings: Any, *, workspace_trusted: bool = False) -> list[ServerSpec]:
    """The `[mcp.servers.NAME]` tables of the effective settings, as specs, by name; with
    `workspace_trusted`, also the workspace file's (`settings.workspace_mcp_servers`; a name the user's or
    editor's config defines keeps their definition). Trust is the caller's to check
    (agentd.core.factory.session_mcp_specs)."""
    servers = dict(settings.workspace_mcp_servers) if workspace_trusted else {}
    servers.update(settings.mcp.servers)
    out = []
    for name, s in sorted(servers.items()):
        out.append(
            ServerSpec(
                name=name,
                command=s.command,
                args=tuple(s.args),
                env=dict(s.env),
                url=s.url,
                headers=dict(s.headers),
                timeout_s=s.timeout_s,
                sandbox=s.sandbox,
                network=s.network,
            )
        )
    return out


class MCPManager:
    """The connections of one session and the tools they gave at start (`tools()`, fixed order)."""

    def __init__(
        self,
        specs: Iterable[ServerSpec],
        cwd: Path,
        *,
        start_timeout_s: float,
        default_timeout_s: float,
        secret_env: frozenset[str] = SECRET_ENV,
        launcher: Launcher | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        by_name = {s.name: s for s in specs}  # a later definition of a name wins (ACP over config)
        self.connections = [
            MCPConnection(
                by_name[n],
                cwd,
                secret_env=secret_env,
                start_timeout_s=start_timeout_s,
                launcher=launcher,
                max_message_bytes=max_message_bytes,
            )
            for n in sorted(by_name)
        ]
        self.default_timeout_s = default_timeout_s
        self.warnings: list[str] = []
        self._tools: list[MCPTool] = []

    async def start(self) -> list[str]:
        """Start every server at once; returns (and keeps) one warning per server that did not start."""
        results = await asyncio.gather(*(c.start() for c in self.connections), return_exceptions=True)
        for res in results:
            if isinstance(res, MCPStartError):
                self.warnings.append(str(res))
            elif isinstance(res, BaseException):
                raise res
        self._tools = self._fixed_tools()
        return list(self.warnings)

    def _fixed_tools(self) -> list[MCPTool]:
        """Every running server's tools the API takes (break11): a tool whose input schema it would refuse
        is left out with a warning naming the server and tool; a name another tool's name already became
        (`dup.name` and `dup_name`) ends with a hash of the server's name for it instead."""
        tools: list[MCPTool] = []
        seen: set[str] = set()
        for conn in self.connections:
            if conn.state != "running":
                continue
            for remote in sorted(conn.tools, key=lambda t: str(t.name)):
                problem = schema_problem(remote.input_schema or {"type": "object"})
                if problem is not None:
                    self.warnings.append(
                        f"MCP server {_shown(conn.spec.name)}: tool {_shown(remote.name)} was left out: "
                        f"{problem}; the server must fix its schema"
                    )
                    continue
                tool = MCPTool(conn, remote, self.default_timeout_s)
                if tool.name in seen:
                    tool = MCPTool(conn, remote, self.default_timeout_s, hashed=True)
                if tool.name in seen:  # the same name twice from one server: nothing tells them apart
                    self.warnings.append(
                        f"MCP server {_shown(conn.spec.name)}: tool {_shown(remote.name)} was left out: "
                        "the server lists that name twice"
                    )
                    continue
                seen.add(tool.name)
                tools.append(tool)
        return tools

    def tools(self) -> list[MCPTool]:
        """The session's MCP tools, in the order fixed at start."""
        return list(self._tools)

    def status(self) -> list[dict[str, Any]]:
        """`[{name, transport, sandboxed, state, error, tools}]` for `agentd mcp list` and status views."""
        return [
            {
                "name": c.spec.name,
                "transport": "http" if c.spec.url else "stdio",
                "sandboxed": c.sandboxed,
                "state": c.state,
                "error": c.error,
                "tools": [qualified for qualified in (t.name for t in self._tools if t.conn is c)],
            }
            for c in self.connections
        ]

    async def aclose(self) -> None:
        """Stop every server and wait for them."""
        await asyncio.gather(*(c.stop() for c in self.connections), return_exceptions=True)

    def close_soon(self) -> None:
        """Ask every server to stop, without waiting (from synchronous code such as `Session.close`)."""
        for c in self.connections:
            c.stop_soon()


def _shown(value: Any) -> str:
    return visible(str(value), one_line=True)[:100]


async def start_servers(
    specs: Sequence[ServerSpec],
    cwd: Path,
    settings: Any,
    *,
    warn: Callable[[str], None],
    secret_env: Iterable[str] = (),
    launcher: Launcher | None = None,
) -> MCPManager | None:
    """Start the session's MCP servers (None when there are none). Every start failure goes to `warn`
    (e.g. `MCP server git did not start (FileNotFoundError: ...; stderr: ...)`); never raises for one.
    `secret_env`: more variable names never passed on (the configured `api_key_env`); `launcher`: the
    session's (agentd.core.factory.launcher), which starts stdio servers in the sandbox."""
    if not specs:
        return None
    manager = MCPManager(
        specs,
        cwd,
        start_timeout_s=settings.mcp.start_timeout_s,
        default_timeout_s=settings.tools.run_timeout_s,
        secret_env=SECRET_ENV | frozenset(secret_env),
        launcher=launcher,
        max_message_bytes=settings.mcp.max_message_bytes,
    )
    for warning in await manager.start():
        warn(warning)
    return manager
