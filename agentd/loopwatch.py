"""The event loop's slow-callback watch (issue 16 §1: nothing blocks the loop for more than 10 ms).

Owns: `watch(loop)`, called by each server mode (LSP stdio and sockets, ACP) as its loop starts. A no-op
unless `AGENTD_SLOW_CALLBACK_MS` is set (the tests set it): then the loop runs in asyncio's debug mode with
`slow_callback_duration` at that many milliseconds, and every callback or task step that ran longer is
logged by asyncio (`Executing <Task ...> took 0.123 seconds`) to agentd's log (stderr or `--log-file`),
where tests/reliability/loopcheck.py reads it. Debug mode costs CPU of its own, so it is for tests, never
the default. Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import logging
import os

ENV = "AGENTD_SLOW_CALLBACK_MS"


def watch(loop: asyncio.AbstractEventLoop | None = None) -> float | None:
    """Turn the watch on for `loop` (default: the running loop) when `AGENTD_SLOW_CALLBACK_MS` holds a
    positive number; the threshold in seconds, or None when off. A malformed value is ignored (off)."""
    raw = os.environ.get(ENV, "").strip()
    try:
        threshold = float(raw) / 1000 if raw else 0.0
    except ValueError:
        return None
    if threshold <= 0:
        return None
    loop = loop or asyncio.get_running_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = threshold
    mine = logging.getLogger("agentd")
    theirs = logging.getLogger("asyncio")
    theirs.handlers[:] = mine.handlers or logging.getLogger().handlers
    theirs.propagate = not theirs.handlers
    theirs.setLevel(logging.WARNING)
    return threshold
