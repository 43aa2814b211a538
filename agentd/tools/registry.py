"""The tool registry: the tools of one session, in a fixed order (CONTRACTS.md §4: the tool definitions are
part of the static, cached prefix, so their order and bytes never change within a session).

Owns: `ToolRegistry` and `default_tools()`. Imports only `agentd.tools`; never pygls, lsprotocol, acp or
`agentd.adapters`. The composition root (`core/factory.py`) adds `todo_write` at position 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from agentd.tools.base import Tool
from agentd.tools.fs import ListDir, ReadFile
from agentd.tools.search import Glob, Grep
from agentd.tools.shell import RunCommand
from agentd.tools.writes import EditFile, WriteFile


class ToolRegistry:
    """An ordered, name-unique set of tools. Raises `ValueError` on a duplicate name."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: list[Tool] = list(tools)
        self._by_name: dict[str, Tool] = {}
        for tool in self._tools:
            if tool.name in self._by_name:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._by_name[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool called exactly `name`, or None (the caller answers `unknown tool`, CONTRACTS.md §11)."""
        return self._by_name.get(name)

    def names(self) -> list[str]:
        """Tool names in registry order."""
        return [t.name for t in self._tools]

    def definitions(self, terse: bool = False) -> list[dict[str, Any]]:
        """Messages API tool definitions `{"name", "description", "input_schema"}` in registry order;
        `terse`: the short descriptions (`tools.terse_descriptions`, PROTOCOL.md §4.3). Same bytes every
        call."""
        return [t.definition(terse) for t in self._tools]

    def unknown_tool_text(self, name: str) -> str:
        """CONTRACTS.md §11: `unknown tool "<name>"; available tools: <names, comma-separated>`."""
        return f'unknown tool "{name}"; available tools: {", ".join(self.names())}'

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)


def default_tools() -> list[Tool]:
    """Fresh instances of the built-in tools in their fixed order: read_file, list_dir, grep, glob,
    write_file, edit_file, run_command (`todo_write` is not included; the factory puts it first)."""
    return [ReadFile(), ListDir(), Grep(), Glob(), WriteFile(), EditFile(), RunCommand()]
