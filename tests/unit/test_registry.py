"""ToolRegistry and default_tools(): fixed order, exact names, deterministic definition bytes (CONTRACTS.md §4,
§5)."""

from __future__ import annotations

import json

import pytest

from agentd.tools.base import StrictInput, Tool, ToolContext, ToolOutput
from agentd.tools.registry import ToolRegistry, default_tools

ORDER = ["read_file", "list_dir", "grep", "glob", "write_file", "edit_file", "run_command"]


class Dummy(Tool):
    name = "read_file"
    description = "dup"
    effect = "read"
    Input = StrictInput

    async def run(self, args: object, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content="")


def test_default_order_and_lookup() -> None:
    reg = ToolRegistry(default_tools())
    assert reg.names() == ORDER
    assert [t.name for t in reg] == ORDER
    assert len(reg) == 7
    assert reg.get("edit_file") is list(reg)[5]
    assert reg.get("todo_write") is None
    assert reg.get("Read_File") is None


def test_default_tools_are_fresh_instances() -> None:
    first, second = default_tools(), default_tools()
    assert [a is b for a, b in zip(first, second, strict=True)] == [False] * 7


def test_effects_and_kinds() -> None:
    table = {t.name: (t.effect, t.kind) for t in default_tools()}
    assert table == {
        "read_file": ("read", "read"),
        "list_dir": ("read", "read"),
        "grep": ("read", "search"),
        "glob": ("read", "search"),
        "write_file": ("write", "edit"),
        "edit_file": ("write", "edit"),
        "run_command": ("exec", "execute"),
    }


def test_definitions_are_deterministic_bytes() -> None:
    a = json.dumps(ToolRegistry(default_tools()).definitions(terse=False))
    b = json.dumps(ToolRegistry(default_tools()).definitions(terse=False))
    terse = ToolRegistry(default_tools()).definitions(terse=True)
    assert a == b
    assert [d["name"] for d in terse] == ORDER
    assert [d["description"] for d in terse] == [t.terse_description for t in default_tools()]
    assert [d["description"] for d in json.loads(a)] == [t.description for t in default_tools()]


def test_every_input_field_is_described_and_strict() -> None:
    for d in ToolRegistry(default_tools()).definitions():
        schema = d["input_schema"]
        assert (d["name"], schema["additionalProperties"], schema["type"]) == (d["name"], False, "object")
        undescribed = [k for k, v in schema["properties"].items() if not v.get("description")]
        assert (d["name"], undescribed) == (d["name"], [])


def test_duplicate_names_and_unknown_tool_text() -> None:
    with pytest.raises(ValueError) as err:
        ToolRegistry([*default_tools(), Dummy()])
    assert str(err.value) == "duplicate tool name 'read_file'"
    assert ToolRegistry(default_tools()).unknown_tool_text("find") == (
        'unknown tool "find"; available tools: read_file, list_dir, grep, glob, write_file, edit_file,'
        " run_command"
    )
