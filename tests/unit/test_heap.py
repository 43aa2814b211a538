"""agentd/heap.py: the process's garbage-collector policy (issue 16 §2). Each case runs in a fresh interpreter,
so the pytest process's collector is never frozen."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_off_unless_enabled() -> None:
    """A library use or a test process keeps stock CPython behaviour: settle and release do nothing."""
    assert (
        _run("""
        import gc
        from agentd import heap
        heap.settle(); print(gc.get_freeze_count())
    """)
        == "0"
    )


def test_settle_freezes_what_the_process_holds() -> None:
    """After a settle, the history so far is frozen: a full collection does not visit it."""
    assert (
        _run("""
        import gc
        from agentd import heap
        heap.enable()
        history = [{"role": "user", "content": [{"type": "text", "text": str(i)}]} for i in range(5000)]
        heap.settle()
        frozen = gc.get_freeze_count()
        print(frozen > 15000, len(gc.get_objects(2)) < 1000)
    """)
        == "True True"
    )


def test_a_closed_sessions_cycles_are_reclaimed_when_the_process_is_idle() -> None:
    """break16 F5: the full pass a closed session needs runs IDLE_S after the last turn ended, never while a
    turn runs, and never at the next turn's start (its stream would wait ~200 ms behind it)."""
    assert (
        _run("""
        import asyncio, gc, weakref
        from agentd import heap
        heap.enable()
        heap.IDLE_S = 0.0
        class Session: pass

        async def main():
            heap.settle()  # turn A starts
            s = Session(); s.me = s; s.history = [{"n": i} for i in range(100)]
            ref = weakref.ref(s)
            heap.turn_ended()
            heap.settle()  # turn B starts: s is frozen
            del s
            heap.release()  # s's session closed while B runs: nothing runs yet
            for _ in range(3):
                await asyncio.sleep(0)
            during = ref() is not None
            heap.settle(); heap.turn_ended()  # turn C starts and ends while B runs: still no pass
            for _ in range(3):
                await asyncio.sleep(0)
            still = ref() is not None
            heap.turn_ended()  # B ends: the process is idle, the pass runs
            for _ in range(3):
                await asyncio.sleep(0)
            print(during, still, ref() is None, gc.get_freeze_count() > 0)

        asyncio.run(main())
    """)
        == "True True True True"
    )


def test_a_process_never_idle_passes_after_force_after_reasons() -> None:
    """With turns always running, the pass comes at a turn start once FORCE_AFTER closes piled up, and
    every RELEASE_EVERY settles count as one: what can be kept frozen is bounded."""
    assert (
        _run("""
        import gc, weakref
        from agentd import heap
        heap.enable()
        class Task: pass
        heap.settle()
        t = Task(); t.me = t
        ref = weakref.ref(t)
        heap.settle()
        del t
        for _ in range(heap.FORCE_AFTER - 1):
            heap.release()
        heap.settle()
        before = ref() is not None
        heap.release()
        heap.settle()
        print(before, ref() is None)
    """)
        == "True True"
    )


def test_the_previous_turns_cyclic_garbage_is_collected_by_the_next_settle() -> None:
    """A turn's task and exception cycles, garbage by the next turn, are collected before that turn freezes
    (they would otherwise be kept until a release); new imports since the last settle skip the pass once."""
    assert (
        _run("""
        import gc, weakref
        from agentd import heap
        heap.enable()
        heap.settle()
        class Task: pass
        t = Task(); t.me = t; t.body = [{"n": i} for i in range(1000)]
        ref = weakref.ref(t)
        for _ in range(3):
            gc.collect(1)  # promoted while the turn runs
        del t
        import json.tool  # a module imported since: this settle freezes without a pass
        heap.settle()
        after_import = ref() is not None
        heap.full_pass()
        t = Task(); t.me = t
        ref = weakref.ref(t)
        del t
        heap.settle()
        print(after_import, ref() is None)
    """)
        == "True True"
    )
