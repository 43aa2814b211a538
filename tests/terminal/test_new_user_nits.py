"""Small defects a new user met in the terminal client (new-user nits), each on a real pseudo-terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.terminal.test_chat import step

pytestmark = pytest.mark.terminal


def test_the_header_names_the_scripted_model_once(
    workspace: Path, term_env: dict[str, str], terminals: Any, tmp_path: Path
) -> None:
    """new-user nit: with the scripted provider (provider and model both named `scripted`) the header read
    `agentd 0.1.0 · scripted scripted · /tmp/…` and `/model` `[model · scripted scripted · …]`. The name
    is shown once; with a real provider both stay (`anthropic claude-sonnet-4-6`, tests/terminal/test_break14)."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"answers": []}), encoding="utf-8")
    config = tmp_path / "agentd-config"
    config.mkdir()
    (config / "config.toml").write_text(f'provider = "scripted"\nscenario = "{scenario}"\n', encoding="utf-8")
    t = terminals(["--new"], {**term_env, "AGENTD_CONFIG_DIR": str(config)}, workspace)
    shown = step(t, "open", "new session", "agentd ")
    assert " · scripted · " in shown and "scripted scripted" not in shown
    t.line("/model")
    step(t, "model", "[model · scripted · /model NAME")
    assert "scripted scripted" not in t.transcript()
    t.key("ctrl-d")
    assert t.exit_code() == 0
