"""The LSP lifecycle and the command line of the server modes (PROTOCOL.md §3.1, §3.2, §4.2-§4.4):
the `initialize` result, option warnings, `--resume` (exit 3, 4, 5 before stdin is read; the announced
session), `--acp` with an LSP-only flag, and a Unix socket serving two connections over one core."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import sys
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import (
    RawPipe,
    daemon_env,
    frame,
    init_params,
    parse_frames,
    scrub,
    wait_until,
    write_scenario,
)

METHODS = ["agentd/session/new", "agentd/session/load", "agentd/session/list", "agentd/session/prompt",
           "agentd/session/cancel", "agentd/session/close", "agentd/session/setMode", "agentd/session/todos",
           "agentd/session/status", "agentd/session/compact", "agentd/session/checkpoints",
           "agentd/session/rewind", "agentd/session/fork", "agentd/session/history"]  # fmt: skip


def capabilities(
    provider: str = "anthropic", model: str = "claude-sonnet-4-6", **extra: Any
) -> dict[str, Any]:
    return {
        "textDocumentSync": {"openClose": True, "change": 2, "save": {"includeText": False}},
        "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}},
        "experimental": {"agentd": {
            "protocolVersion": 1, "loadSession": True,
            "sessionCapabilities": {"list": {}, "close": {}, "additionalDirectories": {}},
            "promptCapabilities": {"image": provider != "scripted", "audio": False, "embeddedContext": True},
            "modes": True, "methods": METHODS, "provider": provider, "model": model, **extra}},
    }  # fmt: skip


async def test_initialize_result_and_option_warnings(
    client_name: str, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    d = await daemons(client_name, daemon_env(data_dir), [workspace],
                      init_options={"maxTurnRequests": -1, "modle": "x"})  # fmt: skip
    assert d.init is not None and d.init.server_info is not None
    assert (d.init.server_info.name, d.init.server_info.version) == ("agentd", "0.1.0")
    assert d.init.capabilities.experimental == capabilities()["experimental"]
    text = ("agentd: initializationOptions.maxTurnRequests: Input should be greater than 0 (got -1); using 50. "
            "Unknown option 'modle' ignored (did you mean 'model'?). Fix these in your editor's agentd settings.")  # fmt: skip
    # showMessage and logMessage are two frames: the second may still be unread when the first is seen
    await wait_until(lambda: len(d.client.messages) == 1 and d.client.log_messages, "the option warning")
    assert [(m.type, m.message) for m in d.client.messages] == [(2, text)]
    assert (2, text) in [(m.type, m.message) for m in d.client.log_messages]


async def test_image_prompts_are_offered_only_for_a_model_that_takes_them(
    client_name: str, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    """An OpenAI-compatible model the table does not know (a local server's) is text only unless `images = true`
    says otherwise; `promptCapabilities.image` follows (providers/models.py owns the rule)."""
    local = {"provider": "openai", "model": "qwen2.5-coder:7b", "baseUrl": "http://127.0.0.1:9/v1"}
    for options, image in [(local, False), ({**local, "images": True}, True)]:
        d = await daemons(client_name, daemon_env(data_dir), [workspace], init_options=options)
        assert d.init is not None
        assert d.init.capabilities.experimental["agentd"]["promptCapabilities"]["image"] is image


async def test_initialize_over_raw_pipes_is_exactly_the_documented_result(
    tmp_path: Path, workspace: Path, data_dir: Path
) -> None:
    options = {"provider": "scripted", "scenario": str(write_scenario(tmp_path / "s.json", {"answers": []}))}
    pipe = await RawPipe.start(daemon_env(data_dir), "--stdio")
    try:
        await pipe.send(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params(workspace, options)}
        )
        reply = await pipe.reply(1)
        await pipe.send({"jsonrpc": "2.0", "method": "exit"})
        code, _ = await pipe.finish()
    finally:
        pipe.kill()
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"capabilities": capabilities("scripted", "scripted"),
                                                             "serverInfo": {"name": "agentd", "version": "0.1.0"}}}  # fmt: skip
    assert code == 1  # exit without shutdown


async def _run(env: dict[str, str], *args: str) -> tuple[int, str, bytes]:
    """agentd with stdin left open: the exit must come before anything is read."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)  # fmt: skip
    try:
        code = await asyncio.wait_for(proc.wait(), 15)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.stdout is not None and proc.stderr is not None
    return code, (await proc.stderr.read()).decode(), await proc.stdout.read()


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()
    }


async def test_resume_exit_codes_and_the_announced_session(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    env = daemon_env(data_dir, emulator.url)
    code, err, out = await _run(env, "--resume", "sess_nope")
    assert (code, out) == (3, b"")
    assert err == (f"agentd: Session sess_nope is not in the data dir ({data_dir}); run agentd sessions list to see "
                   "sessions, or start a new session.\n")  # fmt: skip
    assert (await _run(env, "--resume"))[0] == 2
    code, err, _ = await _run(env, "--acp", "--exit-when-idle", "5")
    assert (code, err.splitlines()[-1]) == (
        2,
        "agentd: --exit-when-idle needs --socket PATH or --tcp PORT, not --acp",
    )

    holder = await daemons(client_name, env, [workspace])
    sid = await holder.new(workspace)
    files = _digest(data_dir / "sessions" / sid)
    code, err, out = await _run(env, "--resume", sid)
    pid = holder.client._server.pid  # type: ignore[union-attr]
    assert (code, out, _digest(data_dir / "sessions" / sid)) == (4, b"", files)
    assert f"Session {sid} is open in agentd pid {pid}" in err and f"agentd sessions show {sid}" in err
    assert await holder.request("agentd/session/close", {"sessionId": sid}) == {}

    d = await daemons(client_name, env, [workspace], args=("--resume", sid))
    assert d.init is not None
    assert d.init.capabilities.experimental["agentd"]["resume"] == {
        "sessionId": sid,
        "cwd": str(workspace.resolve()),
    }
    loaded = await d.request("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)})
    assert loaded["modes"]["currentModeId"] == "default"
    assert scrub(d.rec.of(sid)) == [
        {"sessionUpdate": "session_info_update", "title": None, "updatedAt": "<ts>"},
        {
            "sessionUpdate": "usage_update",
            "used": "<n>",
            "size": 200000,
            "cost": {"amount": "<n>", "currency": "USD"},
        },
    ]

    log = data_dir / "sessions" / sid / "log.jsonl"
    await d.stop()
    log.write_bytes(b"garbage\n" + log.read_bytes())
    code, err, out = await _run(env, "--resume", sid)
    assert (code, out) == (5, b"")


async def test_a_unix_socket_serves_two_connections_over_one_core(
    tmp_path: Path, workspace: Path, data_dir: Path
) -> None:
    sock = str(tmp_path / "agentd.sock")
    options = {"provider": "scripted", "scenario": str(write_scenario(tmp_path / "s.json", {"answers": []}))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--socket", sock, "--exit-when-idle", "30", env=daemon_env(data_dir),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    try:
        await wait_until(lambda: os.path.exists(sock), "the socket to exist")
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        one, two = [await asyncio.open_unix_connection(sock) for _ in range(2)]
        replies = []
        for _reader, writer in (one, two):
            writer.write(
                frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": init_params(workspace, options),
                    }
                )
            )
            writer.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        new = {"jsonrpc": "2.0", "id": 2, "method": "agentd/session/new", "params": {"cwd": str(workspace)}}
        one[1].write(frame(new))
        sid = (await _reply(one[0], 2))["result"]["sessionId"]
        two[1].write(frame({"jsonrpc": "2.0", "id": 3, "method": "agentd/session/load",
                            "params": {"sessionId": sid, "cwd": str(workspace)}}))  # fmt: skip
        replies.append(await _reply(two[0], 3))
        for _, writer in (one, two):
            writer.write(
                frame({"jsonrpc": "2.0", "id": 9, "method": "shutdown"})
                + frame({"jsonrpc": "2.0", "method": "exit"})
            )
            writer.close()
        proc.send_signal(15)
        code = await asyncio.wait_for(proc.wait(), 15)
    finally:
        if proc.returncode is None:
            proc.kill()
    error = replies[0]["error"]
    assert (error["code"], error["data"]["name"], error["data"]["sameProcess"]) == (
        -32012,
        "SessionLocked",
        True,
    )
    assert error["message"] == (f"Another editor window connected to this agentd holds {sid}; close the session "
                                "there, or start a new one.")  # fmt: skip
    assert (code, os.path.exists(sock)) == (0, False)


async def _reply(reader: asyncio.StreamReader, msg_id: int) -> dict[str, Any]:
    data = b""
    while True:
        chunk = await asyncio.wait_for(reader.read(65536), 15)
        assert chunk, "the socket closed"
        data += chunk
        frames, _ = parse_frames(data)
        for f in frames:
            if f.get("id") == msg_id and "method" not in f:
                return f


async def test_tcp_needs_the_token_from_the_token_file(
    tmp_path: Path, workspace: Path, data_dir: Path
) -> None:
    import socket as sockets

    with sockets.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = {"provider": "scripted", "scenario": str(write_scenario(tmp_path / "s.json", {"answers": []}))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--tcp", str(port), env=daemon_env(data_dir), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    token_file = data_dir / f"tcp-{port}.token"
    try:
        await wait_until(lambda: token_file.exists() and token_file.stat().st_size > 0, "the token file")
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text()
        await wait_until(lambda: _accepts(port), "the TCP listener")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(  # requests sent in the same write as a refused initialize must not be handled
            frame(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params(workspace, options)}
            )
            + frame({"jsonrpc": "2.0", "id": 2, "method": "agentd/session/list", "params": {}})
            + frame(
                {"jsonrpc": "2.0", "id": 3, "method": "agentd/session/new", "params": {"cwd": str(workspace)}}
            )
        )
        refused = await _reply(reader, 1)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # then the connection is closed, nothing else
        assert not (data_dir / "sessions").exists() or list((data_dir / "sessions").iterdir()) == []
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        params = init_params(workspace, {**options, "authToken": token})
        writer.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
        accepted = await _reply(reader, 1)
        writer.close()
        proc.send_signal(15)
        code = await asyncio.wait_for(proc.wait(), 15)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert (refused["error"]["code"], refused["error"]["data"]["name"]) == (-32600, "InvalidRequest")
    assert "capabilities" in accepted["result"]
    assert (code, token_file.exists()) == (0, False)


def _accepts(port: int) -> bool:
    import socket as sockets

    with sockets.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
