"""Unit tests of the ACP adapter's own rules (issue 10 Part 2): the line transport's answers to malformed
input and its rewording of the SDK's generic errors (PROTOCOL.md §11: `data.name` and a message that says what
to do), the shared approval and list helpers (agentd.adapters.common), the client-file overlay's choice of
the disk, and slash-command parsing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentd.adapters.acp.commands import command_of
from agentd.adapters.acp.files import CLIENT_READ_MAX, ClientFiles
from agentd.adapters.acp.transport import LineTransport, reworded
from agentd.adapters.common import list_page, outcome_of
from agentd.permissions.approver import ApprovalRequest
from agentd.protocol.approvals import permission_options
from agentd.tools.base import Preview


class Frames:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        self.sent.append(json.loads(data))

    def close(self) -> None:
        return None

    async def writable(self) -> bool:
        return True

    async def flush(self, timeout: float) -> None:
        return None


async def _transport(*lines: bytes) -> tuple[LineTransport, Frames, list[dict[str, Any]]]:
    reader = asyncio.StreamReader(limit=2**16)
    for line in lines:
        reader.feed_data(line + b"\n")
    reader.feed_eof()
    frames = Frames()
    t = LineTransport(reader, frames, frozenset({"session/new"}), frozenset({"session/cancel"}))
    got = []
    while (msg := await t.receive()) is not None:
        got.append(msg)
    return t, frames, got


async def test_malformed_lines_are_answered_and_good_ones_passed_on() -> None:
    cancels: list[Any] = []
    _, frames, got = await _transport(
        b"{not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"id": 1, "method": "session/new"}',  # no jsonrpc
        b'{"jsonrpc": "2.0", "id": true, "method": "session/new"}',
        b'{"jsonrpc": "2.0", "id": 2, "method": "nope/x"}',
        b'{"jsonrpc": "2.0", "method": "nope/note"}',
        b'{"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": "/a\\udcff"}}',
        b'{"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "/ok"}}',
        b'{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s\\udcff"}}',
        b'{"jsonrpc": "2.0", "id": 5, "result": {}}',
        b"   ",
    )
    assert [(f["id"], f["error"]["code"], f["error"]["data"]["name"]) for f in frames.sent] == [
        (None, -32700, "ParseError"), (None, -32700, "ParseError"), (None, -32600, "InvalidRequest"),
        (1, -32600, "InvalidRequest"), (None, -32600, "InvalidRequest"), (2, -32601, "MethodNotFound"),
        (3, -32602, "InvalidParams"),
    ]  # fmt: skip
    assert frames.sent[6]["error"]["data"]["errors"] == [
        {"loc": "cwd", "msg": "not valid Unicode (a lone surrogate U+DCFF)"}
    ]
    assert [g.get("id") for g in got] == [4, None, 5]
    assert got[1]["params"] == {"sessionId": "s\ufffd"}  # a notification's lone surrogate becomes U+FFFD
    assert cancels == []


async def test_params_too_deep_and_cancel_request() -> None:
    deep = "[" * 3000 + "]" * 3000
    cancelled: list[Any] = []
    reader = asyncio.StreamReader()
    reader.feed_data(
        f'{{"jsonrpc":"2.0","id":"d","method":"session/new","params":{{"x":{deep}}}}}\n'.encode()
    )
    reader.feed_data(
        b'{"jsonrpc":"2.0","id":"e","method":"session/new","params":' + b"[" * 70 + b"]" * 70 + b"}\n"
    )
    reader.feed_data(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}\n')
    reader.feed_eof()
    frames = Frames()
    t = LineTransport(reader, frames, frozenset({"session/new"}), frozenset())
    t.on_cancel_request = cancelled.append
    assert await t.receive() is None
    assert [(f["id"], f["error"]["code"]) for f in frames.sent] == [("d", -32602), ("e", -32602)]
    assert cancelled == [7]


async def test_a_line_longer_than_the_limit_is_answered_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentd.adapters.acp import transport

    monkeypatch.setattr(transport, "MAX_LINE", 1024)
    reader = asyncio.StreamReader(limit=1024)
    reader.feed_data(b'{"x":"' + b"a" * 5000 + b'"}\n{"jsonrpc":"2.0","id":1,"method":"session/new"}\n')
    reader.feed_eof()
    frames = Frames()
    t = LineTransport(reader, frames, frozenset({"session/new"}), frozenset())
    assert (await t.receive() or {}).get("id") == 1
    assert [(f["id"], f["error"]["code"]) for f in frames.sent] == [(None, -32600)]


def test_the_sdks_generic_errors_are_reworded_with_a_name_and_what_to_do() -> None:
    sdk = {"code": -32602, "message": "Invalid params", "data": {"errors": [
        {"type": "missing", "loc": ("cwd",), "msg": "Field required", "input": {}, "url": "https://x"}]}}  # fmt: skip
    assert reworded(sdk, "session/new") == {"code": -32602, "message": "session/new: cwd: Field required; fix the "
        "params and send it again.", "data": {"name": "InvalidParams", "errors": [{"loc": "cwd", "msg": "Field required"}]}}  # fmt: skip
    internal = reworded(
        {"code": -32603, "message": "Internal error", "data": {"details": "KeyError('x')"}}, "x"
    )
    assert internal["data"] == {"name": "InternalError"} and "KeyError" not in json.dumps(internal)
    ours = {"code": -32013, "message": "busy", "data": {"name": "SessionBusy"}}
    assert reworded(ours, "session/prompt") is ours
    assert reworded({"code": -32601, "message": "Method not found", "data": {"method": "a/b"}}, "")[
        "message"
    ].startswith("agentd does not implement a/b;")


def _req(options: tuple[dict[str, Any], ...] = ()) -> ApprovalRequest:
    return ApprovalRequest(session_id="s", tool_use_id="t", tool_name="run_command", title="Run `npm test`",
                           preview=Preview(summary="npm test", command="npm test"), options=options)  # fmt: skip


def test_an_answer_counts_only_for_an_option_that_was_offered() -> None:
    prefixed = _req(tuple(permission_options("run_command", prefix="npm test")))
    picked = outcome_of({"outcome": {"outcome": "selected", "optionId": "allow_always_prefix"}}, prefixed)
    assert (picked.option, picked.option_id) == ("allow_always", "allow_always_prefix")
    assert (
        outcome_of({"outcome": {"outcome": "selected", "optionId": "allow_always"}}, prefixed).option
        == "reject_once"
    )
    assert outcome_of({"outcome": {"outcome": "cancelled"}}, prefixed).option == "cancelled"
    assert outcome_of({"outcome": "yes"}, prefixed).option == "reject_once"
    reason = {
        "outcome": {"outcome": "selected", "optionId": "reject_once"},
        "_meta": {"agentd": {"reason": "no"}},
    }
    assert outcome_of(reason, _req()).reason == "no"
    assert outcome_of({**reason, "_meta": "x"}, _req()).reason is None


def test_session_list_pages_and_cursors() -> None:
    metas = [{"id": f"s{i}", "cwd": "/w", "title": None, "lockedBy": None} for i in range(120)]
    first = list_page(metas, None)
    assert (len(first["sessions"]), first["nextCursor"]) == (50, "o50")
    assert "title" not in first["sessions"][0] and first["sessions"][0]["_meta"]["agentd"]["lockedBy"] is None
    last = list_page(metas, "o100")
    assert (len(last["sessions"]), "nextCursor" in last) == (20, False)
    with pytest.raises(ValueError):
        list_page(metas, "garbage")


async def test_client_files_ask_only_for_small_regular_text_files(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def ask(method: str, params: dict[str, Any]) -> Any:
        asked.append((method, params))
        if method == "fs/write_text_file" and params["path"].endswith("ro.txt"):
            raise RuntimeError("read-only buffer")
        return {"content": "from the editor\n"} if method == "fs/read_text_file" else None

    (tmp_path / "a.txt").write_text("disk\n")
    (tmp_path / "bin").write_bytes(b"\x00\x01")
    (tmp_path / "big").write_bytes(b"x" * (CLIENT_READ_MAX + 1))
    (tmp_path / "link").symlink_to(tmp_path / "a.txt")
    files = ClientFiles("s", ask, read=True, write=True)
    assert await files.fetch_text(tmp_path / "a.txt") == "from the editor\n"
    for name in ("bin", "big", "link", "missing", "."):
        assert await files.fetch_text(tmp_path / name) is None
    assert [p["path"] for _, p in asked] == [str(tmp_path / "a.txt")]
    assert await files.apply_edit(tmp_path / "a.txt", "disk\n", "new\n") == (True, None)
    applied, why = await files.apply_edit(tmp_path / "ro.txt", None, "x") or (None, None)
    assert applied is False and "read-only buffer" in str(why)
    no_caps = ClientFiles("s", ask, read=False, write=False)
    assert await no_caps.fetch_text(tmp_path / "a.txt") is None
    assert await no_caps.apply_edit(tmp_path / "a.txt", None, "x") is None


def test_slash_commands_are_whole_prompts() -> None:
    def text(t: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": t}]

    assert command_of(text("/compact")) == "compact"
    assert command_of(text("  /status \n")) == "status"
    assert command_of(text("/compact now please")) is None
    assert command_of(text("/unknown")) is None
    assert command_of([*text("/status"), *text("more")]) is None
