"""Plain-dict envelopes for `agentd/*` messages (TESTING.md §2 item 6).

pygls turns the params and results of methods it does not know into namedtuples: handlers would get
`Object(...)`, an answer forwarded unchanged would re-serialise as a JSON array, and keys that are not
identifiers (`{"file-path": ...}`) would become `_0`, `_1`. The envelopes below keep `params` and `result`
as the decoded JSON, and `WireMixin` makes a pygls protocol use them for every method of the table in
`agentd.protocol.methods` (both directions), for `window/showMessageRequest` and its result (so an
action's `optionId` survives, PROTOCOL.md §9) and for the result of `workspace/applyEdit`. No field has a
default: the converter would drop fields equal to it. Used by the server (`server.py`) and by the test
client (`tests/lsp`).
"""

from __future__ import annotations

from typing import Any

import attrs

from agentd.protocol.methods import BY_NAME

RAW_MESSAGE_METHODS = frozenset({"window/showMessageRequest"})  # actions carry `optionId` (PROTOCOL.md §9)
RAW_RESULT_METHODS = frozenset({"window/showMessageRequest", "workspace/applyEdit"})


@attrs.define
class AgentdRequest:
    id: Any
    method: str
    jsonrpc: str
    params: Any


@attrs.define
class AgentdNotification:
    method: str
    jsonrpc: str
    params: Any


@attrs.define
class AgentdResponse:
    id: Any
    jsonrpc: str
    result: Any


def message_type(method: str) -> type[Any] | None:
    """The envelope of an `agentd/*` method of the table (request or notification) or of
    `RAW_MESSAGE_METHODS`, else None (pygls' own types)."""
    m = BY_NAME.get(method)
    if m is None:
        return AgentdRequest if method in RAW_MESSAGE_METHODS else None
    return AgentdNotification if m.kind == "notification" else AgentdRequest


def result_type(method: str) -> type[Any] | None:
    """The raw response envelope for table requests and `RAW_RESULT_METHODS`, else None."""
    m = BY_NAME.get(method)
    if (m is not None and m.kind == "request") or method in RAW_RESULT_METHODS:
        return AgentdResponse
    return None


class WireMixin:
    """Mix into a pygls `LanguageServerProtocol` subclass, before it: dict envelopes for `agentd/*`."""

    def get_message_type(self, method: str) -> type[Any] | None:
        return message_type(method) or super().get_message_type(method)  # type: ignore[misc]

    def get_result_type(self, method: str) -> type[Any] | None:
        return result_type(method) or super().get_result_type(method)  # type: ignore[misc]
