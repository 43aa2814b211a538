"""ACP's stdio transport: one JSON-RPC 2.0 message per line (PROTOCOL.md §3.3, §3.4, §11; ACP "Transports").

Owns: `LineTransport`, the message transport the SDK's connection runs on (`send`, `receive`, `close` of
`acp`'s Transport protocol). It answers what the SDK would not (the SDK's own line reader logs a line that
is not JSON and drops it, and a JSON value that is not an object would end its receive loop):
- a line that is not UTF-8 JSON: `-32700` (id null); a line longer than 64 MiB: `-32600`, the rest of it
  skipped; a JSON value that is not an object, a batch, a bad `jsonrpc`, `id` or `method`: `-32600`;
- params nested too deeply to decode or handle (issue 9 H19): `-32602` under the request's id (found by a flat
  scan when `json.loads` cannot decode it); lone surrogates in a request's params: `-32602` naming the fields
  (a notification's become U+FFFD);
- a notification agentd does not know, or whose params do not fit its schema (`NOTIFICATION_FIELDS`): dropped
  (logged at debug level), never answered; a notification's
  method sent as a request (with an id): `-32601` saying to send it without one;
- `$/cancel_request` for a pending request: handed to `on_cancel_request(id)`.
Every error response leaves with `data.name` and a message that says what to do (PROTOCOL.md §11): the
SDK's generic `Invalid params` / `Method not found` / `Internal error` are reworded here, with the method
named. Frames are handed to the frame writer at once and in order (`agentd.adapters.stdio`: never blocking the
event loop), so an update the core emits before a response is on the wire before it; while the client has
more than `HIGH_WATER` bytes of them unread, its next line waits (backpressure). A write that fails (the
client is gone, or far behind) calls `on_gone()` (the server shuts down) and nothing more is written. `CURRENT_ID` holds, in the task handling a
request, that request's id. Imports acp only through the caller; never pygls or lsprotocol.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import Callable
from typing import Any

from agentd.adapters.stdio import FrameWriter, envelope_of, valid_id
from agentd.protocol import errors as perr
from agentd.text import MAX_JSON_DEPTH, deeper_than, scrub_surrogates, surrogate_problems

log = logging.getLogger("agentd.acp.transport")

MAX_LINE = 64 * 1024 * 1024
CURRENT_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("agentd_acp_request_id", default=None)
NAMES = {code: name for name, code in perr.ERROR_CODES.items()} | {
    -32000: "ProviderError",
    -32002: "SessionNotFound",
}


class LineTransport:
    """Newline-delimited JSON-RPC over a reader and a frame writer (see the module docstring).

    `requests` / `notifications`: the method names the agent serves (others: `-32601`, or dropped);
    names starting with `_` are extension methods and always go to the agent."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: FrameWriter,
        requests: frozenset[str],
        notifications: frozenset[str],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._requests = requests
        self._notifications = notifications
        self._methods: dict[Any, str] = {}  # pending incoming request id -> method
        self._after: dict[Any, list[Callable[[], None]]] = {}
        self.broken = False
        self.on_cancel_request: Callable[[Any], None] | None = None
        self.on_gone: Callable[[], None] | None = None

    # ---- sending -------------------------------------------------------------------------------------
    async def send(self, message: dict[str, Any]) -> None:
        self.write(message)

    def write(self, message: dict[str, Any]) -> None:
        """Write one message as one line, now (see the module docstring). Never raises for a gone client."""
        if "id" in message and "method" not in message:
            message = self._answered(message)
        try:
            line = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
            try:
                data = line.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate somewhere: \u escapes keep it valid JSON
                data = (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode("ascii")
        except (TypeError, ValueError):
            log.exception("a message could not be encoded; not sent")
            return
        if self.broken:
            return
        try:
            self._writer.write(data)
        except OSError as exc:  # BrokenPipeError included: gone, or far behind (agentd.adapters.stdio)
            log.info("stdout is closed (%s); stopping", exc)
            self.broken = True
            if self.on_gone is not None:
                self.on_gone()

    def pending(self, msg_id: Any) -> bool:
        """A request agentd has received and not answered yet."""
        return msg_id in self._methods

    def after_response(self, msg_id: Any, callback: Callable[[], None]) -> None:
        """Run `callback` right after the response to request `msg_id` is written."""
        self._after.setdefault(msg_id, []).append(callback)

    def _answered(self, message: dict[str, Any]) -> dict[str, Any]:
        msg_id = message.get("id")
        method = self._methods.pop(msg_id, "")
        for callback in self._after.pop(msg_id, []):
            asyncio.get_running_loop().call_soon(callback)
        error = message.get("error")
        if isinstance(error, dict):
            message = {**message, "error": reworded(error, method)}
        return message

    async def close(self) -> None:
        return None

    # ---- receiving -----------------------------------------------------------------------------------
    async def receive(self) -> dict[str, Any] | None:
        """The next message for the SDK, or None at end of input (or once stdout is gone)."""
        while not self.broken:
            if not await self._writer.writable():  # the client reads nothing of what it was sent
                self.broken = True
                if self.on_gone is not None:
                    self.on_gone()
                return None
            line = await self._line()
            if line is None:
                return None
            message = self._admit(line)
            if message is not None:
                return message
        return None

    async def _line(self) -> bytes | None:
        """The next non-empty line (None at end of input); an over-long line is answered and skipped."""
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line.strip():
                    return None
            except asyncio.LimitOverrunError:
                await self._skip_long_line()
                continue
            except (ConnectionError, OSError) as exc:  # stdin reset or broken: the end of input (break16 F2)
                log.info("the client disconnected (%s)", exc)
                return None
            if line.strip():
                return line

    async def _skip_long_line(self) -> None:
        log.warning("a line longer than %d bytes; answered -32600 and skipped", MAX_LINE)
        self._error(
            None, "InvalidRequest", f"A message is longer than {MAX_LINE // 2**20} MiB; send smaller ones."
        )
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                return

    def _admit(self, line: bytes) -> dict[str, Any] | None:
        """A message for the SDK, or None when it was answered (or dropped) here."""
        try:
            text = line.decode("utf-8")
            data = json.loads(text)
        except RecursionError:
            self._too_deep(envelope_of(line.decode("utf-8", "replace")))
            return None
        except ValueError:
            self._error(None, "ParseError", perr.PARSE_ERROR + " Each message is one line of JSON.")
            return None
        if not isinstance(data, dict):
            self._error(
                None, "InvalidRequest", perr.NOT_A_REQUEST + " (one JSON object per line; no batches)"
            )
            return None
        return self._envelope(data)

    def _envelope(self, data: dict[str, Any]) -> dict[str, Any] | None:
        has_id = "id" in data
        msg_id = data.get("id") if has_id and (valid_id(data.get("id")) or data.get("id") is None) else None
        method = data.get("method")
        if data.get("jsonrpc") != "2.0" or (has_id and msg_id is None and data.get("id") is not None):
            self._error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
            return None
        if method is None:
            if has_id and ("result" in data or "error" in data):
                return data  # an answer to one of agentd's requests
            self._error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
            return None
        if not isinstance(method, str):
            self._error(msg_id, "InvalidRequest", perr.NOT_A_REQUEST)
            return None
        return self._request(data, msg_id, method) if has_id else self._notification(data, method)

    def _request(self, data: dict[str, Any], msg_id: Any, method: str) -> dict[str, Any] | None:
        if method in self._notifications:  # e.g. session/cancel sent with an id (issue 10, break10)
            self._error(msg_id, "MethodNotFound", f"{method} is a notification in ACP: send it without an id "
                        "(it gets no answer).", method=method)  # fmt: skip
            return None
        if method not in self._requests and not method.startswith("_"):
            self._error(msg_id, "MethodNotFound", method_not_found(method), method=method)
            return None
        params = data.get("params")
        if deeper_than(params, MAX_JSON_DEPTH):
            self._too_deep({"id": msg_id, "method": method})
            return None
        problems = surrogate_problems(params)
        if problems:  # lone surrogates cannot be stored or sent on (H19)
            errors = [
                {"loc": loc, "msg": f"not valid Unicode (a lone surrogate {what})"} for loc, what in problems
            ]
            self._error(msg_id, "InvalidParams", f"{method}: {errors[0]['loc']}: {errors[0]['msg']}; send UTF-16 "
                        "text without unpaired surrogates.", errors=errors)  # fmt: skip
            return None
        self._methods[msg_id] = method
        CURRENT_ID.set(msg_id)  # the SDK's task for this request copies this context
        return data

    def _notification(self, data: dict[str, Any], method: str) -> dict[str, Any] | None:
        params = data.get("params")
        if method == "$/cancel_request":
            if isinstance(params, dict) and self.on_cancel_request is not None:
                self.on_cancel_request(params.get("requestId"))
            return None
        if method not in self._notifications and not method.startswith("_"):
            log.debug("dropped the notification %r: agentd does not handle it", method[:200])
            return None
        if deeper_than(params, MAX_JSON_DEPTH):
            log.warning("dropped the notification %r: params nested too deeply", method[:200])
            return None
        if not _fits(method, params):  # the SDK would log a traceback for it (issue 16, ACP fuzzing)
            log.debug("dropped the notification %r: its params do not fit its schema", method[:200])
            return None
        if surrogate_problems(params):
            data = {**data, "params": scrub_surrogates(params)}
        return data

    def _too_deep(self, envelope: dict[str, Any]) -> None:
        """A request nested too deeply still gets its answer, -32602 (H19); anything else is logged, dropped."""
        msg_id, method = envelope.get("id"), envelope.get("method")
        if not (valid_id(msg_id) and isinstance(method, str)):
            log.warning("dropped a message nested too deeply to decode or handle")
            return
        self._error(msg_id, "InvalidParams", f"{method}: params are nested too deeply to handle; send a flatter "
                    "structure.", errors=[{"loc": "params", "msg": "nested too deeply"}])  # fmt: skip

    def _error(self, msg_id: Any, name: str, message: str, **data: Any) -> None:
        self.write({"jsonrpc": "2.0", "id": msg_id, "error": perr.rpc_error(name, message, **data)})


def method_not_found(method: str) -> str:
    return (
        f"agentd does not implement {method[:200]}; see agentCapabilities and _meta.agentd.methods in its "
        "initialize result."
    )


def reworded(error: dict[str, Any], method: str) -> dict[str, Any]:
    """An error object with `data.name` and a message that says what to do (PROTOCOL.md §11): agentd's own
    errors pass unchanged; the SDK's generic ones are reworded, naming `method`."""
    code = error.get("code")
    found = error.get("data")
    data: dict[str, Any] = found if isinstance(found, dict) else {}
    if "name" in data:
        return error
    if code == -32602:
        errors = [
            {
                "loc": ".".join(str(p) for p in e.get("loc", ())) or "params",
                "msg": str(e.get("msg", "invalid")),
            }
            for e in data.get("errors", [])
            if isinstance(e, dict)
        ] or [{"loc": "params", "msg": "invalid"}]
        first = errors[0]
        text = f"{method or 'the request'}: {first['loc']}: {first['msg']}; fix the params and send it again."
        return perr.rpc_error("InvalidParams", text, errors=errors)
    if code == -32601:
        return perr.rpc_error("MethodNotFound", method_not_found(str(data.get("method") or method)))
    if code == -32603 or code not in NAMES:
        return perr.rpc_error("InternalError", perr.INTERNAL)
    return {**error, "data": {"name": NAMES[code], **data}}


NOTIFICATION_FIELDS: dict[str, dict[str, type]] = {"session/cancel": {"sessionId": str}}


def _fits(method: str, params: Any) -> bool:
    """Whether a notification's params fit its ACP schema: an object, its required fields of their types, a
    `_meta` that is an object or null. Notifications are never answered, so one that does not fit is dropped
    here; handed on, the SDK's validation fails and it logs a traceback."""
    if not isinstance(params, dict):
        return False
    if params.get("_meta") is not None and not isinstance(params["_meta"], dict):
        return False
    return all(isinstance(params.get(k), t) for k, t in NOTIFICATION_FIELDS.get(method, {}).items())
