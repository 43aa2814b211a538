"""H19 over LSP: odd client input gets a clear `-32602` (never `-32603`, never silence) and the daemon
goes on serving. A NUL in a path param, lone surrogates anywhere in a request's params, and a request
nested too deeply to decode or handle, whose id is still answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.lsp.harness import RawPipe, daemon_env, frame, init_params, write_scenario

SCENARIO = {"answers": [{"reply": [{"text": "Still here."}]}]}


async def _started(tmp_path: Path, workspace: Path, data_dir: Path) -> RawPipe:
    pipe = await RawPipe.start(daemon_env(data_dir))
    options = {"provider": "scripted", "scenario": str(write_scenario(tmp_path / "s.json", SCENARIO))}
    await pipe.send(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params(workspace, options)}
    )
    await pipe.reply(1)
    await pipe.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    return pipe


def _deep(ident: int, method: str, params_head: str, depth: int, opener: str = "[") -> bytes:
    closer = "]" if opener == "[" else "}"
    inner = (opener if opener == "[" else '{"a":') * depth + ("" if opener == "[" else "1") + closer * depth
    head = f'{{"jsonrpc":"2.0","id":{ident},"method":"{method}","params":{{{params_head}"x":'
    return frame((head + inner + "}}").encode())


async def test_odd_params_get_minus_32602_and_the_daemon_goes_on(
    tmp_path: Path, workspace: Path, data_dir: Path
) -> None:
    """H19: NUL in `cwd` / `additionalDirectories` / list's `cwd`; lone surrogates in a prompt, a cwd and a
    session id; requests nested 1,000 and 100,000 levels deep (id answered). Each is -32602 with
    `data.errors` naming the field; a notification with a lone surrogate or nested too deeply is not
    answered; then a normal turn still works, and no traceback reached stderr."""
    pipe = await _started(tmp_path, workspace, data_dir)
    ws = str(workspace)
    try:
        await pipe.send({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/new", "params": {"cwd": ws}})
        sid = (await pipe.reply(2))["result"]["sessionId"]
        requests: list[tuple[str, dict[str, Any], str]] = [
            ("agentd/session/new", {"cwd": ws + "\x00/x"}, "cwd"),
            ("agentd/session/new", {"cwd": ws, "additionalDirectories": ["/tmp\x00"]}, "additionalDirectories.0"),
            ("agentd/session/list", {"cwd": "/tmp\x00"}, "cwd"),
            ("agentd/session/load", {"sessionId": sid, "cwd": ws + "\x00"}, "cwd"),
            ("agentd/session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi \udcff"}]},
             "prompt.0.text"),
            ("agentd/session/new", {"cwd": ws + "\ud800"}, "cwd"),
            ("agentd/session/status", {"sessionId": sid[:-1] + "\udfff"}, "sessionId"),
        ]  # fmt: skip
        for n, (method, params, loc) in enumerate(requests, start=10):
            await pipe.send({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
            error = (await pipe.reply(n))["error"]
            assert (error["code"], error["data"]["name"]) == (-32602, "InvalidParams"), (method, error)
            assert error["data"]["errors"][0]["loc"] == loc
        await pipe.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": (workspace / "a.txt").as_uri(), "languageId": "text", "version": 1, "text": "x\udcff"}}})  # fmt: skip
        for n, depth in ((30, 1000), (31, 100_000)):
            await pipe.write(_deep(n, "agentd/session/status", f'"sessionId":"{sid}",', depth))
            error = (await pipe.reply(n))["error"]
            assert (error["code"], error["data"]["errors"]) == (
                -32602,
                [{"loc": "params", "msg": "nested too deeply"}],
            )
        await pipe.write(_deep(32, "agentd/session/status", "", 990, opener="{"))
        assert (await pipe.reply(32))["error"]["code"] == -32602
        notification = frame(
            b'{"jsonrpc":"2.0","method":"agentd/session/cancel","params":'
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}"
        )
        await pipe.write(notification)
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "are you there?"}]}
        await pipe.send({"jsonrpc": "2.0", "id": 40, "method": "agentd/session/prompt", "params": prompt})
        assert (await pipe.reply(40, 30))["result"] == {"stopReason": "end_turn"}
        await pipe.send({"jsonrpc": "2.0", "id": 41, "method": "shutdown"})
        await pipe.reply(41)
        await pipe.send({"jsonrpc": "2.0", "method": "exit"})
        code, err = await pipe.finish()
    finally:
        pipe.kill()
    assert code == 0
    assert b"Traceback" not in err and b"internal error" not in err
    answered = {f["id"] for f in pipe.frames if "id" in f and "method" not in f}
    assert answered == {1, 2, *range(10, 10 + len(requests)), 30, 31, 32, 40, 41}
    assert not any(f.get("error", {}).get("code") == -32603 for f in pipe.frames)
    json.dumps(pipe.frames).encode("utf-8")
