"""A small MCP server written with the official SDK's server API (`mcp.server.mcpserver.MCPServer`), run
over stdio: `python -m tests.mcp_servers.demo`. Tools: `echo` (text), `add` (numbers), `picture` (an
image and a resource link), `sleep` (blocks until cancelled or `seconds` pass), `env` (the value of one
environment variable, to check what the server was given), `read_text`, `write_text` and `connect` (what
the sandbox lets it read, write and reach), `crash` (the process exits at once), `fail` (an `isError`
result), `big` (a text of N MiB), `refuse` (a JSON-RPC error with data). With `DEMO_HTTP_PORT=N` it
serves Streamable HTTP on 127.0.0.1:N instead (`DEMO_JSON=1`: JSON answers, not event streams). With `DEMO_FAIL_START=1` it writes to stderr and exits before serving."""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import ImageContent, ResourceLink, TextContent

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII="  # a 1x1 PNG: the model API takes only whole images

server = MCPServer("demo")


@server.tool()
def echo(text: str) -> str:
    """Return the text as given."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def picture() -> list[ImageContent | ResourceLink | TextContent]:
    """A tiny image, a link to a resource and a caption."""
    return [
        TextContent(type="text", text="a picture"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        ResourceLink(type="resource_link", uri="file:///tmp/pic.png", name="pic.png", description="the file"),
    ]


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable, or (unset)."""
    return os.environ.get(name, "(unset)")


@server.tool()
def read_text(path: str) -> str:
    """The text of a file, or `error: <why>` (what the sandbox lets the server read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(4096)
    except OSError as exc:
        return f"error: {type(exc).__name__}: {exc.strerror}"


@server.tool()
def write_text(path: str, text: str) -> str:
    """Write a file: `ok` or `error: <why>` (what the sandbox lets the server write)."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return "ok"
    except OSError as exc:
        return f"error: {type(exc).__name__}: {exc.strerror}"


@server.tool()
def connect(port: int) -> str:
    """Open a TCP connection to 127.0.0.1:port: `connected` or `error: <why>`."""
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "connected"
    except OSError as exc:
        return f"error: {type(exc).__name__}: {exc.strerror or exc}"


@server.tool()
def crash() -> str:
    """Exit the process at once."""
    os._exit(3)


@server.tool()
def big(mib: float) -> str:
    """A text of `mib` MiB (agentd bounds what it accepts in one message)."""
    return "x" * int(mib * (1 << 20))


@server.tool()
def refuse(text: str) -> str:
    """Answers with a JSON-RPC error whose message is `text` and whose data says why."""
    raise MCPError(-32602, text, {"reason": "refused on purpose"})


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("it failed on purpose")


if __name__ == "__main__":
    if os.environ.get("DEMO_FAIL_START") == "1":
        sys.stderr.write("demo: cannot start: the database is locked\n")
        sys.exit(2)
    port = os.environ.get("DEMO_HTTP_PORT")
    if port:  # Streamable HTTP on 127.0.0.1; DEMO_JSON=1: JSON answers instead of event streams
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(port),
            json_response=bool(os.environ.get("DEMO_JSON")),
        )
    else:
        server.run("stdio")
