"""The error table of PROTOCOL.md §11. LEAF: imports nothing of agentd.

Owns: `ERROR_CODES` (`data.name` -> JSON-RPC code, both adapters share the names) and `rpc_error()`, the
`{"code", "message", "data": {"name", ...}}` object of an error response. `data.name` is always present;
`message` always says what to do next.
"""

from __future__ import annotations

from typing import Any

ERROR_CODES: dict[str, int] = {
    "ParseError": -32700,
    "InvalidRequest": -32600,
    "MethodNotFound": -32601,
    "InvalidParams": -32602,
    "InternalError": -32603,
    "ServerNotInitialized": -32002,
    "RequestCancelled": -32800,
    "SessionNotFound": -32010,
    "SessionNotLoaded": -32011,
    "SessionLocked": -32012,
    "SessionBusy": -32013,
    "OutsideWorkspace": -32014,
    "ProviderError": -32015,
    "StorageError": -32016,
    "UnsupportedSessionVersion": -32017,
}

PARSE_ERROR = "Could not parse the message body as JSON; check the client's framing."
SHUTTING_DOWN = "The server is shutting down; start a new agentd process."
NOT_A_REQUEST = "The message is not a JSON-RPC 2.0 request, notification or response; check the client."
NOT_INITIALIZED = "Send initialize first."
INTERNAL = (
    "agentd hit an internal error; the details are in its log (stderr or --log-file). Please report it."
)
CANCELLED = "The request was cancelled by the client; send it again if you still need the result."


def method_not_found(method: str) -> str:
    return f"agentd does not implement {method}; see experimental.agentd.methods."


def rpc_error(name: str, message: str, **data: Any) -> dict[str, Any]:
    """The `error` member of a response: code from the table, `data.name` first, None values dropped."""
    return {
        "code": ERROR_CODES[name],
        "message": message,
        "data": {"name": name, **{k: v for k, v in data.items() if v is not None}},
    }
