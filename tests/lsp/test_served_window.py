"""Over LSP the context size is the window the server serves (issue 17 part 1): a llama.cpp server with a
4,096-token context is reported as 4096 by `agentd/session/status` and by every `usage_update`'s `size`, from
the session's creation on (it was always 32768 before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env


async def test_status_and_usage_updates_report_the_served_window(
    client_name: str, openai_emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    openai_emulator.script(
        {"server": "llama.cpp", "served_window": 4096, "answers": [{"reply": [{"text": "hi"}]}]}
    )
    options = {"provider": "openai", "baseUrl": openai_emulator.url + "/v1", "model": "emu-model"}
    d = await daemons(client_name, daemon_env(data_dir), [workspace], init_options=options)
    sid = await d.new(workspace)
    status = await d.request("agentd/session/status", {"sessionId": sid})
    assert (status["context"]["windowTokens"], status["context"]["compressThresholdTokens"]) == (4096, 3276)
    assert await d.prompt(sid, "hello") == "end_turn"
    sizes = [u["size"] for u in d.rec.of(sid, "usage_update")]
    assert sizes and set(sizes) == {4096}
