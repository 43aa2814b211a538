"""The garbage-collector policy sees every model request a session makes (agentd/heap.py): a turn and a
manual compaction each count as running from their start to their end, so the idle full pass never runs
while one streams (recheck of break16 F5: a pass of 146 ms ran 2 s into a compaction's stream)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentd.heap as heap
from agentd.clock import ManualClock
from agentd.core.factory import create_session
from agentd.providers.scripted import ScriptedProvider
from tests.integration.test_off_loop_sessions import _kwargs

pytestmark = pytest.mark.integration


async def test_a_turn_and_a_compaction_each_run_between_a_settle_and_a_turn_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(heap, "settle", lambda: calls.append("settle"))
    monkeypatch.setattr(heap, "turn_ended", lambda: calls.append("turn_ended"))
    ws = tmp_path / "ws"
    ws.mkdir()
    kwargs = _kwargs(ws, tmp_path / "data")
    answers = [{"reply": [{"text": f"answer {k}"}]} for k in range(4)]
    kwargs["provider"] = ScriptedProvider({"answers": answers}, clock=ManualClock())
    s = create_session(cwd=ws, **kwargs)
    try:
        await s.prompt([{"type": "text", "text": "one"}])
        assert calls == ["settle", "turn_ended"]
        await s.compact()
        assert calls[2:] == ["settle", "turn_ended"], calls
    finally:
        s.close()
