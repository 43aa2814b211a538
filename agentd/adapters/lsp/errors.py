"""JSON-RPC error answers of the LSP adapter (PROTOCOL.md §11).

Owns: `RpcError` (raised by handlers for protocol-level refusals) and `error_of()`, which maps anything a
handler raised to the `error` member of a response: agentd's operator errors by their `rpc_name`,
pydantic validation failures and params nested too deeply to handle (`RecursionError`) to `-32602` with
`data.errors`, cancellation to `-32800`, anything else to `-32603` (logged with its traceback; the client
gets no traceback).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError

from agentd.errors import AgentdError
from agentd.protocol import errors as perr
from agentd.protocol.base import validation_errors

log = logging.getLogger("agentd.lsp")


class RpcError(Exception):
    """A JSON-RPC error answer: `name` from the table of §11, a message saying what to do, `data`."""

    def __init__(self, name: str, message: str, **data: Any) -> None:
        super().__init__(message)
        self.error = perr.rpc_error(name, message, **data)


def invalid_params(method: str, exc: ValidationError) -> RpcError:
    errors = validation_errors(exc)
    first = errors[0] if errors else {"loc": "params", "msg": "invalid"}
    return RpcError(
        "InvalidParams", f"{method}: {first['loc']}: {first['msg']}; fix the params and send it again.",
        errors=errors,
    )  # fmt: skip


def too_deep(method: str) -> RpcError:
    """H19: params nested deeper than agentd can decode or handle."""
    return RpcError(
        "InvalidParams", f"{method or 'the request'}: params are nested too deeply to handle; send a flatter"
        " structure.", errors=[{"loc": "params", "msg": "nested too deeply"}],
    )  # fmt: skip


def unicode_error(method: str, problems: list[tuple[str, str]]) -> RpcError:
    """H19: params holding lone surrogates (`\\udcff`), which are not Unicode text."""
    errors = [{"loc": loc, "msg": f"not valid Unicode (a lone surrogate {what})"} for loc, what in problems]
    return RpcError(
        "InvalidParams", f"{method}: {errors[0]['loc']}: {errors[0]['msg']}; send UTF-16 text without unpaired"
        " surrogates.", errors=errors,
    )  # fmt: skip


def error_of(exc: BaseException, method: str = "") -> dict[str, Any]:
    """The `error` member for `exc` raised while handling `method`."""
    if isinstance(exc, RpcError):
        return exc.error
    if isinstance(exc, asyncio.CancelledError):
        return perr.rpc_error("RequestCancelled", perr.CANCELLED)
    if isinstance(exc, ValidationError):
        return invalid_params(method, exc).error
    if isinstance(exc, RecursionError):
        return too_deep(method).error
    if isinstance(exc, AgentdError):
        name = exc.rpc_name if exc.rpc_name in perr.ERROR_CODES else "InternalError"
        err = perr.rpc_error(name, exc.message, **exc.data)
        err["code"] = exc.rpc_code
        return err
    log.error("internal error in %s", method or "a handler", exc_info=exc)
    return perr.rpc_error("InternalError", perr.INTERNAL)
