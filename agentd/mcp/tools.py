"""MCP tools as agentd tools (issue 11): `mcp__<server>__<tool>`, through the same loop, permission gate,
audit log, hooks, cancellation and timeout as the built-in tools.

Owns: `MCPTool` (definition from the server's listing, input checked against its JSON Schema before the
gate, the call, the result mapping), `qualified_name()` and `map_result()`. Imports the standard library,
jsonschema (an `mcp` dependency) and `agentd.tools`/`agentd.mcp.connection`; never pygls, lsprotocol, acp or
`agentd.adapters`.

Result mapping (sized like other tool outputs: text beyond `tools.output_max_bytes` keeps its head and tail
around the truncation marker): text as is; a resource link as `[resource: <name> <uri> - <description>]`;
an embedded text resource as its URI and text; an image (or an embedded image blob) as an image block next
to the text when the model API takes it (`agentd.images`: JPEG, PNG, GIF or WebP bytes, valid base64, within
the API's limits; at most `IMAGES_MAX` of at most `IMAGE_MAX_BYTES` each), else a line saying what was left
out and why, so the log never holds a block the API refuses (break11); audio and other binary resources as a
line naming their type and size; `structuredContent` as JSON when there is no content.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from agentd.images import image_block
from agentd.images import note as images_note
from agentd.mcp.connection import MCPCallError, MCPConnection
from agentd.text import visible
from agentd.tools.base import Preview, StrictInput, Tool, ToolContext, ToolOutput, model_text

NAME_RE = re.compile(r"[^A-Za-z0-9_-]")
NAME_MAX = 64  # the Messages API's limit for a tool name
DESCRIPTION_MAX = 4000
IMAGES_MAX = 4
IMAGE_MAX_BYTES = 1 << 20  # base64 text per image kept in the result (the log keeps it too)


def qualified_name(server: str, tool: str, *, hashed: bool = False) -> str:
    """`mcp__<server>__<tool>`, with characters a tool name may not hold replaced by `_`, and cut to 64
    characters with a short hash of the server's tool name when longer (so two long names stay distinct).
    `hashed`: always end with that hash (for a name that another tool's name became, break11)."""
    name = f"mcp__{server}__{NAME_RE.sub('_', tool)}"
    if len(name) > NAME_MAX or hashed:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        name = name[: NAME_MAX - 9] + "_" + digest
    return name


def schema_problem(schema: Any) -> str | None:
    """Why the Messages API would refuse `schema` as a tool's `input_schema` (None when it takes it): it
    must be a JSON Schema (draft 2020-12, the API's) whose top-level type is `object` (break11: the API
    answers 400 to every request that holds one it refuses)."""
    import jsonschema

    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'its input schema is not a JSON Schema of "type": "object"'
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "top level"
        return f"its input schema is not valid JSON Schema 2020-12 (at {where}: {exc.message[:200]})"
    return None


class MCPArgs(BaseModel):
    """The model's arguments for an MCP tool, kept as given (`raw`); the server's schema checked them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    raw: dict[str, Any]

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # previews and audit show the input
        return dict(self.raw)


class MCPTool(Tool):
    """One tool of one MCP server. `remote`: the server's name for it; `schema`: its input JSON Schema."""

    effect = "exec"
    kind = "other"
    Input: ClassVar[type[StrictInput]] = StrictInput

    def __init__(
        self, conn: MCPConnection, remote: Any, default_timeout_s: float, *, hashed: bool = False
    ) -> None:
        self.conn = conn
        self.remote_name = str(remote.name)
        self.name = qualified_name(conn.spec.name, self.remote_name, hashed=hashed)  # type: ignore[misc]
        text = (remote.description or remote.title or "").strip()
        self.description = f"[MCP server {conn.spec.name}] {text}"[:DESCRIPTION_MAX]  # type: ignore[misc]
        self.schema: dict[str, Any] = dict(remote.input_schema or {"type": "object"})
        self.timeout_s = conn.spec.timeout_s or default_timeout_s
        # the server's `readOnlyHint` decides only how the call is shown and counted (kind `read`: no action
        # for exit 9 of `agentd run`), never whether it asks: a server's word grants nothing (new-user R7)
        hints = getattr(remote, "annotations", None)
        if getattr(hints, "read_only_hint", None) is True:
            self.kind = "read"  # type: ignore[misc,assignment]

    def definition(self, terse: bool = False) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.schema}

    def title(self, args: Any) -> str:
        return f"{self.remote_name} ({self.conn.spec.name})"

    def validate(self, raw: Any, ctx: ToolContext) -> tuple[Any, str | None]:
        """Check the input against the server's JSON Schema: `invalid_arguments: <loc>: <problem>`."""
        import jsonschema

        if not isinstance(raw, dict):
            return None, "invalid_arguments: input: must be an object"
        try:
            errors = sorted(jsonschema.Draft202012Validator(self.schema).iter_errors(raw), key=str)
        except Exception:  # any broken schema: a bad $ref, an unknown type, a pattern that does not compile
            errors = []  # the server's schema is broken: let the server judge the input
        if errors:
            parts = [f"{'.'.join(str(p) for p in e.absolute_path) or 'input'}: {e.message}" for e in errors]
            return None, "invalid_arguments: " + "; ".join(parts)
        return MCPArgs(raw=raw), None

    async def preview(self, args: Any, ctx: ToolContext) -> Preview:
        shown = json.dumps(args.raw, ensure_ascii=False, sort_keys=True)
        return Preview(summary=f"MCP server {self.conn.spec.name}: {self.remote_name} {shown}")

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            result = await self.conn.call(self.remote_name, args.raw, self.timeout_s)
        except TimeoutError:
            text = f"{self.name} timed out after {self.timeout_s:g} s; the call was cancelled."
            return ToolOutput(content=text, is_error=True)
        except MCPCallError as exc:
            return ToolOutput(content=f"{self.name} failed: {exc}", is_error=True)
        except asyncio.CancelledError:
            raise
        return map_result(result, ctx.output_max_bytes)


def map_result(result: Any, max_bytes: int) -> ToolOutput:
    """A `CallToolResult` as a `ToolOutput` (module docstring)."""
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            texts.append(item.text)
        elif kind == "image":
            _add_image(str(item.mime_type or ""), str(item.data or ""), images, texts)
        elif kind == "audio":
            size = len(str(item.data or "")) * 3 // 4
            texts.append(
                f"[audio {_shown(item.mime_type)}, {size} bytes: not shown (the model takes no audio)]"
            )
        elif kind == "resource_link":
            desc = getattr(item, "description", None)  # one line, escaped: it cannot forge lines (break11)
            shown = f" - {visible(str(desc), one_line=True)}" if desc else ""
            texts.append(f"[resource: {visible(str(item.name), one_line=True)} {item.uri}{shown}]")
        elif kind == "resource":
            _add_resource(item.resource, images, texts)
        else:
            texts.append(f"[{_shown(kind) or 'unknown'} content: not shown]")
    if not texts and not images and getattr(result, "structured_content", None) is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True))
    text = model_text("\n".join(texts), max_bytes=max_bytes) or ("(no output)" if not images else "")
    return ToolOutput(
        content=text,
        is_error=bool(result.is_error),
        images=images,
        raw_output={
            "isError": bool(result.is_error),
            "items": len(result.content or []),
            "images": len(images),
        },
    )


def _shown(value: Any) -> str:
    return visible(str(value or ""), one_line=True)[:100]


def _add_image(media_type: str, data: str, images: list[dict[str, Any]], texts: list[str]) -> None:
    """An image block when the model API takes it (`agentd.images`) and there is room, else a note."""
    if len(images) >= IMAGES_MAX or len(data) > IMAGE_MAX_BYTES:
        why = f"at most {IMAGES_MAX} images of {IMAGE_MAX_BYTES >> 10} KiB of base64 each are kept per result"
        texts.append(images_note(_shown(media_type), data, why))
        return
    block, note = image_block(media_type, data)
    if block is not None:
        images.append(block)
    else:
        texts.append(note or "")


def _add_resource(res: Any, images: list[dict[str, Any]], texts: list[str]) -> None:
    """An embedded resource: its text under its URI; an image blob as an image; other blobs as a note."""
    body = getattr(res, "text", None)
    mime = str(getattr(res, "mime_type", None) or "")
    if body is not None:
        texts.append(f"[resource {res.uri}]\n{body}")
    elif mime.startswith("image/"):
        texts.append(f"[resource {res.uri}: an image]")
        _add_image(mime, str(getattr(res, "blob", "") or ""), images, texts)
    else:
        size = len(str(getattr(res, "blob", "") or "")) * 3 // 4
        texts.append(f"[resource {res.uri}: {_shown(mime) or 'binary'}, {size} bytes, not shown]")
