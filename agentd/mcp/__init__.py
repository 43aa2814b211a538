"""The MCP client of agentd (issue 11): the user's MCP servers, through the official `mcp` SDK, as tools
named `mcp__<server>__<tool>`. `connection.py`: one server; `tools.py`: its tools as agentd tools;
`manager.py`: the servers of one session. The SDK is imported lazily (only when a server is configured).
Never imports pygls, lsprotocol, acp or `agentd.adapters`."""
