"""MCP servers the tests start (written with the official SDK's server API); not collected by pytest."""
