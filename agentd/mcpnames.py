"""The name of an MCP server (issue 11, break11). LEAF: imports only the standard library (config loads it
before anything of agentd.mcp, which is imported only when a server is configured).

Owns the one rule of what may name an MCP server, wherever the name comes from (a `[mcp.servers.NAME]`
table of `config.toml` or a workspace file, an ACP client's `session/new` `mcpServers`): 1-32 ASCII letters,
digits, `-` and `_`, with no `__` and no `_` at either end. The tool names `mcp__<server>__<tool>` then
match the Messages API's `^[a-zA-Z0-9_-]{1,64}$` (with the tool part made to fit, agentd.mcp.tools), and
the first `__` after `mcp__` ends the server's name, so a rule `mcp__docs__*` never covers the tools of a
server `docs__shell` (agentd.permissions.rules reads tool names with `SERVER`).
"""

from __future__ import annotations

import re

SERVER = r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*"  # a regular expression, without anchors
SERVER_MAX = 32


def server_problem(name: str) -> str | None:
    """Why `name` cannot name an MCP server (None when it can), as a sentence that says what to do."""
    if len(name) <= SERVER_MAX and re.fullmatch(SERVER, name):
        return None
    return (
        f"the server name {name[:40]!r} must be 1-{SERVER_MAX} letters, digits, '-' or '_' "
        "(no '__', no '_' at either end): rename it"
    )
