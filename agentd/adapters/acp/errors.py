"""JSON-RPC error answers of the ACP adapter (PROTOCOL.md §11, ACP adapter differences).

Owns: `rpc()` (a `RequestError` from a name of the §11 table, with ACP's own codes where ACP has one:
`SessionNotFound` is -32002 "resource not found", a `ProviderError` for missing credentials is -32000
"authentication required"), `invalid_params()` and `error_of()`, which maps anything a handler raised to a
`RequestError`: agentd's operator errors by their `rpc_name`, pydantic failures to -32602 with `data.errors`,
anything else to -32603 (logged with its traceback; the client gets none); `bad_param()`, `not_found()` and
`busy()`, the texts of one field's -32602, an unknown session and a session with a prompt running.
`data.name` is always present.
"""

from __future__ import annotations

import logging
from typing import Any

from acp import RequestError
from pydantic import ValidationError

from agentd.errors import AgentdError, ProviderError
from agentd.protocol import errors as perr
from agentd.protocol.base import validation_errors

log = logging.getLogger("agentd.acp")

ACP_CODES = {"SessionNotFound": -32002}
AUTH_REQUIRED = -32000


def rpc(name: str, message: str, *, code: int | None = None, **data: Any) -> RequestError:
    """A `RequestError` for `name` of the §11 table (ACP's code where it differs)."""
    err = perr.rpc_error(name, message, **data)
    return RequestError(code if code is not None else ACP_CODES.get(name, err["code"]), message, err["data"])


def invalid_params(method: str, exc: ValidationError) -> RequestError:
    errors = validation_errors(exc)
    first = errors[0] if errors else {"loc": "params", "msg": "invalid"}
    return rpc("InvalidParams", f"{method}: {first['loc']}: {first['msg']}; fix the params and send it again.",
               errors=errors)  # fmt: skip


def bad_param(method: str, loc: str, msg: str, hint: str) -> RequestError:
    """-32602 for one field: `<method>: <loc> <msg>; <hint>`."""
    return rpc("InvalidParams", f"{method}: {loc} {msg}; {hint}", errors=[{"loc": loc, "msg": msg}])


def error_of(exc: BaseException, method: str) -> RequestError:
    """The `RequestError` for `exc` raised while handling `method`."""
    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, ValidationError):
        return invalid_params(method, exc)
    if isinstance(exc, RecursionError):
        return rpc("InvalidParams", f"{method}: params are nested too deeply to handle; send a flatter structure.",
                   errors=[{"loc": "params", "msg": "nested too deeply"}])  # fmt: skip
    if isinstance(exc, ProviderError) and exc.reason == "missing_credentials":
        return rpc("ProviderError", exc.message, code=AUTH_REQUIRED, **exc.data)
    if isinstance(exc, AgentdError):
        name = exc.rpc_name if exc.rpc_name in perr.ERROR_CODES else "InternalError"
        code = ACP_CODES.get(name, exc.rpc_code)
        return rpc(name, exc.message, code=code, **exc.data)
    log.error("internal error in %s", method, exc_info=exc)
    return rpc("InternalError", perr.INTERNAL)


def not_found(session_id: str) -> Exception:
    return rpc("SessionNotFound", f"Session {session_id} is not in the data dir; call session/list to see sessions, "
               "or session/new.", sessionId=session_id)  # fmt: skip


def busy(session_id: str) -> Exception:
    return rpc("SessionBusy", f"A prompt is still running in {session_id}; wait for it or send session/cancel.",
               sessionId=session_id)  # fmt: skip
