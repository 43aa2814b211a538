"""The daemon over raw pipes (PROTOCOL.md §3.2, §3.4, §4.4, §11; TESTING.md §4.4): stdout carries only
frames; 200 malformed frames get the right JSON-RPC errors (or none) and the daemon keeps serving; framing
errors and end of input end the process cleanly; the lifecycle errors -32002 and -32600."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.lsp.harness import RawPipe, daemon_env, frame, init_params, parse_frames, write_scenario

SCENARIO = {"answers": [
    {"reply": [{"text": "Planning."},
               {"tool_use": {"name": "todo_write", "input": {"todos": [{"content": "Say hi", "status": "in_progress"}]}}}]},
    {"reply": [{"tool_use": {"name": "run_command", "input": {"command": "echo hello-from-command; echo err >&2"}}}]},
    {"reply": [{"text": "Said hi."}]},
]}  # fmt: skip
ALLOW_RUN = {"permissions": {"rules": [{"tool": "run_command", "action": "allow"}]}}


def _options(tmp_path: Path) -> dict[str, Any]:
    return {
        "provider": "scripted",
        "scenario": str(write_scenario(tmp_path / "scenario.json", SCENARIO)),
        **ALLOW_RUN,
    }


async def _started(tmp_path: Path, workspace: Path, data_dir: Path, *args: str) -> RawPipe:
    pipe = await RawPipe.start(daemon_env(data_dir), *args)
    await pipe.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": init_params(workspace, _options(tmp_path))})  # fmt: skip
    assert "capabilities" in (await pipe.reply(1))["result"]
    await pipe.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    return pipe


async def _turn(pipe: RawPipe, workspace: Path, ident: int) -> str:
    await pipe.send(
        {"jsonrpc": "2.0", "id": ident, "method": "agentd/session/new", "params": {"cwd": str(workspace)}}
    )
    sid = (await pipe.reply(ident))["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "Say hi."}]}
    await pipe.send({"jsonrpc": "2.0", "id": ident + 1, "method": "agentd/session/prompt", "params": prompt})
    assert (await pipe.reply(ident + 1, 30))["result"] == {"stopReason": "end_turn"}
    return str(sid)


async def test_stdout_carries_only_frames(tmp_path: Path, workspace: Path, data_dir: Path) -> None:
    log_file = tmp_path / "agentd.log"
    pipe = await _started(tmp_path, workspace, data_dir, "-v", "--log-file", str(log_file))
    try:
        await _turn(pipe, workspace, 2)
        await pipe.send({"jsonrpc": "2.0", "id": 9, "method": "shutdown"})
        assert (await pipe.reply(9)) == {"jsonrpc": "2.0", "id": 9, "result": None}
        await pipe.send({"jsonrpc": "2.0", "method": "exit"})
        code, err = await pipe.finish()
    finally:
        pipe.kill()
    frames, rest = parse_frames(pipe.stdout)
    assert (code, rest) == (0, b"")
    assert all(f.get("jsonrpc") == "2.0" for f in frames)
    assert (
        b"[turn \xc2\xb7 in=" in err
    )  # the accounting line goes to stderr (and as logMessage), never stdout
    outputs = [f["params"]["update"] for f in frames if f.get("method") == "agentd/session/update"]
    assert any("hello-from-command" in json.dumps(u) for u in outputs)


def _malformed() -> list[tuple[bytes, Any]]:
    """200 bad frames and what each must get: `(id, code)`, or None for no answer."""
    kinds: list[tuple[bytes, Any]] = []
    i = 1000
    bodies_null: list[tuple[bytes, int]] = [
        (b"{bad}", -32700), (b'{"jsonrpc":"2.0",', -32700), (b"\xff\xfe\x00", -32700), (b"", -32700),
        (b"[]", -32600), (b"42", -32600), (b'"text"', -32600), (b"null", -32600),
        (b'[{"jsonrpc":"2.0","id":1,"method":"agentd/session/list"}]', -32600),
        (b'{"jsonrpc":"2.0"}', -32600), (b'{"jsonrpc":"2.0","id":{"a":1},"method":"agentd/session/list"}', -32600),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"agentd/session/list"}', -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"agentd/session/list"}', -32600),
        (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"agentd/session/list"}', -32700),
    ]  # fmt: skip
    while len(kinds) < 200:
        for body, code in bodies_null:
            kinds.append((frame(body), (None, code)))
        i += 1
        kinds.append((frame({"id": i, "method": "agentd/session/list"}), (i, -32600)))  # no jsonrpc
        i += 1
        kinds.append((frame({"jsonrpc": "1.0", "id": i, "method": "agentd/session/list"}), (i, -32600)))
        i += 1
        kinds.append((frame({"jsonrpc": "2.0", "id": i}), (i, -32600)))  # neither method nor result
        i += 1
        kinds.append((frame({"jsonrpc": "2.0", "id": i, "method": 5}), (i, -32600)))
        i += 1
        kinds.append((frame({"jsonrpc": "2.0", "id": i, "method": "foo/bar"}), (i, -32601)))
        i += 1
        kinds.append(
            (frame({"jsonrpc": "2.0", "id": i, "method": "agentd/session/nope", "params": {}}), (i, -32601))
        )
        kinds.append((frame({"jsonrpc": "2.0", "method": "foo/notify", "params": {"x": 1}}), None))
        kinds.append((frame({"jsonrpc": "2.0", "method": "$/somethingElse"}), None))
        i += 1
        kinds.append((frame({"jsonrpc": "2.0", "id": i, "method": "agentd/session/new", "params": {"cwd": 5}}),
                      (i, -32602)))  # fmt: skip
        i += 1
        kinds.append((frame({"jsonrpc": "2.0", "id": i, "method": "agentd/session/prompt",
                             "params": {"sessionId": 1, "prompt": "hi"}}), (i, -32602)))  # fmt: skip
        i += 1
        kinds.append((frame({"jsonrpc": "2.0", "id": i, "method": "agentd/session/status", "params": None}),
                      (i, -32602)))  # fmt: skip
        i += 1
        kinds.append((frame({"jsonrpc": "2.0", "id": i, "method": "agentd/session/list", "params": {"cwd": []}}),
                      (i, -32602)))  # fmt: skip
        kinds.append(
            (frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": "not an object"}), None)
        )
        kinds.append((frame({"jsonrpc": "2.0", "method": "agentd/session/cancel", "params": [1, 2]}), None))
        huge = 10**30 + len(kinds)
        kinds.append((frame({"jsonrpc": "2.0", "id": huge, "method": "foo/bar"}), (huge, -32601)))
        long_id = "x" * 10000 + str(len(kinds))
        kinds.append((frame({"jsonrpc": "2.0", "id": long_id, "method": "foo/bar"}), (long_id, -32601)))
        kinds.append((frame(b"[" * 100000 + b"]" * 100000), None))
        i += 1
        kinds.append((b"content-length: 2\r\nX-Extra: yes\r\n\r\n{}", (None, -32600)))
        i += 1
        body = json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "initialize", "params": {"capabilities": {}}}
        ).encode()
        kinds.append((b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(body)
                      + body, (i, -32600)))  # initialize again  # fmt: skip
    return kinds[:200]


async def test_200_malformed_frames_then_a_normal_session(
    tmp_path: Path, workspace: Path, data_dir: Path
) -> None:
    pipe = await _started(tmp_path, workspace, data_dir)
    try:
        cases = _malformed()
        assert len(cases) == 200
        await pipe.write(b"".join(raw for raw, _ in cases))
        await pipe.send({"jsonrpc": "2.0", "id": "marker", "method": "agentd/session/list", "params": {}})
        await pipe.reply("marker", 30)
        sid = await _turn(pipe, workspace, 2)  # the daemon keeps serving a normal session
        await pipe.send({"jsonrpc": "2.0", "id": 9, "method": "shutdown"})
        await pipe.reply(9)
        await pipe.send({"jsonrpc": "2.0", "method": "exit"})
        code, err = await pipe.finish()
    finally:
        pipe.kill()
    frames, rest = parse_frames(pipe.stdout)
    assert (code, rest) == (0, b"")
    errors = [f for f in frames if "error" in f]
    got = sorted((json.dumps(f["id"]), f["error"]["code"]) for f in errors)
    want = sorted((json.dumps(e[0]), e[1]) for _, e in cases if e is not None)
    assert got == want
    assert all(f["error"]["data"]["name"] and f["error"]["message"] for f in errors)
    assert b"Traceback" not in err
    assert sid.startswith("sess_")


async def test_framing_errors_end_the_process_cleanly(
    tmp_path: Path, workspace: Path, data_dir: Path
) -> None:
    cases = [
        b"Content-Type: application/vscode-jsonrpc\r\n\r\n{}",  # no Content-Length
        b"Content-Length: 1000000000000\r\n\r\n{",  # above the 64 MiB cap: never read, never allocated
        b'Content-Length: 500\r\n\r\n{"jsonrpc":"2.0"',  # shorter than announced, then end of input
    ]
    for raw in cases:
        pipe = await RawPipe.start(daemon_env(data_dir))
        try:
            await pipe.write(raw)
            code, err = await pipe.finish(timeout=60)
        finally:
            pipe.kill()
        assert (code in (0, 1), pipe.stdout, b"Traceback" in err) == (True, b"", False)


async def test_lifecycle_errors_and_exit_codes(tmp_path: Path, workspace: Path, data_dir: Path) -> None:
    pipe = await RawPipe.start(daemon_env(data_dir))
    try:
        await pipe.send({"jsonrpc": "2.0", "id": 1, "method": "agentd/session/list", "params": {}})
        assert await pipe.reply(1) == {"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32002, "message": "Send initialize first.", "data": {"name": "ServerNotInitialized"}}}  # fmt: skip
        await pipe.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "initialize",
                "params": init_params(workspace, _options(tmp_path)),
            }
        )
        await pipe.reply(2)
        await pipe.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        await pipe.send({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
        await pipe.send({"jsonrpc": "2.0", "id": 4, "method": "agentd/session/list", "params": {}})
        assert await pipe.reply(4) == {"jsonrpc": "2.0", "id": 4, "error": {
            "code": -32600, "message": "The server is shutting down; start a new agentd process.",
            "data": {"name": "InvalidRequest"}}}  # fmt: skip
        await pipe.send({"jsonrpc": "2.0", "method": "exit"})
        code, _ = await pipe.finish()
    finally:
        pipe.kill()
    assert code == 0

    pipe = await _started(tmp_path, workspace, data_dir)  # exit without shutdown: 1
    try:
        await pipe.send({"jsonrpc": "2.0", "method": "exit"})
        code, _ = await pipe.finish()
    finally:
        pipe.kill()
    assert code == 1

    pipe = await _started(tmp_path, workspace, data_dir)  # end of input = shutdown + exit, locks released
    try:
        sid = await _turn(pipe, workspace, 2)
        code, _ = await pipe.finish(timeout=60)
    finally:
        pipe.kill()
    assert (code, (data_dir / "sessions" / sid / "lock").read_bytes()) == (0, b"")
