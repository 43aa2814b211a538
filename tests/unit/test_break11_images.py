"""Images the model API refuses never reach the log or a request (issue 11, break11, finding 1): an MCP
result or a prompt image is kept only as JPEG/PNG/GIF/WebP bytes in valid base64 within the API's limits,
else a note says what was left out and why; a log written before that rule is still sent as a valid
request."""

from __future__ import annotations

import base64
import struct
import zlib
from types import SimpleNamespace as NS
from typing import Any

import pytest

from agentd import images
from agentd.adapters.common import BadPrompt, model_blocks
from agentd.mcp.tools import map_result
from agentd.protocol import session as ps
from agentd.providers.anthropic import wire_body
from agentd.providers.base import ModelRequest
from agentd.providers.openai_compat import chat_body

pytestmark = pytest.mark.unit


def png(w: int = 1, h: int = 1) -> str:
    def chunk(t: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)
    raw = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 5))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(raw).decode()


JPEG = base64.b64encode(
    b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x00\x02\x00\x03" + b"\0" * 12 + b"\xff\xd9"
).decode()
GIF = base64.b64encode(b"GIF89a\x05\x00\x06\x00" + b"\0" * 8 + b"\x3b").decode()
WEBP = base64.b64encode(b"RIFF\x16\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0\x07\0\0\x09\0\0").decode()
SVG = base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode()


def block(media: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def test_the_rule() -> None:
    """break11, finding 1: the four formats are kept with the media type their bytes are; anything else
    is refused with a reason."""
    assert images.check("image/png", png()).media_type == "image/png"
    assert (images.check("image/jpeg", JPEG).width, images.check("image/jpeg", JPEG).height) == (3, 2)
    assert images.check("image/gif", GIF).media_type == "image/gif"
    assert (images.check("image/webp", WEBP).width, images.check("image/webp", WEBP).height) == (8, 10)
    assert (
        images.check("image/png", JPEG).media_type == "image/jpeg"
    )  # the bytes decide (the API refuses a mismatch)
    assert images.check("image/png", png()[:20] + "\n" + png()[20:]).problem is None  # whitespace dropped
    refused = {
        "svg": images.check("image/svg+xml", SVG).problem,
        "bad base64": images.check("image/png", "not base64!").problem,
        "padding": images.check("image/png", png()[:-2]).problem,
        "signature only": images.check("image/png", base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()).problem,
        "too wide": images.check("image/png", png(9000, 10)).problem,
        "too big": images.check("image/png", "A" * (images.MAX_BASE64_BYTES + 4)).problem,
    }
    assert refused == {
        "svg": "a type the model API refuses (the model API takes only JPEG, PNG, GIF and WebP; image/svg+xml)",
        "bad base64": "its data is not valid base64",
        "padding": "its data is not valid base64",
        "signature only": "an incomplete or unreadable PNG file",
        "too wide": "9000x10 pixels, over the model API's 8000 a side",
        "too big": "larger than the model API's 5 MiB limit",
    }


def test_mcp_results_keep_only_images_the_api_takes() -> None:
    """break11, finding 1: an MCP image/svg+xml, a bad base64 payload, an embedded image blob, audio: the
    result holds image blocks only for what the API takes, and a note for the rest."""
    result = NS(
        is_error=False,
        structured_content=None,
        content=[
            NS(type="image", data=SVG, mime_type="image/svg+xml"),
            NS(type="image", data="@@@", mime_type="image/png"),
            NS(type="image", data=JPEG, mime_type="image/png"),
            NS(type="resource", resource=NS(uri="mem://shot", mime_type="image/gif", blob=GIF)),
            NS(type="resource", resource=NS(uri="mem://vec", mime_type="image/svg+xml", blob=SVG)),
            NS(type="audio", data="QUJD", mime_type="audio/\x1b[2Jwav"),
        ],
    )
    out = map_result(result, 10000)
    assert out.images == [block("image/jpeg", JPEG), block("image/gif", GIF)]
    assert out.content == (
        "[image image/svg+xml, 42 bytes: left out: a type the model API refuses (the model API takes only JPEG,"
        " PNG, GIF and WebP; image/svg+xml)]\n"
        "[image image/png, 2 bytes: left out: its data is not valid base64]\n"
        "[resource mem://shot: an image]\n"
        "[resource mem://vec: an image]\n"
        "[image image/svg+xml, 42 bytes: left out: a type the model API refuses (the model API takes only JPEG,"
        " PNG, GIF and WebP; image/svg+xml)]\n"
        "[audio audio/\\x1b[2Jwav, 3 bytes: not shown (the model takes no audio)]"
    )


def test_prompt_images_the_api_refuses_are_a_clear_error() -> None:
    """break11, finding 1: an editor's prompt image goes through the same rule (a BadPrompt, not a stuck
    session)."""
    with pytest.raises(BadPrompt, match="a type the model API refuses"):
        model_blocks([ps.ImageBlock(type="image", data=SVG, mime_type="image/svg+xml")], True)
    assert model_blocks([ps.ImageBlock(type="image", data=JPEG, mime_type="image/png")], True) == [
        block("image/jpeg", JPEG)
    ]


def _request(messages: list[dict[str, Any]]) -> ModelRequest:
    return ModelRequest(model="m", system=[], tools=[], messages=messages, max_tokens=10)


def test_an_old_log_with_a_refused_image_still_makes_a_valid_request() -> None:
    """break11, finding 1: a session log written before the rule holds an svg image in a tool_result and
    a bad one in a prompt; the request carries notes in their place (both providers), the log is not
    changed, and the same history gives the same bytes on every request."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, block("image/png", "xx")]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "mcp__a__b", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "shot"}, block("image/svg+xml", SVG),
                                                  block("image/png", png())]}]},
    ]  # fmt: skip
    before = repr(messages)
    body = wire_body(_request(messages))
    assert body["messages"][0]["content"][1] == {
        "type": "text",
        "text": "[image image/png, 1 bytes: left out: its data is not valid base64]",
    }
    inner = body["messages"][2]["content"][0]["content"]
    assert inner[1]["type"] == "text" and inner[1]["text"].startswith(
        "[image image/svg+xml, 42 bytes: left out"
    )
    assert inner[2] == block("image/png", png())
    assert repr(messages) == before and wire_body(_request(messages)) == body
    openai = chat_body(_request(messages), model="m")
    assert "svg" not in str([m for m in openai["messages"] if "image_url" in str(m)])


def test_many_images_in_one_request_follow_the_api_limits() -> None:
    """break11, finding 1: more than 20 images in a request: any over 2000 pixels a side become notes;
    more than 100: the oldest become notes, the newest 100 are kept."""
    big, small = png(3000, 10), png()
    messages = [{"role": "user", "content": [block("image/png", big)] + [block("image/png", small)] * 120}]
    content = wire_body(_request(messages))["messages"][0]["content"]
    kinds = [b["type"] for b in content]
    assert kinds.count("image") == 100 and kinds[:21] == ["text"] * 21
    assert "3000x10 pixels; with more than 20 images" in content[0]["text"]
    assert "at most 100 images per request" in content[1]["text"]


def test_the_contexts_image_index_gives_the_same_bytes_as_looking_at_every_message() -> None:
    """Issue 16: `request_safe` looks only at the messages the Context says hold an image (kept through
    merges, a rollback and a compaction); the request is the same as when every message is looked at, with
    images in prompts and tool results, refused ones and more than 20."""
    from agentd.core import compaction
    from agentd.core.context import Context

    big, small = png(3000, 10), png()
    ctx = Context()
    ctx.add_user([{"type": "text", "text": "look"}, block("image/png", "xx")])
    for k in range(30):
        ctx.add_assistant([{"type": "tool_use", "id": f"t{k}", "name": "mcp__a__b", "input": {}}])
        shot = (
            [block("image/png", big if k % 7 == 0 else small)]
            if k % 3 == 0
            else [{"type": "text", "text": "-"}]
        )
        ctx.add_user([{"type": "tool_result", "tool_use_id": f"t{k}", "content": shot}])
        if k == 10:
            ctx.add_user([{"type": "text", "text": "and this"}, block("image/svg+xml", SVG)])  # merged
        if k == 20:
            ctx.add_assistant([{"type": "text", "text": "rolled back"}])
            ctx.drop_last()
    ctx.add_user([block("image/png", small)] * 12)
    for _ in range(2):
        request = ctx.to_request(model="m", system=[], tools=[], max_tokens=10)
        unhinted = ModelRequest(model="m", system=[], tools=[], messages=request.messages, max_tokens=10)
        assert request.images is not None and len(request.images) < len(request.messages)
        assert wire_body(request) == wire_body(unhinted)
        assert chat_body(request, model="m") == chat_body(unhinted, model="m")
        head = compaction.rebuild(ctx.messages, 20, "summary", None)
        ctx.replace_prefix(head.cut, head.summary, head.ack)


def test_cut_images_are_refused_here_and_by_the_emulator() -> None:
    """break11 (second review, finding 5): the first 300 bytes of a PNG and a 42-byte JPEG header passed
    the check; the API cannot decode them ("Could not process image") and the stored log would poison
    every later request. Each format is checked whole; the emulator refuses a cut image as the API does."""
    from agentd.testing.emulator import validate_request

    big = base64.b64decode(png(64, 64))
    cuts = {
        "image/png": base64.b64encode(big[: len(big) - 5]).decode(),
        "image/jpeg": base64.b64encode(base64.b64decode(JPEG)[:-2]).decode(),
        "image/gif": base64.b64encode(base64.b64decode(GIF)[:-1]).decode(),
        "image/webp": base64.b64encode(base64.b64decode(WEBP)[:-2]).decode(),
    }
    for media, data in cuts.items():
        assert "incomplete" in (images.check(media, data).problem or ""), media
        body = {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [block(media, data)]}],
        }
        err = validate_request(body)
        assert err is not None and err.status == 400 and err.message == "Could not process image", media
    for media, data in {"image/png": png(), "image/jpeg": JPEG, "image/gif": GIF, "image/webp": WEBP}.items():
        assert images.check(media, data).problem is None
        body = {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [block(media, data)]}],
        }
        assert validate_request(body) is None, media


def test_images_of_many_results_stay_within_the_request_size_limit() -> None:
    """break11 (second review, finding 6): the images of many MCP results added up past the API's 32 MB
    request limit (413 on every request). A request keeps the newest images up to 20 MB of base64 and
    sends notes for older ones; the stored messages are unchanged; the emulator refuses a body over 32 MB."""
    import json
    import os

    from agentd.testing.emulator.content import MAX_BODY_BYTES

    def chunk(t: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 6, 0, 0, 0))
    data = base64.b64encode(
        b"\x89PNG\r\n\x1a\n" + ihdr + chunk(b"IDAT", os.urandom(700_000)) + chunk(b"IEND", b"")
    ).decode()
    msgs: list[dict[str, Any]] = []
    for k in range(40):  # 40 results of ~0.93 MB of base64 each: ~37 MB
        msgs.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{k}", "name": "x", "input": {}}]}
        )
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": [block("image/png", data)]}
        msgs.append({"role": "user", "content": [result]})
    assert len(json.dumps(msgs)) > MAX_BODY_BYTES
    sent = images.request_safe(msgs)
    assert len(json.dumps(sent)) < MAX_BODY_BYTES
    kept = [m for m in sent if m["role"] == "user" and m["content"][0]["content"][0]["type"] == "image"]
    assert 15 <= len(kept) <= 21 and sent[-1]["content"][0]["content"][0]["type"] == "image"
    assert "32 MB" in sent[1]["content"][0]["content"][0]["text"]
    assert msgs[1]["content"][0]["content"][0]["type"] == "image"  # the log is not changed
