"""The trust question in the editors (issue 12 §5, follow-up item 2): a workspace whose `.agentd/config.toml`
defines hooks is opened from an editor before the user trusted it. The hooks do not run, and the user
learns it where they look: a `window/showMessage` warning (once per workspace and connection) that says
what does not run, why, and the command that trusts it (`agentd trust DIR`); the session status carries
the same `trust` object. After `agentd trust DIR`, a new session runs them and nothing is said."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.lsp.harness import ROOT, daemon_env, wait_until, write_scenario


def _workspace(tmp_path: Path, marker: Path) -> Path:
    ws = tmp_path / "repo"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").write_text(
        f'[[hooks.turn_end]]\nname = "mark"\ncommand = "touch {marker}"\n', encoding="utf-8"
    )
    return ws.resolve()


def _trust(env: dict[str, str], ws: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agentd", "trust", str(ws)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{ws} is trusted" in done.stdout + done.stderr


async def test_an_untrusted_workspaces_hooks_are_named_with_how_to_trust_it(
    client_name: str, tmp_path: Path, data_dir: Path, daemons: Any
) -> None:
    marker = tmp_path / "hook-ran"
    ws = _workspace(tmp_path, marker)
    config_dir = tmp_path / "user-config"
    config_dir.mkdir()
    env = daemon_env(data_dir, AGENTD_CONFIG_DIR=str(config_dir))
    scenario = {"answers": [{"reply": [{"text": "Done."}]}, {"reply": [{"text": "Done."}]}]}
    options = {"provider": "scripted", "scenario": str(write_scenario(tmp_path / "s.json", scenario))}

    d = await daemons(client_name, env, [ws], init_options=options)
    sid = await d.new(ws)
    want = f"`agentd trust {ws}`"
    await wait_until(lambda: any(want in m.message for m in d.client.messages), "the trust warning")
    [shown] = [m for m in d.client.messages if want in m.message]
    assert shown.type == 2 and shown.message.startswith(
        f"agentd: the hooks of {ws}/.agentd/config.toml do not run"
    )
    status = await d.request("agentd/session/status", {"sessionId": sid})
    assert status["trust"] == {"trusted": False, "ignored": ["hooks"], "notice": shown.message[8:-1]}
    assert await d.prompt(sid, "hi") == "end_turn"
    await d.new(ws)  # a second session in the same workspace: not said again on this connection
    assert [m.message for m in d.client.messages].count(shown.message) == 1
    assert not marker.exists()  # the untrusted hook did not run

    _trust(env, ws)
    sid2 = await d.new(ws)
    assert (await d.request("agentd/session/status", {"sessionId": sid2}))["trust"] == {
        "trusted": True, "ignored": []}  # fmt: skip
    assert await d.prompt(sid2, "hi") == "end_turn"
    await wait_until(marker.exists, "the trusted workspace's turn_end hook")
    assert os.path.exists(marker)
