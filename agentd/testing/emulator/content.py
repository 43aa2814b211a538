"""Content checks of the Messages API emulator (break11): what the service refuses in tool definitions and
images, with its status and text, so a test whose request holds one fails as it would against the API.

Owns `check_tools` (a tool name outside `^[a-zA-Z0-9_-]{1,64}$`, an `input_schema` that is not valid JSON
Schema draft 2020-12: 400), `check_images` (an image the service cannot decode, such as a truncated file:
400 "Could not process image") and `MAX_BODY_BYTES` (32 MB: a larger body is a 413). Imports no agentd code
(the emulator checks agentd from outside); agentd's own rules are agentd.images and agentd.mcp.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Iterator
from typing import Any

MAX_BODY_BYTES = 32_000_000  # the Messages API's request size limit (its errors docs: 413 request_too_large)
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
SCHEMA_INVALID = (
    "JSON schema is invalid. It must match JSON Schema draft 2020-12 (https://json-schema.org/draft/2020-12). "
    "Learn more about tool use at https://docs.claude.com/en/docs/tool-use."
)
IMAGE_INVALID = "Could not process image"


def check_tools(body: dict[str, Any]) -> str | None:
    """The first client tool with a name or input schema the service refuses, as its 400 text."""
    import jsonschema

    for k, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or tool.get("type") not in (None, "custom"):
            continue  # server tools (web search...) have their own shapes
        if not isinstance(tool.get("name"), str) or not _TOOL_NAME.fullmatch(tool["name"]):
            return f"tools.{k}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        schema = tool.get("input_schema")
        try:
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise jsonschema.SchemaError("top-level type must be object")
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError:
            return f"tools.{k}.custom.input_schema: {SCHEMA_INVALID}"
    return None


def _images(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, msg in enumerate(body.get("messages") or []):
        content = msg.get("content") if isinstance(msg, dict) else None
        for j, b in enumerate(content if isinstance(content, list) else []):
            if not isinstance(b, dict):
                continue
            inner = b.get("content") if b.get("type") == "tool_result" else None
            for k, c in enumerate(inner if isinstance(inner, list) else []):
                if isinstance(c, dict) and c.get("type") == "image":
                    yield f"messages.{i}.content.{j}.content.{k}", c
            if b.get("type") == "image":
                yield f"messages.{i}.content.{j}", b


def check_images(body: dict[str, Any]) -> str | None:
    """The first base64 image the service could not decode (not whole, or not the format it names)."""
    for _where, block in _images(body):
        src = block.get("source")
        if not isinstance(src, dict) or src.get("type") != "base64":
            continue
        try:
            raw = base64.b64decode(str(src.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            return IMAGE_INVALID
        if not _whole(str(src.get("media_type", "")), raw):
            return IMAGE_INVALID
    return None


def _whole(media_type: str, raw: bytes) -> bool:
    if media_type == "image/png":
        return raw.startswith(b"\x89PNG\r\n\x1a\n") and _png_ends(raw)
    if media_type == "image/jpeg":
        return raw.startswith(b"\xff\xd8") and raw.rstrip(b"\x00").endswith(b"\xff\xd9") and len(raw) > 4
    if media_type == "image/gif":
        return raw[:6] in (b"GIF87a", b"GIF89a") and raw.endswith(b"\x3b")
    if media_type == "image/webp":
        return (
            raw[:4] == b"RIFF" and raw[8:12] == b"WEBP" and struct.unpack("<I", raw[4:8])[0] + 8 == len(raw)
        )
    return False


def _png_ends(raw: bytes) -> bool:
    """Walk the chunks: whole ones up to IEND."""
    pos = 8
    while pos + 12 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[pos : pos + 8])
        pos += 12 + length
        if kind == b"IEND":
            return pos <= len(raw)
    return False
