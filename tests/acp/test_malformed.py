"""Malformed input over ACP (issue 10 Part 2; PROTOCOL.md §3.3, §3.4, §11; TESTING.md §4.4): 200 bad lines,
each answered as JSON-RPC 2.0 says (or, for a notification, not at all), and the agent still serves a whole
session afterwards. Every byte on stdout is a JSON-RPC message on its own line (stdout purity)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.acp.harness import ROOT, agent_env

DEADLINE = 20.0


class Raw:
    """`agentd --acp` over raw pipes: lines in, every stdout line parsed (any other byte fails the test)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.messages: list[dict[str, Any]] = []
        self.garbage: list[bytes] = []
        self._new = asyncio.Event()
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                msg = json.loads(line)
                assert line.endswith(b"\n") and isinstance(msg, dict) and msg.get("jsonrpc") == "2.0"
                self.messages.append(msg)
            except (ValueError, AssertionError):
                self.garbage.append(line)
            self._new.set()

    def send(self, *lines: bytes | str | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        for line in lines:
            data = (
                json.dumps(line).encode()
                if isinstance(line, dict)
                else line.encode()
                if isinstance(line, str)
                else line
            )
            self.proc.stdin.write(data + b"\n")

    async def answer(self, msg_id: Any, timeout: float = DEADLINE) -> dict[str, Any]:
        """The response to request `msg_id` (answering the agent's own requests with allow_once)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for m in self.messages:
                if m.get("id") == msg_id and "method" not in m:
                    return m
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError(f"no answer to {msg_id!r} within {timeout} s")
            self._new.clear()
            with_timeout = asyncio.wait_for(self._new.wait(), left)
            try:
                await with_timeout
            except TimeoutError:
                continue


def _bad_lines() -> tuple[list[bytes], dict[Any, int], int]:
    """200 malformed lines, the code each request id must get, and how many id-null errors must come."""
    lines: list[bytes] = []
    want: dict[Any, int] = {}
    nulls = 0
    n = 0
    while len(lines) < 200:
        n += 1
        kind = n % 10
        rid = f"bad-{n}"
        if kind == 0:  # not JSON at all
            lines.append(b"this is not json {" + str(n).encode())
            nulls += 1
        elif kind == 1:  # one frame split over two lines: two halves, neither is JSON
            frame = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "session/list", "params": {}})
            lines += [frame[: len(frame) // 2].encode(), frame[len(frame) // 2 :].encode()]
            nulls += 2
        elif kind == 2:  # an unknown method
            lines.append(
                json.dumps({"jsonrpc": "2.0", "id": rid, "method": f"nope/x{n}", "params": {}}).encode()
            )
            want[rid] = -32601
        elif kind == 3:  # wrong param types
            params = [{"cwd": n, "mcpServers": []}, {"cwd": "/", "mcpServers": "none"}, {"cwd": ["/"]}][n % 3]
            lines.append(
                json.dumps({"jsonrpc": "2.0", "id": rid, "method": "session/new", "params": params}).encode()
            )
            want[rid] = -32602
        elif kind == 4:
            params = {"sessionId": n, "prompt": "hi"}
            lines.append(
                json.dumps({"jsonrpc": "2.0", "id": n, "method": "session/prompt", "params": params}).encode()
            )
            want[n] = -32602
        elif kind == 5:  # JSON that is not a request object: a batch, a number, null, a string
            lines.append(
                [b"[]", b"42", b"null", b'"s"', b'[{"jsonrpc":"2.0","id":1,"method":"session/list"}]'][n % 5]
            )
            nulls += 1
        elif kind == 6:  # an unknown notification: no answer
            lines.append(json.dumps({"jsonrpc": "2.0", "method": f"nope/note{n}", "params": {}}).encode())
        elif kind == 7:  # a bad envelope: no jsonrpc, an id of the wrong type, a method that is not a string
            bad = [{"id": rid, "method": "session/list"}, {"jsonrpc": "2.0", "id": {"x": 1}, "method": "session/list"},
                   {"jsonrpc": "2.0", "id": rid, "method": 7}][n % 3]  # fmt: skip
            lines.append(json.dumps(bad).encode())
            if n % 3 == 2:
                want[rid] = -32600
            elif n % 3 == 0:
                want[rid] = -32600
            else:
                nulls += 1
        elif kind == 8:  # bytes that are not UTF-8, and a lone surrogate in a request's params
            if n % 2:
                lines.append(b"\xff\xfe{\x80}")
                nulls += 1
            else:
                lines.append(
                    b'{"jsonrpc":"2.0","id":"'
                    + rid.encode()
                    + b'","method":"session/list","params":{"cwd":"/a\\udcff"}}'
                )
                want[rid] = -32602
        else:  # params nested far too deeply to decode
            deep = "[" * 5000 + "]" * 5000
            lines.append(
                f'{{"jsonrpc":"2.0","id":"{rid}","method":"session/list","params":{{"x":{deep}}}}}'.encode()
            )
            want[rid] = -32602
    return lines[:200], want, nulls


async def test_200_malformed_lines_then_a_whole_session(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    lines, want, nulls = _bad_lines()
    assert len(lines) == 200
    emulator.script({"answers": [{"reply": [{"text": "Still here."}], "stop_reason": "end_turn"}]})
    err = (tmp_path / "agent.err").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--acp", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=err, env=agent_env(data_dir, emulator.url), cwd=str(ROOT), limit=2**24,
    )  # fmt: skip
    raw = Raw(proc)
    raw.send(*lines)
    for rid, code in want.items():
        got = await raw.answer(rid)
        assert got["error"]["code"] == code, (rid, got)
        assert got["error"]["data"]["name"] and got["error"]["message"]
    raw.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": 1}})
    assert (await raw.answer("init"))["result"]["protocolVersion"] == 1
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": "new",
            "method": "session/new",
            "params": {"cwd": str(workspace), "mcpServers": []},
        }
    )
    sid = (await raw.answer("new"))["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "Are you still there?"}]}
    raw.send({"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": prompt})
    assert (await raw.answer("p"))["result"]["stopReason"] == "end_turn"

    null_errors = [m for m in raw.messages if m.get("id") is None and "error" in m]
    assert sorted({m["error"]["code"] for m in null_errors}) == [-32700, -32600]
    assert len(null_errors) == nulls
    answered = {m["id"] for m in raw.messages if "method" not in m and m.get("id") is not None}
    assert answered == {*want, "init", "new", "p"}  # nothing else answered: notifications get no reply
    assert raw.garbage == []
    assert proc.stdin is not None
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), DEADLINE) == 0
    err.close()
    assert b"Traceback" not in (tmp_path / "agent.err").read_bytes()


async def test_a_notification_whose_params_do_not_fit_is_dropped_without_a_traceback(
    emulator: Emulator, data_dir: Path, tmp_path: Path
) -> None:
    """session/cancel with params null, a number, a list, a sessionId that is not a string or a `_meta` that is
    not an object: the SDK failed to validate it and logged a traceback to stderr (found by the ACP fuzzing
    of issue 16, tests/reliability/acpfuzz.py). It is dropped, never answered; the agent goes on."""
    err = (tmp_path / "agent.err").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--acp", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=err, env=agent_env(data_dir, emulator.url), cwd=str(ROOT), limit=2**24,
    )  # fmt: skip
    raw = Raw(proc)
    raw.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": 1}})
    assert "result" in await raw.answer("init")
    for params in (None, 5, ["s"], {"sessionId": 7}, {"sessionId": "sess_x", "_meta": 5}, {}):
        raw.send({"jsonrpc": "2.0", "method": "session/cancel", "params": params})
    raw.send({"jsonrpc": "2.0", "method": "session/cancel"})
    raw.send({"jsonrpc": "2.0", "id": "list", "method": "session/list", "params": {}})
    assert "result" in await raw.answer("list")
    assert {m.get("id") for m in raw.messages} == {"init", "list"} and raw.garbage == []
    assert proc.stdin is not None
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), DEADLINE) == 0
    err.close()
    assert b"Traceback" not in (tmp_path / "agent.err").read_bytes()
