"""Small defects a new user met (new-user nits): the pure parts of their fixes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentd import demo
from agentd.providers.models import model_label

pytestmark = pytest.mark.unit


def test_a_model_named_as_its_provider_is_named_once() -> None:
    """new-user nit: the terminal client's header said `scripted scripted` (the scripted provider's model is
    `scripted`); the ACP `/status` said `Model: scripted (scripted)`. One name when they are the same."""
    assert model_label("scripted", "scripted") == "scripted"
    assert model_label("scripted", "scripted", provider_first=False) == "scripted"
    assert model_label("anthropic", "claude-sonnet-4-6") == "anthropic claude-sonnet-4-6"
    assert model_label("openai", "qwen2.5-coder", provider_first=False) == "qwen2.5-coder (openai)"
    assert model_label("", "gpt-4.1") == "gpt-4.1"


def test_the_demos_hints_name_agentd_as_it_was_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """new-user nit: the README runs `.venv/bin/agentd demo`, and the demo's hints said `agentd sessions show
    …`, a command not found unless the venv is on PATH. They name the program as it was started, unless
    `agentd` on PATH is that program."""
    program = tmp_path / "venv" / "bin" / "agentd"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [".venv/bin/agentd", "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert demo._program() == ".venv/bin/agentd"
    monkeypatch.setattr(sys, "argv", [str(program), "demo"])
    monkeypatch.setenv("PATH", str(program.parent))
    assert demo._program() == "agentd"
    monkeypatch.setattr(sys, "argv", ["/x/agentd/__main__.py"])  # python -m agentd
    assert demo._program() == "agentd"
    lines = demo._finished("sess_x", tmp_path / "data", None, tmp_path / "agentd-demo-1")
    assert "delete" not in lines and "continue it:" in lines
    assert f"agentd sessions rm sess_x && rm -rf {tmp_path / 'agentd-demo-1'}" in lines
