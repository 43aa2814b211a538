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


async def test_the_test_clients_share_one_way_to_wait() -> None:
    """new-user nit (duplicates): the LSP harness's Recorder and the acp harness's Editor each had their own
    copy of expect/check/of and of the daemon's environment. One copy (tests/recorded.py), each client keeping
    its own default deadline: a predicate that holds wakes the wait, one that never does fails naming it."""
    import asyncio
    from dataclasses import dataclass, field
    from typing import Any

    from tests.recorded import Recording, agentd_env

    @dataclass
    class Client(Recording):
        deadline = 0.05
        updates: list[dict[str, Any]] = field(default_factory=list)
        _waiters: list[Any] = field(default_factory=list)

    c = Client()
    waiting = asyncio.ensure_future(c.expect(lambda r: len(r.updates) == 1, "one update"))
    c.updates.append({"sessionId": "s", "update": {"sessionUpdate": "plan"}})
    c.check()
    await waiting
    assert c.of("s", "plan") == [{"sessionUpdate": "plan"}] and c.of("t") == []
    with pytest.raises(AssertionError, match=r"timed out after 0.05 s waiting for never"):
        await c.expect(lambda r: False, "never")
    env = agentd_env(Path("/d"), "http://127.0.0.1:1", EXTRA="1")
    assert (env["AGENTD_DATA_DIR"], env["ANTHROPIC_BASE_URL"], env["EXTRA"]) == (
        "/d",
        "http://127.0.0.1:1",
        "1",
    )
