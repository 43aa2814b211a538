"""Fixtures for in-process sessions: a real Session on a tmp workspace and data dir, a scripted model,
queued approvals, and captured stderr lines and updates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.config import Settings, load_settings
from agentd.core.factory import create_session, open_session
from agentd.core.session import Session
from agentd.permissions.approver import Approver, QueueApprover
from agentd.persistence.paths import DataDir
from agentd.providers.base import Provider
from agentd.providers.scripted import ScriptedProvider


@dataclass
class Harness:
    session: Session
    provider: Provider
    approver: Approver
    lines: list[str] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.provider.requests  # type: ignore[attr-defined,no-any-return]


def answers_of(*replies: list[dict[str, Any]] | dict[str, Any]) -> dict[str, Any]:
    """A scenario from replies: a list of reply items, or a whole answer dict."""
    return {"answers": [r if isinstance(r, dict) else {"reply": r} for r in replies]}


def read_file(path: str) -> dict[str, Any]:
    return {"tool_use": {"name": "read_file", "input": {"path": path}}}


def todo(*items: tuple[str, str]) -> dict[str, Any]:
    return {
        "tool_use": {
            "name": "todo_write",
            "input": {"todos": [{"content": c, "status": s} for c, s in items]},
        }
    }


def text(t: str) -> dict[str, Any]:
    return {"text": t}


@pytest.fixture
def make_harness(workspace: Path, data_dir: Path) -> Callable[..., Harness]:
    opened: list[Session] = []

    def make(
        scenario: dict[str, Any] | None = None,
        *,
        approver: Approver | None = None,
        provider: Provider | None = None,
        resume: str | None = None,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> Harness:
        cfg = settings or load_settings(workspace, cli={"provider": "scripted", **overrides})
        prov = provider or ScriptedProvider(scenario or {"answers": []}, clock=ManualClock())
        appr = approver or QueueApprover()
        h = Harness(session=None, provider=prov, approver=appr)  # type: ignore[arg-type]
        kwargs: dict[str, Any] = dict(
            settings=cfg,
            provider=prov,
            data_dir=DataDir(data_dir),
            approver=appr,
            sink=h.updates.append,
            clock=ManualClock(),
            lines=h.lines.append,
        )
        h.session = (
            open_session(session_id=resume, **kwargs) if resume else create_session(cwd=workspace, **kwargs)
        )
        opened.append(h.session)
        return h

    yield make  # type: ignore[misc]
    for s in opened:
        s.close()
