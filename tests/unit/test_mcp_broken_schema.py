"""An MCP server's broken input schema never ends a turn (issue 11, break11)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agentd.mcp.tools import MCPArgs, MCPTool

pytestmark = pytest.mark.unit

BROKEN = [
    {"type": "object", "properties": {"x": {"$ref": "#/nope"}}},  # a reference to nowhere
    {"type": "object", "properties": {"x": {"type": "nonsense"}}},  # an unknown type
    {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": "("}},
    },  # a regex that does not compile
    {
        "type": "object",
        "properties": {"x": {"$ref": "https://example.invalid/s.json"}},
    },  # remote: never fetched
]


def _tool(schema: dict[str, Any]) -> MCPTool:
    spec = SimpleNamespace(name="raw", timeout_s=5.0)
    remote = SimpleNamespace(name="refschema", description="d", title=None, input_schema=schema)
    return MCPTool(SimpleNamespace(spec=spec), remote, 30.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("schema", BROKEN)
def test_a_broken_schema_lets_the_server_judge_the_input(schema: dict[str, Any]) -> None:
    """issue 11 (break11): `{"$ref": "#/nope"}` in a tool's inputSchema ended `agentd run` with an internal
    error (PointerToNowhere escaped validation; only SchemaError was caught). Any schema that cannot be
    applied now lets the call through to the server, which judges its own input."""
    args, problem = _tool(schema).validate({"x": "1"}, None)  # type: ignore[arg-type]
    assert problem is None and isinstance(args, MCPArgs) and args.raw == {"x": "1"}
