"""break16 F4 (issue 16 §1, §3): `agentd/session/history` reads its page in a worker thread: while the thread
is held at the failpoint `history.page=gate`, another request on the same agent is answered; released, the
page comes back bounded, with `before` to go on."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from agentd.core.pages import PAGE_BYTES
from agentd.testing.emulator import Emulator
from tests.acp.harness import agent_env, start
from tests.benchmarks.gen import generate_paged
from tests.conftest import TAMPERED_MARK

WAIT_S = 20.0


async def test_another_request_is_answered_while_a_history_page_is_read(
    emulator: Emulator, data_dir: Path, tmp_path: Path
) -> None:
    """break16 F4: the history page's worker thread is held; `agentd/session/status` of the same session is
    answered meanwhile (the loop is not blocked); then the page arrives: updates of the records before the
    requested prompt, within the bound, and a `before` that precedes it."""
    (data_dir / TAMPERED_MARK).write_text("generated sessions (tests/benchmarks/gen.py) have no audit log\n")
    sid = generate_paged(data_dir, compactions=3, kib_between=300, seed=3)
    log = (data_dir / "sessions" / sid / "log.jsonl").read_bytes().splitlines()
    before = [json.loads(line)["seq"] for line in log if b'"kind":"prompt"' in line][-1]
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = agent_env(data_dir, emulator.url, AGENTD_FAILPOINTS="history.page=gate",
                    AGENTD_FAILPOINT_GATE=str(gate))  # fmt: skip
    a = await start(env, tmp_path / "agent.err")
    await a.call(a.conn.load_session(cwd=str(data_dir / "workspace"), session_id=sid, mcp_servers=[]))
    page = asyncio.ensure_future(
        a.conn.ext_method("agentd/session/history", {"sessionId": sid, "before": before})
    )
    try:
        writer = await asyncio.wait_for(asyncio.to_thread(open, gate, "wb"), WAIT_S)
    except TimeoutError:
        os.close(os.open(gate, os.O_RDONLY | os.O_NONBLOCK))  # frees our blocked open()
        raise AssertionError("the agent never reached the history.page failpoint") from None
    try:
        status = await a.call(a.conn.ext_method("agentd/session/status", {"sessionId": sid}))
        assert not page.done()
    finally:
        writer.close()
    result = await a.call(page)
    assert status and result["updates"] and isinstance(result["before"], int) and result["before"] < before
    assert len(json.dumps(result["updates"])) < 2 * PAGE_BYTES
    assert await a.close() == 0
    assert "Traceback" not in (tmp_path / "agent.err").read_text(encoding="utf-8", errors="replace")
