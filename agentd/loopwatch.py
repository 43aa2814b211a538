"""The event loop's slow-callback watch (issue 16 §1: nothing blocks the loop for more than 10 ms).

Owns: `watch(loop)`, called by each server mode (LSP stdio and sockets, ACP) as its loop starts, and the
line it logs. A no-op unless `AGENTD_SLOW_CALLBACK_MS` is set (the tests set it): then every callback or
task step of the loop that runs that long or longer is logged to agentd's log (stderr or `--log-file`) as

    slow callback: 12.3 ms wall, 11.9 ms CPU: <what ran>

This is asyncio debug mode's slow-callback log (`loop.slow_callback_duration`) plus the loop thread's CPU time
of the step, which tells a step that computed or blocked (a deterministic cost) from one that was only
preempted on a busy machine (wall time, no CPU): tests/reliability/loopcheck.py judges on both. Debug mode
itself is not turned on: it records a stack for every future and handle, which would swamp what is measured.
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

ENV = "AGENTD_SLOW_CALLBACK_MS"
PREFIX = "slow callback: "

log = logging.getLogger("agentd.loopwatch")
_installed: list[float] = []


def threshold_s() -> float | None:
    """The threshold of `AGENTD_SLOW_CALLBACK_MS` in seconds, or None when unset, not a number or <= 0."""
    raw = os.environ.get(ENV, "").strip()
    try:
        value = float(raw) / 1000 if raw else 0.0
    except ValueError:
        return None
    return value if value > 0 else None


def watch(loop: asyncio.AbstractEventLoop | None = None) -> float | None:
    """Turn the watch on when `AGENTD_SLOW_CALLBACK_MS` asks for it; the threshold in seconds, or None.
    Every handle of the process is timed (one loop per server process); calling it twice is harmless."""
    threshold = threshold_s()
    if threshold is None:
        return None
    (loop or asyncio.get_running_loop()).slow_callback_duration = threshold
    if not _installed:
        _installed.append(threshold)
        _wrap(threshold)
    return threshold


def _wrap(threshold: float) -> None:
    original = asyncio.events.Handle._run

    def timed(handle: asyncio.Handle) -> None:
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        original(handle)
        wall = time.perf_counter() - wall0
        if wall >= threshold:
            cpu = time.thread_time() - cpu0
            log.warning("%s%.1f ms wall, %.1f ms CPU: %s", PREFIX, wall * 1000, cpu * 1000, _what(handle))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]


def _what(handle: Any) -> str:
    """The task a step belongs to and where its coroutines wait now, else the handle's callback."""
    callback = getattr(handle, "_callback", None)
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        frames = [f"{f.f_code.co_name} ({_short(f.f_code.co_filename)}:{f.f_lineno})" for f in _stack(task)]
        return f"task {task.get_name()} {getattr(task.get_coro(), '__qualname__', '?')}: " + " > ".join(
            frames
        )
    return repr(handle)[:300]


def _stack(task: asyncio.Task[Any]) -> list[Any]:
    """The task's coroutine chain, outermost first (the `cr_await` links; `get_stack` gives one frame)."""
    out: list[Any] = []
    coro: Any = task.get_coro()
    while coro is not None and len(out) < 30:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            out.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out


def _short(path: str) -> str:
    marker = os.sep + "agentd" + os.sep
    return "agentd/" + path.rsplit(marker, 1)[1] if marker in path else os.path.basename(path)
