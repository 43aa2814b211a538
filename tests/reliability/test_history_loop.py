"""break16 F4 (issue 16 §1, §3) on a real daemon over stdio: paging back through a long session with many
compactions (`agentd/session/history`, answer after answer, while another request is sent with each) leaves
no loop step that computes for 10 ms or waits for 250 ms (tests/reliability/loopcheck.py): the page is read
in a worker thread and each answer is bounded (256 KiB of updates), so encoding it is short too."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentd.core.pages import PAGE_BYTES
from tests.benchmarks.gen import MODEL, generate_paged
from tests.conftest import TAMPERED_MARK
from tests.reliability.driver import Daemon, canary_key, isolated_env
from tests.reliability.loopcheck import THRESHOLD_MS, slow_steps, verdict

pytestmark = pytest.mark.reliability


@pytest.mark.timeout(600)
async def test_paging_back_through_a_long_session_does_not_block_the_loop(tmp_path: Path) -> None:
    """break16 F4: a 3 MB session of 4 compactions, loaded, then paged back from the replayed summary to the
    log's start, an `agentd/session/list` sent with every page: every page under 2x the bound, every list
    answered, no slow loop step (loopcheck.py) while paging, no traceback."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / TAMPERED_MARK).write_text("generated sessions (tests/benchmarks/gen.py) have no audit log\n")
    sid = generate_paged(data, compactions=4, kib_between=640, seed=5)
    env = isolated_env(tmp_path, canary_key(), AGENTD_SLOW_CALLBACK_MS=THRESHOLD_MS)
    stderr = tmp_path / "stderr"
    d = await Daemon.spawn(env, stderr=stderr)
    try:
        await d.initialize(data / "workspace", {"model": MODEL})
        loaded = await d.request(
            "agentd/session/load", {"sessionId": sid, "cwd": str(data / "workspace")}, 300
        )
        assert "result" in loaded, loaded
        summaries = [
            u.update for u in d.updates[sid] if (u.update.get("_meta") or {}).get("agentd", {}).get("summary")
        ]
        before = summaries[0]["_meta"]["agentd"]["earlier"]["before"]
        start, answers = stderr.stat().st_size, 0
        while before is not None:
            page, listed = await asyncio.gather(
                d.request("agentd/session/history", {"sessionId": sid, "before": before}, 120),
                d.request("agentd/session/list", {}, 120),
            )
            assert "result" in page and "result" in listed, (page, listed)
            assert len(json.dumps(page["result"]["updates"])) < 2 * PAGE_BYTES
            before, answers = page["result"]["before"], answers + 1
        steps = slow_steps(stderr, start)
        await d.stop()
    finally:
        if d.alive():
            d.kill()
    assert answers > 5
    text = stderr.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in text, text[-3000:]
    bad = verdict(steps)
    assert not bad, "loop steps over the limits (loopcheck.py):\n" + "\n".join(bad)
