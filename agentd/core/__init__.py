"""The core: sessions, the agent loop, context, todos. Never imports pygls, lsprotocol, acp or adapters."""
