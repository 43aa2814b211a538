"""`agentd mcp list [--workspace DIR]` (issue 11): start the configured MCP servers of a workspace, show
each one's transport, state and tools (or why it did not start), stop them.

Owns: `mcp_list()`. Output goes to stdout (not a server mode). Never imports pygls, lsprotocol, acp or
`agentd.adapters`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentd.mcp.manager import MCPManager, specs_from_settings
from agentd.sandbox.launcher import Launcher
from agentd.text import terminal_safe


async def mcp_list(
    settings: Any, workspace: Path, launcher: Launcher | None = None, *, workspace_trusted: bool = False
) -> int:
    """Print the servers and their tools; exit code 0 when every server started, 1 when one did not.
    `launcher`: the one a session there would get, so a server starts (or not) as in a session;
    `workspace_trusted`: the workspace file's servers are listed too (the user trusts it with them)."""
    specs = specs_from_settings(settings, workspace_trusted=workspace_trusted)
    if not specs:
        sys.stdout.write(
            "no MCP servers configured; add [mcp.servers.NAME] with command/args/env or url to config.toml\n"
        )
        return 0
    manager = MCPManager(
        specs,
        workspace,
        start_timeout_s=settings.mcp.start_timeout_s,
        default_timeout_s=settings.tools.run_timeout_s,
        launcher=launcher,
        max_message_bytes=settings.mcp.max_message_bytes,
    )
    try:
        await manager.start()
        for server in manager.status():
            count = len(server["tools"])
            transport = server["transport"] + (" (sandboxed)" if server["sandboxed"] else "")
            line = f"{server['name']}  {transport}  {server['state']}"
            line += f"  {count} tool{'s' if count != 1 else ''}" if server["state"] == "running" else ""
            sys.stdout.write(terminal_safe(line) + "\n")
            if server["error"]:  # a server's stderr tail and tool names: no control character shown as itself
                sys.stdout.write(terminal_safe(f"  {server['error']}") + "\n")
            for name in server["tools"]:
                sys.stdout.write(terminal_safe(f"  {name}") + "\n")
    finally:
        await manager.aclose()
    return 1 if manager.warnings else 0
