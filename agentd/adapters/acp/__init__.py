"""The ACP adapter: `agentd --acp`, Agent Client Protocol v1 over stdio (PROTOCOL.md §3.3, §4.5, §14;
docs/acp.md), through the `agent-client-protocol` SDK (the `agentd[acp]` extra).

A thin translation over the same core as the LSP adapter: the core emits every session update in its ACP v1
wire shape (agentd.protocol.updates), builds the permission options as data, replays sessions
(`Session.replay_updates()`); this package frames and routes them, and maps ACP's methods onto the Session
API. Modules: `transport` (newline-delimited JSON-RPC lines, malformed input answered), `errors` (PROTOCOL.md
§11 with ACP's codes), `host` (the process's sessions), `bridge` (one session's updates and approvals),
`files` (the client's `fs/*` methods as the tools' overlay), `commands` (slash commands), `agent` (the SDK's
Agent), `serve` (the entry point). Only this package imports `acp`.
"""
