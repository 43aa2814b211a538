"""What the test clients of agentd share (TESTING.md §1.4, §6 rule 3): waiting, with a deadline, for a
predicate over what a client recorded, and the environment a spawned agentd runs with.

Used by the protocol tier's LSP client (tests/lsp/harness.py `Recorder`) and the acp tier's SDK client
(tests/acp/harness.py `Editor`); each records what its protocol sends in its own way and calls `check()`
after each message. Imports nothing from agentd and no protocol library.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Recording:
    """Mixin of a recording client: `updates` holds the `{sessionId, update}` params received, `_waiters` the
    pending `expect` calls (both fields of the dataclass using it); `deadline` is the default wait in s."""

    deadline: float = 15.0
    updates: list[dict[str, Any]]
    _waiters: list[tuple[Callable[[Any], bool], asyncio.Future[None]]]

    def check(self) -> None:
        """Wake the `expect` calls whose predicate holds now (call after recording a message)."""
        for pred, fut in list(self._waiters):
            if not fut.done() and pred(self):
                fut.set_result(None)

    async def expect(self, pred: Callable[[Any], bool], what: str, timeout: float | None = None) -> None:
        """Wait until `pred(self)` holds; AssertionError naming `what` after `timeout` s (`deadline`)."""
        timeout = self.deadline if timeout is None else timeout
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, fut))
        self.check()
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}") from None

    def of(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The `update` objects of one session (optionally of one `sessionUpdate` kind), in order."""
        return [p["update"] for p in self.updates if p["sessionId"] == session_id
                and (kind is None or p["update"]["sessionUpdate"] == kind)]  # fmt: skip


def agentd_env(data_dir: Path, emulator_url: str | None = None, **extra: str) -> dict[str, str]:
    """A spawned agentd's whole environment: its data dir, this checkout on PYTHONPATH, a fake key (HOME and
    the XDG dirs are the test run's own, tests/conftest.py), the emulator's URL when given, then `extra`."""
    env = {**os.environ, "AGENTD_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT),
           "ANTHROPIC_API_KEY": "sk-ant-emu-" + secrets.token_hex(16)}  # fmt: skip
    if emulator_url is not None:
        env["ANTHROPIC_BASE_URL"] = emulator_url
    env.update(extra)
    return env
