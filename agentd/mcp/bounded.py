"""How much agentd accepts from an MCP server in one message (issue 11, break11), on both transports.

Owns: `stdio_client()` (the stdio transport: newline-delimited JSON-RPC read as bytes with a bound per
message), `http_client()` (an httpx2 client whose response bodies are bounded: a JSON body as a whole, an
SSE stream per event), `TooLarge` and `over_limit_text()` (the model-facing text of a refused message).
Imports the standard library, anyio, httpx2, `mcp`/`mcp_types` (lazily, through `agentd.mcp.connection`);
never pygls, lsprotocol, acp or `agentd.adapters`.

Why: the SDK's own stdio reader keeps a whole line in memory and joins it chunk by chunk (time quadratic in
its size), with no bound; a 30 MiB result held the server's later calls until they timed out, and
cancelling did not stop it. Here a message larger than `max_bytes` is never held: its bytes are counted and
dropped as they arrive (only a few KiB at each end are kept, to find its request id). When it is the answer
to a request agentd sent, that request is answered in its place with a JSON-RPC error naming the limit, so
the call ends at once as an `is_error` result and the server stays usable for the next call; a message
that cannot be matched to a request (a notification, an id agentd never sent) is dropped, or, when a call
waits on it, ends the connection (the server is started again on the next call). The process itself is
started and stopped by the SDK's helpers (its own process group, stdin closed, then the tree terminated).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import IO, Any, TextIO, cast

import anyio

log = logging.getLogger("agentd.mcp")

MAX_MESSAGE_BYTES = 16 << 20  # the default of `mcp.max_message_bytes`
CHUNK = 1 << 16
KEEP = 4096  # bytes kept at each end of a message that is too large (to find its id)
TOO_LARGE = -32090  # the JSON-RPC error code (implementation-defined range) of the answer that stands for it

_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_HEAD_ID = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _ID + rb"\s*\}\s*$")
_METHOD_FIRST = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?(?:"id"\s*:\s*\S+?\s*,\s*)?"method"')


def over_limit_text(size: int, limit: int, *, partial: bool = False) -> str:
    """`the MCP server's answer was larger than agentd accepts (... 16 MiB, mcp.max_message_bytes) ...`."""
    got = f"more than {limit} bytes" if partial else f"{size} bytes"
    return (
        f"the MCP server's answer was larger than agentd accepts ({got}; the limit is {_mib(limit)},"
        " mcp.max_message_bytes); it was dropped. Ask for less (a narrower query, a page, a smaller file)."
    )


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n} bytes"


@dataclass
class Oversize:
    """A message that passed the limit: its full `size` and the bytes kept at its `head` and `tail`."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self, pending: dict[Any, None]) -> tuple[bool, Any]:
        """(is an answer, the id of the request it answers or None when unknown). A message that starts
        with a method is a request or notification of the server's, not an answer."""
        if _METHOD_FIRST.match(self.head):
            return False, None
        for m in (_TAIL_ID.search(self.tail), _HEAD_ID.match(self.head)):
            if m is not None:
                with suppress(ValueError):
                    rid = json.loads(m.group(1))
                    if rid in pending:
                        return True, rid
        return True, next(iter(pending)) if len(pending) == 1 else None


async def _lines(receive: Callable[[int], Any], limit: int) -> AsyncIterator[bytes | Oversize]:
    """The messages of a newline-delimited byte stream: each line (without its newline; blank lines
    skipped), or an `Oversize` for one longer than `limit` bytes, which is never held whole."""
    buf = bytearray()
    big: Oversize | None = None
    while True:
        try:
            chunk = await receive(CHUNK)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            if big is None and len(buf) + len(piece) > limit:
                whole = bytes(buf) + piece
                big, buf = Oversize(len(whole), whole[:KEEP], whole[-KEEP:]), bytearray()
            elif big is not None:
                big.size += len(piece)
                big.tail = (big.tail + piece)[-KEEP:]
            else:
                buf += piece
            if nl < 0:
                break
            if big is not None:
                yield big
                big = None
            elif buf.strip():
                yield bytes(buf)
            buf.clear()
            start = nl + 1


@asynccontextmanager
async def stdio_client(
    params: Any, errlog: IO[str], limit: int, over: Callable[[int], None]
) -> AsyncIterator[Any]:
    """The stdio transport of `params` (the SDK's `StdioServerParameters`), for `mcp.Client`: yields
    (read stream, write stream) as the SDK's `stdio_client` does. `over(size)` is told of each message
    larger than `limit` bytes (module docstring)."""
    import mcp_types as types
    from mcp.client import stdio as sdk
    from mcp.shared.message import SessionMessage

    process = await sdk._create_platform_compatible_process(
        command=params.command, args=list(params.args), env=sdk.get_default_environment() | dict(params.env or {}),
        errlog=cast(TextIO, errlog), cwd=params.cwd,
    )  # fmt: skip
    read_in, read_out = anyio.create_memory_object_stream[Any](0)
    write_in, write_out = anyio.create_memory_object_stream[Any](0)
    pending: dict[Any, None] = {}  # ids of the requests sent and not answered yet

    def parsed(line: bytes) -> Any:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            return exc
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            pending.pop(message.id, None)
        return SessionMessage(message)

    def refused(big: Oversize) -> Any:
        """The error answer that stands for `big`; None when it must end the connection; False: drop it."""
        answer, rid = big.request_id(pending)
        if not answer:
            log.warning("MCP: a %d-byte message from the server was dropped (over %d bytes)", big.size, limit)
            return False
        if rid is None:
            return None if pending else False
        pending.pop(rid, None)
        error = types.ErrorData(code=TOO_LARGE, message=over_limit_text(big.size, limit))
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))

    async def reader() -> None:
        assert process.stdout is not None
        async with read_in:
            async for item in _lines(process.stdout.receive, limit):
                if isinstance(item, Oversize):
                    over(item.size)
                    answer = refused(item)
                    if answer is None:
                        return  # nothing to match it to while a call waits: the connection ends
                    if answer is False:
                        continue
                else:
                    answer = parsed(item)
                try:
                    await read_in.send(answer)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_out:
                async for session_message in write_out:
                    message = session_message.message
                    if isinstance(message, types.JSONRPCRequest):
                        pending[message.id] = None
                    elif getattr(message, "method", None) == "notifications/cancelled":
                        pending.pop((getattr(message, "params", None) or {}).get("requestId"), None)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_in.aclose()  # the server cannot be written to: the session sees the connection end

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_out, write_in
        finally:
            with anyio.CancelScope(shield=True):
                await write_in.aclose()
                await read_out.aclose()
                await sdk._stop_server_process(process)
            tg.cancel_scope.cancel()


# ---- Streamable HTTP ----------------------------------------------------------------------------------


def http_client(headers: dict[str, str], limit: int, over: Callable[[int], None]) -> Any:
    """An `httpx2.AsyncClient` for the SDK's `streamable_http_client` (the MCP timeouts: 30 s, 300 s to
    read an event stream) whose response bodies are bounded: a JSON body to `limit` bytes, an event stream
    to `limit` bytes per event. Past it the body raises `TooLarge` (an `httpx2.StreamError`) and
    `over(size)` is told."""
    import httpx2

    bounded_transport, _ = _http_classes()
    timeout = httpx2.Timeout(30.0, read=300.0)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, transport=bounded_transport(limit, over))


@functools.cache
def _http_classes() -> tuple[Any, type[Exception]]:
    """(the bounded transport class, `TooLarge`), made once: httpx2 is imported only when needed."""
    import httpx2

    class TooLarge(httpx2.StreamError):
        """A response body (or one event of a stream) larger than `mcp.max_message_bytes`."""

    class BoundedStream(httpx2.AsyncByteStream):
        """The body of one response, raising `TooLarge` past `limit` bytes (per event for SSE)."""

        def __init__(self, inner: Any, limit: int, events: bool, over: Callable[[int], None]) -> None:
            self.inner, self.limit, self.events, self.over = inner, limit, events, over
            self.count = 0

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self.inner:
                if self.events:  # bytes since the last blank line: the event being received
                    cut = max(chunk.rfind(b"\n\n"), chunk.rfind(b"\r\n\r\n"))
                    self.count = len(chunk) - cut if cut >= 0 else self.count + len(chunk)
                else:
                    self.count += len(chunk)
                if self.count > self.limit:
                    self.over(self.count)
                    raise TooLarge(over_limit_text(self.count, self.limit, partial=True))
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class BoundedTransport(httpx2.AsyncBaseTransport):
        def __init__(self, limit: int, over: Callable[[int], None]) -> None:
            self.inner = httpx2.AsyncHTTPTransport()
            self.limit, self.over = limit, over

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            events = "text/event-stream" in response.headers.get("content-type", "")
            response.stream = BoundedStream(response.stream, self.limit, events, self.over)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    return BoundedTransport, TooLarge
