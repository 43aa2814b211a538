"""Error answers of every `agentd/*` method (PROTOCOL.md §11): code, `data.name` and the exact message.
Read-only cases share one daemon per client per module (TESTING.md §1.4)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.lsp.harness import CLIENTS, Agentd, daemon_env, start_agentd, write_scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")
UNKNOWN = "sess_0000000000000000000000000z"


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=sorted(CLIENTS))
async def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("errors")
    ws, data, other = root / "ws", root / "data", root / "elsewhere"
    for p in (ws, data, other):
        p.mkdir()
    options = {"provider": "scripted", "scenario": str(write_scenario(root / "s.json", {"answers": []}))}
    d = await start_agentd(request.param, daemon_env(data), [ws], init_options=options)
    yield d, ws, other
    await d.stop()


def not_found(sid: str) -> dict[str, Any]:
    return {"code": -32010, "data": {"name": "SessionNotFound", "sessionId": sid},
            "message": f"Session {sid} is not in the data dir; call agentd/session/list to see sessions, or "
                       "agentd/session/new."}  # fmt: skip


async def test_new_refuses_bad_and_outside_folders(shared: tuple[Agentd, Path, Path]) -> None:
    d, ws, other = shared
    assert await d.error("agentd/session/new", {"cwd": "src"}) == {"code": -32602, "data": {
        "name": "InvalidParams", "errors": [{"loc": "cwd", "msg": "must be absolute"}]},
        "message": "agentd/session/new: cwd must be an absolute path (got 'src'); send the workspace folder's "
                   "absolute path."}  # fmt: skip
    missing = ws / "missing"
    assert (await d.error("agentd/session/new", {"cwd": str(missing)}))["message"] == (
        f"agentd/session/new: cwd {missing} does not exist or is not a directory; send an existing folder."
    )
    assert await d.error("agentd/session/new", {"cwd": str(other)}) == {"code": -32014, "data": {
        "name": "OutsideWorkspace", "path": str(other)},
        "message": f"{other} is not inside any workspace folder ({ws.resolve()}); open that folder in the editor "
                   "or use a path inside it."}  # fmt: skip
    error = await d.error("agentd/session/new", {"cwd": str(ws), "additionalDirectories": [str(other)]})
    assert (error["code"], error["data"]["name"]) == (-32014, "OutsideWorkspace")
    assert await d.error("agentd/session/new", {}) == {"code": -32602, "data": {
        "name": "InvalidParams", "errors": [{"loc": "cwd", "msg": "Field required"}]},
        "message": "agentd/session/new: cwd: Field required; fix the params and send it again."}  # fmt: skip


async def test_unknown_sessions(shared: tuple[Agentd, Path, Path]) -> None:
    d, ws, _ = shared
    for method in ("agentd/session/todos", "agentd/session/status", "agentd/session/compact"):
        assert await d.error(method, {"sessionId": UNKNOWN}) == not_found(UNKNOWN)
    assert await d.error("agentd/session/prompt", {"sessionId": UNKNOWN, "prompt": [{"type": "text", "text": "hi"}]}) \
        == not_found(UNKNOWN)  # fmt: skip
    assert await d.error("agentd/session/setMode", {"sessionId": UNKNOWN, "modeId": "readOnly"}) == not_found(
        UNKNOWN
    )
    error = await d.error("agentd/session/load", {"sessionId": UNKNOWN, "cwd": str(ws)})
    assert (error["code"], error["data"]) == (-32010, {"name": "SessionNotFound", "sessionId": UNKNOWN})
    assert error["message"].startswith(f"Session {UNKNOWN} is not in the data dir (")
    d.notify("agentd/session/cancel", {"sessionId": UNKNOWN})  # does nothing, answers nothing
    assert await d.request("agentd/session/close", {"sessionId": UNKNOWN}) == {}


async def test_bad_prompts_modes_and_methods(shared: tuple[Agentd, Path, Path]) -> None:
    d, ws, _ = shared
    sid = await d.new(ws)
    audio = {"sessionId": sid, "prompt": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}
    assert await d.error("agentd/session/prompt", audio) == {"code": -32602, "data": {
        "name": "InvalidParams", "errors": [{"loc": "prompt.0", "msg": "audio prompts are not supported; send text "
                                                                       "instead"}]},
        "message": "agentd/session/prompt: audio prompts are not supported; send text instead"}  # fmt: skip
    blob = {
        "sessionId": sid,
        "prompt": [{"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AA=="}}],
    }
    assert (await d.error("agentd/session/prompt", blob))["data"]["errors"][0]["loc"] == "prompt.0"
    empty = await d.error("agentd/session/prompt", {"sessionId": sid, "prompt": []})
    assert empty["message"] == ("agentd/session/prompt: the prompt has no content; send at least one non-empty "
                                "text block")  # fmt: skip
    assert await d.error("agentd/session/setMode", {"sessionId": sid, "modeId": "yolo"}) == {"code": -32602, "data": {
        "name": "InvalidParams", "errors": [{"loc": "modeId", "msg": "unknown mode"}]},
        "message": "agentd/session/setMode: unknown modeId 'yolo'; use default, acceptEdits, readOnly or auto."}  # fmt: skip
    assert await d.error("agentd/session/load", {"sessionId": sid, "cwd": str(ws / "..")}) == {"code": -32602,
        "data": {"name": "InvalidParams", "errors": [{"loc": "cwd", "msg": f"must be {ws.resolve()}"}]},
        "message": f"agentd/session/load: cwd must be the session's stored root {ws.resolve()} (got {ws / '..'})."}  # fmt: skip
    assert await d.error("agentd/session/fly", {}) == {"code": -32601, "data": {"name": "MethodNotFound"},
        "message": "agentd does not implement agentd/session/fly; see experimental.agentd.methods."}  # fmt: skip
    listed = await d.request("agentd/session/list", {"cwd": str(ws), "cursor": "o50"})
    assert listed == {"sessions": []}
