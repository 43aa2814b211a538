"""The ACP adapter's session methods and what an editor sees (PROTOCOL.md §4.5, §6, §11; docs/acp.md):
modes, resume, close, the `_agentd/session/*` extensions (checkpoints, rewind and fork included), slash
commands, the prompt's content blocks, the command-prefix option, a cancelled approval, H20 escaping, client
write errors, MCP servers given by the client, an untrusted workspace, missing credentials, a session another
process holds, unknown sessions, and the same sessions as the command line and the LSP adapter."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, resource_link_block, text_block
from acp.schema import EmbeddedResourceContentBlock, McpServerStdio, SseMcpServer, TextResourceContents

from agentd.testing.emulator import Emulator
from tests.acp.harness import ROOT, agent_env, start
from tests.lsp.harness import daemon_env

REPLY = {"reply": [{"text": "ok"}], "stop_reason": "end_turn"}


def _call(name: str, **inp: Any) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": name, "input": inp}}], "stop_reason": "tool_use"}


async def _error(coro: Any) -> RequestError:
    with pytest.raises(RequestError) as info:
        await asyncio.wait_for(coro, 20)
    return info.value


async def test_modes_resume_close_extensions_and_slash_commands(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    emulator.script({"answers": [_call("write_file", path="a.md", content="A\n"), REPLY, REPLY, REPLY]})
    a = await start(agent_env(data_dir, emulator.url), tmp_path / "agent.err")
    new = await a.call(a.conn.new_session(cwd=str(workspace), mcp_servers=[]))
    sid = new.session_id
    assert [m.id for m in new.modes.available_modes] == ["default", "acceptEdits", "readOnly", "auto"]
    await a.call(a.conn.set_session_mode(session_id=sid, mode_id="acceptEdits"))
    assert a.editor.of(sid, "current_mode_update") == [
        {"sessionUpdate": "current_mode_update", "currentModeId": "acceptEdits"}
    ]
    assert await a.prompt(sid, "Write a.md") == "end_turn"
    assert (
        a.editor.permissions == [] and (workspace / "a.md").read_text() == "A\n"
    )  # acceptEdits: no question
    bad = await _error(a.conn.set_session_mode(session_id=sid, mode_id="yolo"))
    assert (bad.code, bad.data["name"]) == (-32602, "InvalidParams")
    assert [o.current_value for o in new.config_options] == ["default"]  # the mode as a config option too
    opts = await a.call(a.conn.set_config_option(config_id="mode", session_id=sid, value="readOnly"))
    assert [o.current_value for o in opts.config_options] == ["readOnly"]
    assert a.editor.of(sid, "config_option_update")[-1]["configOptions"][0]["currentValue"] == "readOnly"
    await a.call(a.conn.set_config_option(config_id="mode", session_id=sid, value="acceptEdits"))
    nope = await _error(a.conn.set_config_option(config_id="model", session_id=sid, value="x"))
    assert (nope.code, nope.data["name"]) == (-32602, "InvalidParams")

    status = await a.call(a.conn.ext_method("agentd/session/status", {"sessionId": sid}))
    assert (status["sessionId"], status["mode"], status["totals"]["requests"]) == (sid, "acceptEdits", 2)
    todos = await a.call(a.conn.ext_method("agentd/session/todos", {"sessionId": sid}))
    assert todos == {"todos": [], "snapshot": '{"todos":[]}'}
    compact = await a.call(a.conn.ext_method("agentd/session/compact", {"sessionId": sid}))
    assert compact == {"compacted": False, "reason": "too_short"}
    unknown = await _error(a.conn.ext_method("agentd/session/nope", {"sessionId": sid}))
    assert (unknown.code, unknown.data["name"]) == (-32601, "MethodNotFound")

    before = len(emulator.journal)
    assert await a.prompt(sid, "/status") == "end_turn"
    assert await a.prompt(sid, "/compact") == "end_turn"
    assert len(emulator.journal) == before  # slash commands make no model request
    said = [u["content"]["text"] for u in a.editor.of(sid, "agent_message_chunk")][-2:]
    assert said[0].startswith(
        "Model: claude-sonnet-4-6 (anthropic), mode acceptEdits, 1 turn."
    )  # new-user nit: not "1 turns"
    assert said[1] == "Nothing to compress yet: the history is too short."
    assert await a.prompt(sid, "/nope is not a command") == "end_turn"  # goes to the model
    assert emulator.journal[-1]["body"]["messages"][-1]["content"][0]["text"] == "/nope is not a command"

    assert await a.call(a.conn.close_session(session_id=sid)) is not None
    gone = await _error(a.conn.prompt(session_id=sid, prompt=[text_block("hello?")]))
    assert (gone.code, gone.data["name"]) == (-32011, "SessionNotLoaded")
    before_updates = len(a.editor.updates)
    resumed = await a.call(a.conn.resume_session(session_id=sid, cwd=str(workspace)))
    assert resumed.modes.current_mode_id == "acceptEdits"
    await a.editor.expect(lambda e: len(e.updates) > before_updates, "the slash commands after resume")
    assert [p["update"]["sessionUpdate"] for p in a.editor.updates[before_updates:]] == [
        "available_commands_update"
    ]
    assert await a.prompt(sid, "Still there?") == "end_turn"
    assert await a.close() == 0


async def test_prompt_blocks_prefix_option_cancelled_approval_and_escaped_texts(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """PROTOCOL.md §6.4 (resource links, embedded resources), §6.10 (the command-prefix option maps to an ACP
    `allow_always` option; a `cancelled` outcome cancels the turn), H20 (approval texts escaped)."""
    emulator.script({"answers": [
        REPLY,
        _call("run_command", command="npm test"),
        _call("run_command", command="npm test -- --watch=false"),
        REPLY,
        _call("run_command", command="echo \u202eevil"),
    ]})  # fmt: skip
    a = await start(agent_env(data_dir, emulator.url), tmp_path / "agent.err")
    sid = await a.new(workspace)
    prompt = [
        text_block("Look at these."),
        resource_link_block(name="b.py", uri=(workspace / "b.py").as_uri()),
        EmbeddedResourceContentBlock(type="resource", resource=TextResourceContents(
            uri=(workspace / "c.py").as_uri(), text="print('c')\n", mime_type="text/x-python")),
    ]  # fmt: skip
    assert (await a.call(a.conn.prompt(session_id=sid, prompt=prompt))).stop_reason == "end_turn"
    texts = [b["text"] for b in emulator.journal[0]["body"]["messages"][0]["content"]]
    assert (
        texts[1] == f"[Linked file: b.py ({(workspace / 'b.py').as_uri()}); read it with read_file if needed]"
    )
    assert texts[2] == f"{(workspace / 'c.py').as_uri()}\n```\nprint('c')\n\n```"

    a.editor.answers = ["allow_always_prefix"]
    assert await a.prompt(sid, "Run the tests twice") == "end_turn"
    asked = a.editor.permissions[0]
    always = [o for o in asked["options"] if o["kind"] == "allow_always"]
    assert always == [
        {
            "optionId": "allow_always_prefix",
            "name": "Always allow `npm test` commands in this session",
            "kind": "allow_always",
            "_meta": {"agentd": {"rule": "run_command(npm test)", "prefix": "npm test"}},
        }
    ]
    assert len(a.editor.permissions) == 1  # the second `npm test ...` was allowed by the new rule

    a.editor.answers = ["cancelled"]
    assert await a.prompt(sid, "Say evil") == "cancelled"
    evil = a.editor.permissions[-1]
    assert evil["toolCall"]["title"] == "Run `echo \\u202eevil`"
    assert "\u202e" not in json.dumps(evil["toolCall"]["content"], ensure_ascii=False)
    assert evil["toolCall"]["rawInput"]["command"] == "echo \u202eevil"  # exact, for the client to escape
    last = a.editor.of(sid, "tool_call_update")[-1]
    assert (last["status"], last["_meta"]["agentd"]["cancelled"]) == ("failed", True)
    assert await a.close() == 0


async def test_client_write_errors_and_mcp_servers_from_the_client(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """fs/write_text_file answered with an error fails the call with the client's reason (nothing written
    behind the editor's back); `mcpServers` of session/new and of session/load are started and their tools used; an SSE server,
    which agentd cannot run, is a warning the user sees."""
    emulator.script({"answers": [
        _call("write_file", path="locked.md", content="no\n"),
        {**REPLY, "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True}},
        _call("mcp__demo__echo", text="hello from mcp"),
        {**REPLY, "expect": {"tool_result_for": "toolu_emu_3_1", "is_error": False, "content": "hello from mcp"}},
        _call("mcp__demo__echo", text="again after load"),
        {**REPLY, "expect": {"tool_result_for": "toolu_emu_5_1", "is_error": False, "content": "again after load"}},
    ]})  # fmt: skip
    a = await start(agent_env(data_dir, emulator.url), tmp_path / "agent.err")

    a.editor.write_error = RequestError(
        -32603, "the buffer is read-only", {"details": "E21: Cannot make changes"}
    )
    a.editor.answers = ["allow_once", "allow_once"]
    demo = McpServerStdio(name="demo", command=sys.executable, args=["-m", "tests.mcp_servers.demo"],
                          env=[{"name": "PYTHONPATH", "value": str(ROOT)}])  # fmt: skip
    sse = SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[])
    new = await a.call(a.conn.new_session(cwd=str(workspace), mcp_servers=[demo, sse]), 60)
    sid = new.session_id
    assert new.field_meta["agentd"]["warnings"][0].startswith("MCP server 'old' (sse) was not started")
    await a.editor.expect(lambda e: len(e.of(sid, "agent_message_chunk")) == 1, "the warning")
    assert a.editor.of(sid, "agent_message_chunk")[0]["content"]["text"].startswith(
        "agentd: MCP server 'old' (sse)"
    )
    assert await a.prompt(sid, "Write locked.md") == "end_turn"
    failed = next(u for u in a.editor.of(sid, "tool_call_update") if u.get("status") == "failed")
    assert "E21: Cannot make changes" in failed["content"][0]["content"]["text"]
    assert not (workspace / "locked.md").exists()
    assert await a.prompt(sid, "Echo through MCP") == "end_turn"
    assert "mcp__demo__echo" in [t["name"] for t in emulator.journal[-1]["body"]["tools"]]
    assert await a.close() == 0

    b = await start(
        agent_env(data_dir, emulator.url), tmp_path / "agent2.err"
    )  # session/load starts them too
    b.editor.answers = ["allow_once"]
    await b.call(b.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[demo]), 60)
    assert await b.prompt(sid, "Echo again") == "end_turn"
    assert "mcp__demo__echo" in [t["name"] for t in emulator.journal[-1]["body"]["tools"]]
    assert await b.close() == 0


async def test_credentials_locks_and_unknown_sessions(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """No key: session/new answers -32000 (ACP's authentication required) and `authenticate` says so again; a
    session another live agentd holds: -32012 with its pid; an unknown session: -32002; a load with another
    cwd: -32602."""
    env = agent_env(data_dir, emulator.url)
    a = await start(env, tmp_path / "a.err")
    sid = await a.new(workspace)
    nokey = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    b = await start(nokey, tmp_path / "b.err")
    assert b.init.auth_methods[0].id == "agentd-env"
    auth = await _error(b.conn.new_session(cwd=str(workspace), mcp_servers=[]))
    assert (auth.code, auth.data["name"], auth.data["reason"]) == (
        -32000,
        "ProviderError",
        "missing_credentials",
    )
    assert "set ANTHROPIC_API_KEY in the environment your editor starts `agentd --acp` with" in str(auth)
    assert "--provider" not in str(auth)  # a flag of agentd run, not of an editor's agent server
    again = await _error(b.conn.authenticate(method_id="agentd-env"))
    assert again.code == -32000 and str(again) == str(auth)
    await b.close()

    c = await start(env, tmp_path / "c.err")
    locked = await _error(c.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))
    assert (locked.code, locked.data["name"], locked.data["pid"]) == (-32012, "SessionLocked", a.proc.pid)
    missing = await _error(c.conn.load_session(cwd=str(workspace), session_id="sess_nope", mcp_servers=[]))
    assert (missing.code, missing.data["name"]) == (-32002, "SessionNotFound")
    assert await a.close() == 0
    other = tmp_path / "other"
    other.mkdir()
    wrong = await _error(c.conn.load_session(cwd=str(other), session_id=sid, mcp_servers=[]))
    assert (wrong.code, wrong.data["name"]) == (-32602, "InvalidParams")
    assert str(workspace.resolve()) in str(wrong)
    relative = await _error(c.conn.new_session(cwd="ws", mcp_servers=[]))
    assert relative.code == -32602 and "absolute" in str(relative)
    await c.call(c.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))  # free now
    assert await c.close() == 0


async def test_an_unanswered_approval_times_out_and_is_withdrawn(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """PROTOCOL.md §6.10: no answer within `permissions.approval_timeout_s` denies the call (decidedBy
    `timeout`) and withdraws the question with `$/cancel_request`; the late answer is ignored. §12.2:
    `$/cancel_request` naming a pending prompt is a turn cancel (the prompt answers `cancelled`)."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text("[permissions]\napproval_timeout_s = 1\n")
    emulator.script({"answers": [
        _call("write_file", path="late.md", content="late\n"),
        {**REPLY, "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True}},
        {"reply": [{"text": "Thinking for a long time."}], "stop_reason": "end_turn", "hold_after_events": 3,
         "gate": "slow"},
    ]})  # fmt: skip
    a = await start(agent_env(data_dir, emulator.url, AGENTD_CONFIG_DIR=str(config)), tmp_path / "agent.err")
    a.editor.hold = asyncio.Event()
    a.editor.answers = ["allow_once"]
    sid = await a.new(workspace)
    assert await a.prompt(sid, "Write late.md") == "end_turn"
    asked = a.editor.permissions[0]
    assert asked["_meta"]["agentd"]["timeoutS"] == 1
    withdrawn = [m for m in a.editor.others if m["method"] == "$/cancel_request"]
    assert len(withdrawn) == 1 and isinstance(withdrawn[0]["params"]["requestId"], int)
    final = a.editor.of(sid, "tool_call_update")[-1]
    assert (final["status"], final["_meta"]["agentd"]["decidedBy"]) == ("failed", "timeout")
    a.editor.hold.set()  # the late answer is ignored
    assert not (workspace / "late.md").exists()

    request_id = a.conn._conn._next_request_id
    slow = asyncio.ensure_future(a.prompt(sid, "Think slowly."))
    assert await emulator.wait_reached_async("slow", 15)
    await a.conn._conn.send_notification("$/cancel_request", {"requestId": request_id})
    assert await asyncio.wait_for(slow, 5) == "cancelled"
    assert await a.close() == 0


async def test_resume_flag_checks_locks_and_announces_the_session(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """PROTOCOL.md §3.1, §4.5: `agentd --acp --resume ID` exits 3 for an unknown session and 4 for one another
    live process holds, before reading stdin; otherwise it announces the session in `_meta.agentd.resume`,
    and a `session/load` of it works."""
    env = agent_env(data_dir, emulator.url)

    async def run(*args: str) -> tuple[int, bytes, bytes]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentd", "--acp", *args, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=str(ROOT),
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 20)
        return proc.returncode or 0, out, err

    code, out, err = await run("--resume", "sess_nope")
    assert (code, out) == (3, b"") and b"agentd sessions list" in err
    a = await start(env, tmp_path / "a.err")
    sid = await a.new(workspace)
    code, out, err = await run("--resume", sid)
    assert (code, out) == (4, b"") and f"pid {a.proc.pid}".encode() in err
    assert await a.close() == 0
    b = await start(env, tmp_path / "b.err", args=("--resume", sid))
    assert b.init.field_meta["agentd"]["resume"] == {"sessionId": sid, "cwd": str(workspace.resolve())}
    await b.call(b.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))
    assert await b.close() == 0


async def test_an_untrusted_workspaces_hooks_are_named_once_with_how_to_trust_it(
    emulator: Emulator, tmp_path: Path, data_dir: Path
) -> None:
    """Issue 12 §5 in ACP editors: a workspace whose `.agentd/config.toml` defines hooks the user has not
    trusted says so when a session opens there (a message the user sees, once per workspace and client,
    and `_meta.agentd.warnings`), naming `agentd trust DIR`; the hooks do not run."""
    marker = tmp_path / "hook-ran"
    ws = tmp_path / "repo"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").write_text(
        f'[[hooks.turn_end]]\nname = "mark"\ncommand = "touch {marker}"\n', encoding="utf-8"
    )
    ws = ws.resolve()
    emulator.script({"answers": [REPLY]})
    a = await start(agent_env(data_dir, emulator.url), tmp_path / "agent.err")
    new = await a.call(a.conn.new_session(cwd=str(ws), mcp_servers=[]), 60)
    sid = new.session_id
    [warning] = new.field_meta["agentd"]["warnings"]
    assert (
        warning.startswith(f"the hooks of {ws}/.agentd/config.toml do not run")
        and f"`agentd trust {ws}`" in warning
    )
    await a.editor.expect(lambda e: bool(e.of(sid, "agent_message_chunk")), "the trust warning")
    assert a.editor.of(sid, "agent_message_chunk")[0]["content"]["text"] == f"agentd: {warning}\n"
    assert await a.prompt(sid, "hi") == "end_turn"
    again = await a.call(a.conn.new_session(cwd=str(ws), mcp_servers=[]), 60)
    assert "warnings" not in (again.field_meta or {}).get("agentd", {})  # told once per workspace
    assert not marker.exists()
    assert await a.close() == 0


async def test_checkpoints_rewind_and_fork_extensions(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """Issue 13 over ACP (PROTOCOL.md §6.12-§6.14, §14): `_agentd/session/checkpoints` lists the prompt's
        checkpoints, `_agentd/session/fork` copies the session, a dry-run `_agentd/session/rewind` names what
        would change and the rewind restores the files and drops the turn; a bad target is -32602 saying what to
        do; the list and a fork also work on a session this process does not hold; the fork loads with its
        history. No agentd-only `checkpoint` update reaches an ACP client, live or in a replay (found by driving
    avante.nvim's ACP client: a load logged an error with a traceback for each checkpoint)."""
    (workspace / "keep.txt").write_text("original\n")
    emulator.script({"answers": [
        _call("run_command", command="printf made > made.txt && printf changed > keep.txt"),
        REPLY,
    ]})  # fmt: skip
    a = await start(agent_env(data_dir, emulator.url), tmp_path / "agent.err")
    a.editor.answers = ["allow_once"]
    sid = await a.new(workspace)
    assert await a.prompt(sid, "change the files") == "end_turn"
    assert a.editor.of(sid, "checkpoint") == []

    def ext(method: str, **params: Any) -> Any:
        return a.call(a.conn.ext_method(f"agentd/session/{method}", {"sessionId": sid, **params}))

    listed = await ext("checkpoints")
    first = listed["checkpoints"][0]
    assert (first["id"], first["active"], first["text"]) == ("1", True, "change the files")
    fork = await ext("fork")
    assert fork["forkedFrom"] == sid and fork["messages"] == 4
    dry = await ext("rewind", to=1, dryRun=True)
    assert (
        dry["done"] is False and dry["files"]["removed"] == ["made.txt"] and (workspace / "made.txt").exists()
    )
    done = await ext("rewind", to="1")
    assert done["done"] is True and done["conversation"]["messagesAfter"] == 0
    assert not (workspace / "made.txt").exists() and (workspace / "keep.txt").read_text() == "original\n"
    bad = await _error(a.conn.ext_method("agentd/session/rewind", {"sessionId": sid, "to": "1.1"}))
    assert bad.code == -32602 and "--files-only" in str(bad)
    wrong = await _error(a.conn.ext_method("agentd/session/rewind", {"sessionId": sid, "to": [1]}))
    assert wrong.code == -32602 and wrong.data["name"] == "InvalidParams"
    assert await a.close() == 0

    b = await start(agent_env(data_dir, emulator.url), tmp_path / "agent2.err")  # holds no session yet
    stored = await b.call(b.conn.ext_method("agentd/session/checkpoints", {"sessionId": sid}))
    assert [r["to"] for r in stored["rewinds"]] == ["1"] and not stored["checkpoints"][0]["active"]
    again = await b.call(b.conn.ext_method("agentd/session/fork", {"sessionId": sid}))
    assert again["forkedFrom"] == sid
    not_loaded = await _error(b.conn.ext_method("agentd/session/rewind", {"sessionId": sid, "to": "r1"}))
    assert not_loaded.data["name"] == "SessionNotLoaded"
    await b.call(b.conn.load_session(cwd=str(workspace), session_id=fork["sessionId"], mcp_servers=[]))
    replayed = b.editor.of(fork["sessionId"], "user_message_chunk")
    assert [u["content"]["text"] for u in replayed] == ["change the files"]
    await b.call(b.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))  # has checkpoints
    assert b.editor.of(sid, "checkpoint") == [] and b.editor.of(sid, "plan") == []
    assert await b.close() == 0
    assert "not ACP v1" not in (tmp_path / "agent2.err").read_text()  # dropped quietly, live and replayed


def _says(text: str) -> dict[str, Any]:
    return {"reply": [{"text": text}], "stop_reason": "end_turn"}


async def test_the_same_sessions_as_the_command_line_and_lsp_both_ways(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path, daemons: Any
) -> None:
    """Issue 10: one set of sessions for every front end. A session `agentd run` started is listed and loaded
    over ACP (its history replayed) and continues there; `agentd sessions show` shows the ACP turn and
    `agentd run --resume` continues it; a session started over LSP (and closed there) loads over ACP and
    continues. (ACP to LSP: tests/acp/test_journey.py.)"""
    emulator.script({"answers": [_says("cli one"), _says("acp two"), _says("cli three"), _says("lsp four"),
                                 _says("acp five")]})  # fmt: skip
    env = agent_env(data_dir, emulator.url)

    async def agentd(*args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentd", *args, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env, cwd=str(ROOT),
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode or 0, out.decode()

    code, out = await agentd("run", "--workspace", str(workspace), "--prompt", "from the cli")
    assert code == 0, out
    a = await start(env, tmp_path / "a.err")
    [listed] = (await a.call(a.conn.list_sessions(cwd=str(workspace)))).sessions
    sid = listed.session_id
    await a.call(a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))
    assert [u["content"]["text"] for u in a.editor.of(sid, "agent_message_chunk")] == ["cli one"]
    assert await a.prompt(sid, "from acp") == "end_turn"
    assert await a.close() == 0
    code, out = await agentd("sessions", "show", sid)
    assert code == 0 and "from acp" in out and "acp two" in out, out
    code, out = await agentd("run", "--resume", sid, "--prompt", "back in the cli")
    assert code == 0 and "cli three" in out, out

    d = await daemons("neovim", daemon_env(data_dir, emulator.url), [workspace])
    lsp_sid = await d.new(workspace)
    assert await d.prompt(lsp_sid, "from lsp") == "end_turn"
    await d.request("agentd/session/close", {"sessionId": lsp_sid})
    b = await start(env, tmp_path / "b.err")
    assert {s.session_id for s in (await b.call(b.conn.list_sessions())).sessions} == {sid, lsp_sid}
    await b.call(b.conn.load_session(cwd=str(workspace), session_id=lsp_sid, mcp_servers=[]))
    assert [u["content"]["text"] for u in b.editor.of(lsp_sid, "user_message_chunk")] == ["from lsp"]
    assert await b.prompt(lsp_sid, "and over acp") == "end_turn"
    assert await b.close() == 0
