"""Images the model API accepts (issue 11, break11). LEAF: imports only the standard library.

Owns the one rule of what an image block may hold, wherever one comes from (an MCP tool result, an editor's
prompt, a session log written before this rule): `check()` (is this base64 image one the Messages API
takes, and as what), `image_block()` (the block, or the text note that stands for it), `holds_image()` and `request_safe()`
(a request's messages with every image the API would refuse replaced by its note, so an old log that holds
one can still be sent).

The rule, from the Messages API's vision documentation: the media type is `image/jpeg`, `image/png`,
`image/gif` or `image/webp`; the data is standard base64 (whitespace is dropped); the bytes are one of those
formats (the media type sent is the one the bytes are, whatever the sender said, since the API refuses a
mismatch), and whole (a PNG through IEND, a JPEG to its end-of-image marker, a GIF to its trailer, a
WebP as long as its RIFF header says; break11); at most `MAX_BASE64_BYTES` (5 MiB) of base64; at most `MAX_SIDE` (8000) pixels a side, and at
most `MAX_SIDE_MANY` (2000) when a request holds more than `MANY` (20) images; at most `MAX_PER_REQUEST`
(100) images per request, and at most `MAX_REQUEST_IMAGE_BYTES` (20 MB) of their base64 in all (the API
refuses a request body over 32 MB; the newest are kept, at request time, the log unchanged). Anything else is a one-line note saying what was left out and why: the model
reads that instead, and nothing stored or sent is a block the API refuses (an API refusal would repeat on
every later request of the session).
"""

from __future__ import annotations

import binascii
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ACCEPTED = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_BASE64_BYTES = 5 << 20
MAX_SIDE = 8000
MAX_SIDE_MANY = 2000
MANY = 20
MAX_PER_REQUEST = 100
MAX_REQUEST_IMAGE_BYTES = 20_000_000  # base64 of all images in one request: the API refuses bodies over 32 MB
_HEAD = 1 << 16  # bytes read to find a JPEG's frame header (the size of the rest is not needed)


@dataclass(frozen=True)
class Checked:
    """The verdict on one image: `media_type` the bytes are (None when refused), `data` the base64 to send
    (whitespace dropped), `width`/`height` in pixels, `problem` why it is refused (None when accepted)."""

    media_type: str | None
    data: str
    width: int = 0
    height: int = 0
    problem: str | None = None


def _sniff(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def _size(kind: str, raw: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels from the format's header, or None when it is not there (a cut file)."""
    try:
        if kind == "image/png" and raw[12:16] == b"IHDR":
            w, h = struct.unpack(">II", raw[16:24])
            return w, h
        if kind == "image/gif":
            w, h = struct.unpack("<HH", raw[6:10])
            return w, h
        if kind == "image/webp":
            return _webp_size(raw)
        if kind == "image/jpeg":
            return _jpeg_size(raw)
    except struct.error:
        return None
    return None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8 " and raw[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", raw[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and raw[20:21] == b"\x2f":
        b = raw[21:25]
        return 1 + (b[0] | (b[1] & 0x3F) << 8), 1 + (b[1] >> 6 | b[2] << 2 | (b[3] & 0x0F) << 10)
    if chunk == b"VP8X":
        b = raw[24:30]
        return 1 + int.from_bytes(b[0:3], "little"), 1 + int.from_bytes(b[3:6], "little")
    return None


_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    """The size in the first start-of-frame segment, walking the segments from the start."""
    i = 2
    while i + 9 < len(raw):
        if raw[i] != 0xFF:
            return None
        marker = raw[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _SOF:
            h, w = struct.unpack(">HH", raw[i + 5 : i + 9])
            return w, h
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        i += 2 + struct.unpack(">H", raw[i + 2 : i + 4])[0]
    return None


def _whole(kind: str, raw: bytes) -> bool:
    """The file is all there (break11: the API cannot decode a cut one, and the stored log would hold it):
    a PNG's chunks run to IEND, a JPEG ends with its end-of-image marker (zero padding aside), a GIF with
    its trailer, a WebP is as long as its RIFF header says."""
    if kind == "image/png":
        pos = 8
        while pos + 12 <= len(raw):
            length, chunk = struct.unpack(">I4s", raw[pos : pos + 8])
            pos += 12 + length
            if chunk == b"IEND":
                return pos <= len(raw)
        return False
    if kind == "image/jpeg":
        return len(raw) > 4 and raw.rstrip(b"\x00").endswith(b"\xff\xd9")
    if kind == "image/gif":
        return raw.endswith(b"\x3b")
    return kind == "image/webp" and len(raw) >= 12 and struct.unpack("<I", raw[4:8])[0] + 8 == len(raw)


def check(media_type: str, data: str) -> Checked:
    """Whether the Messages API takes this base64 image (module docstring). Never raises. Verdicts are
    remembered by (media type, length, hash) for the next requests of a session, never the data itself."""
    if not data.isascii() or any(c in data for c in " \n\r\t"):
        data = "".join(data.split())
    key = (media_type, len(data), hash(data))
    verdict = _VERDICTS.get(key)
    if verdict is None:
        verdict = _verdict(media_type, data)
        _VERDICTS[key] = verdict
        if len(_VERDICTS) > VERDICTS_KEPT:
            del _VERDICTS[next(iter(_VERDICTS))]
    kind, width, height, problem = verdict
    return Checked(kind, data, width, height, problem)


VERDICTS_KEPT = 1024
_VERDICTS: dict[tuple[str, int, int], tuple[str | None, int, int, str | None]] = {}


def _verdict(media_type: str, data: str) -> tuple[str | None, int, int, str | None]:
    """(the media type the bytes are, width, height, None) for an image the API takes, else
    (None, 0, 0, why)."""
    said = media_type or "no media type"
    if len(data) > MAX_BASE64_BYTES:
        return None, 0, 0, f"larger than the model API's {MAX_BASE64_BYTES >> 20} MiB limit"
    try:
        raw = binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        return None, 0, 0, "its data is not valid base64"
    kind = _sniff(raw[:16])
    if kind is None:
        why = (
            "not a JPEG, PNG, GIF or WebP image" if media_type in ACCEPTED else "a type the model API refuses"
        )
        return None, 0, 0, f"{why} (the model API takes only JPEG, PNG, GIF and WebP; {said})"
    size = _size(kind, raw[:_HEAD])
    if size is None or 0 in size or not _whole(kind, raw):
        return None, 0, 0, f"an incomplete or unreadable {kind[6:].upper()} file"
    if max(size) > MAX_SIDE:
        return None, 0, 0, f"{size[0]}x{size[1]} pixels, over the model API's {MAX_SIDE} a side"
    return kind, size[0], size[1], None


def note(media_type: str, data: str, problem: str) -> str:
    """The text that stands for a refused image: `[image image/svg+xml, 1234 bytes: left out: <why>]`."""
    shown = "".join(c if c.isprintable() else "?" for c in (media_type or "no media type"))[:80]
    return f"[image {shown}, {len(data) * 3 // 4} bytes: left out: {problem}]"


def image_block(media_type: str, data: str) -> tuple[dict[str, Any] | None, str | None]:
    """(a Messages API image block, None) for an image the API takes, else (None, its note)."""
    c = check(media_type or "", data)
    if c.problem is not None or c.media_type is None:
        return None, note(media_type, data, c.problem or "refused")
    return {"type": "image", "source": {"type": "base64", "media_type": c.media_type, "data": c.data}}, None


# ---- requests -------------------------------------------------------------------------------------------


def _checked_block(block: Mapping[str, Any]) -> tuple[Checked, str, str] | None:
    source = block.get("source")
    if block.get("type") != "image" or not isinstance(source, Mapping) or source.get("type") != "base64":
        return None
    media, data = str(source.get("media_type") or ""), str(source.get("data") or "")
    return check(media, data), media, data


def _fix(blocks: list[Any], many: bool, budget: list[int]) -> list[Any] | None:
    """`blocks` with refused images as notes; None when nothing changed. `budget[0]`: images still
    allowed in the request (counted from the end); `budget[1]`: base64 bytes of images still allowed."""
    out: list[Any] = []
    changed = False
    for block in reversed(blocks):  # newest first, as the budget counts
        if (
            isinstance(block, Mapping)
            and block.get("type") == "tool_result"
            and isinstance(block.get("content"), list)
        ):
            inner = _fix(block["content"], many, budget)
            if inner is not None:
                block, changed = {**block, "content": inner}, True
        elif isinstance(block, Mapping) and (hit := _checked_block(block)) is not None:
            c, media, data = hit
            problem = c.problem
            if problem is None and many and max(c.width, c.height) > MAX_SIDE_MANY:
                problem = f"{c.width}x{c.height} pixels; with more than {MANY} images in a request the model API takes at most {MAX_SIDE_MANY} a side"
            if problem is None and budget[0] <= 0:
                problem = f"an older image: the model API takes at most {MAX_PER_REQUEST} images per request"
            if problem is None and len(c.data) > budget[1]:
                problem = (
                    f"an older image: images in one request are kept up to {MAX_REQUEST_IMAGE_BYTES // 1_000_000}"
                    " MB of base64, newest first (the model API refuses requests over 32 MB)"
                )
            if problem is None:
                budget[0] -= 1
                budget[1] -= len(c.data)
                if c.media_type != media or c.data != data:
                    block, changed = (
                        {**block, "source": {**block["source"], "media_type": c.media_type, "data": c.data}},
                        True,
                    )
            else:
                block, changed = {"type": "text", "text": note(media, data, problem)}, True
        out.append(block)
    return out[::-1] if changed else None


def _count(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        content = m.get("content")
        for b in content if isinstance(content, list) else ():
            if (
                isinstance(b, Mapping)
                and b.get("type") == "tool_result"
                and isinstance(b.get("content"), list)
            ):
                n += sum(1 for x in b["content"] if isinstance(x, Mapping) and x.get("type") == "image")
            elif isinstance(b, Mapping) and b.get("type") == "image":
                n += 1
    return n


def holds_image(message: Mapping[str, Any]) -> bool:
    """Whether `message` holds an image block (in its content or in a tool_result's)."""
    return _count([message]) > 0  # type: ignore[list-item]


def request_safe(messages: list[dict[str, Any]], where: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """`messages` with every image the Messages API would refuse replaced by its note (module docstring);
    the newest `MAX_PER_REQUEST` images, up to `MAX_REQUEST_IMAGE_BYTES` of base64 in all, are the ones
    kept (break11: many MCP results' images added up past the API's 32 MB request limit). The same list when nothing changes; else a
    copy (messages and blocks copied where changed, never changed in place). `where`: the indexes of the only
    messages that may hold an image, ascending (the Context keeps them, so a request costs the same however
    long the history is; issue 16); None: every message is looked at."""
    at = range(len(messages)) if where is None else [i for i in where if i < len(messages)]
    total = _count([messages[i] for i in at])
    if total == 0:
        return messages
    budget, many = [MAX_PER_REQUEST, MAX_REQUEST_IMAGE_BYTES], total > MANY
    out = list(messages)
    for i in reversed(at):  # newest first: the budget keeps the latest images
        content = out[i].get("content")
        if isinstance(content, list):
            fixed = _fix(content, many, budget)
            if fixed is not None:
                out[i] = {**out[i], "content": fixed}
    return out if any(out[i] is not messages[i] for i in at) else messages
