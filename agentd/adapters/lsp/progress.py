"""Work-done progress for a turn (PROTOCOL.md §10.1).

Owns: `TurnProgress`. A turn reports `$/progress` when the prompt carried a `workDoneToken`, or when the
client declared `window.workDoneProgress` and accepted `window/workDoneProgress/create` for the token
agentd picks (`agentd-turn-<sessionId>-<n>`); if creation fails the turn runs without progress. Reports:
`Thinking`, `Running: <title>`, `Waiting for approval: <title>`, `Compacting history`, at most 4 per second
(the latest state wins). `end` goes out before the prompt response, stop reason first.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

log = logging.getLogger("agentd.lsp.progress")

_turns = itertools.count(1)
MIN_INTERVAL_S = 0.25
CREATE_DEADLINE_S = 5.0


class TurnProgress:
    def __init__(self, server: LanguageServer, token: int | str) -> None:
        self.server = server
        self.token = token
        self._last = 0.0
        self._pending: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._ended = False

    @classmethod
    async def start(
        cls, server: LanguageServer, *, session_id: str, cwd: str, token: int | str | None, supported: bool
    ) -> TurnProgress | None:
        """Create (if needed) and begin the progress of one turn; None when the turn runs without it."""
        if token is None:
            if not supported:
                return None
            token = f"agentd-turn-{session_id}-{next(_turns)}"
            try:
                await asyncio.wait_for(server.work_done_progress.create_async(token), CREATE_DEADLINE_S)
            except Exception as exc:  # a refusal or no answer: run without progress
                log.info("window/workDoneProgress/create failed: %s", exc)
                return None
        progress = cls(server, token)
        title = f"agentd: {os.path.basename(cwd) or cwd}"
        server.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=title, message="Thinking", cancellable=True)
        )
        progress._last = time.monotonic()
        return progress

    def report(self, message: str) -> None:
        """Report `message`, at most 4 per second; a report inside the interval replaces the pending one."""
        if self._ended:
            return
        wait = self._last + MIN_INTERVAL_S - time.monotonic()
        if wait <= 0 and self._timer is None:
            self._send(message)
            return
        self._pending = message
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(max(wait, 0.0), self._flush)

    def _flush(self) -> None:
        self._timer = None
        if self._pending is not None and not self._ended:
            message, self._pending = self._pending, None
            self._send(message)

    def _send(self, message: str) -> None:
        self._last = time.monotonic()
        self.server.work_done_progress.report(self.token, types.WorkDoneProgressReport(message=message))

    def end(self, stop_reason: str, requests: int, delta: dict[str, Any]) -> None:
        """`<stop> · <n> requests · in=… out=… cache_read=… cache_write=…` (pending reports dropped)."""
        if self._ended:
            return
        self._ended = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        message = (
            f"{stop_reason} · {requests} request{'' if requests == 1 else 's'} · in={delta['in']} out={delta['out']} "
            f"cache_read={delta['cache_read']} cache_write={delta['cache_write']}"
        )
        self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
        self.server.work_done_progress.tokens.pop(self.token, None)
