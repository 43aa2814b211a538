"""Sessions are created and opened in a worker thread, never on the event loop (issue 16 §1:
`agentd.core.factory.built_off_loop`, used by both adapters): the loop runs other work meanwhile; a request
cancelled (or a client gone) while the thread runs leaves no lock and no open session behind, so a later open
of the same id works; two opens of one id at once end in one session and one SessionLocked; the errors are
the factory's own (SessionNotFound)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.config import load_settings
from agentd.core.factory import built_off_loop, create_session, open_session
from agentd.core.session import Session
from agentd.errors import SessionLocked, SessionNotFound
from agentd.permissions.approver import QueueApprover
from agentd.persistence.lock import holder
from agentd.persistence.paths import DataDir
from agentd.providers.scripted import ScriptedProvider

WAIT_S = 20.0


def _kwargs(workspace: Path, data_dir: Path) -> dict[str, Any]:
    settings = load_settings(workspace, cli={"provider": "scripted"})
    return dict(settings=settings, provider=ScriptedProvider({"answers": []}, clock=ManualClock()),
                data_dir=DataDir(data_dir), approver=QueueApprover(), clock=ManualClock(),
                lines=lambda _line: None)  # fmt: skip


def _stored(workspace: Path, data_dir: Path) -> str:
    """A stored session, closed (its meta record only)."""
    s = create_session(cwd=workspace, **_kwargs(workspace, data_dir))
    sid = s.id
    s.close()
    return sid


def _gated(build: Any, entered: threading.Event, gate: threading.Event) -> Any:
    """`build`, run only once `gate` is set (after saying it was `entered`)."""

    def run(**kw: Any) -> Session:
        entered.set()
        assert gate.wait(WAIT_S), "the test never opened the gate"
        return build(**kw)  # type: ignore[no-any-return]

    return run


async def _until(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, WAIT_S), "the worker thread never started"


@pytest.mark.parametrize("kind", ["open", "create"])
async def test_a_cancel_while_the_thread_builds_leaves_no_lock_and_the_next_open_works(
    workspace: Path, data_dir: Path, kind: str
) -> None:
    """Issue 16 §1: a load (or new) cancelled while its worker thread opens the store waits for the thread,
    closes what it built (the lock is released) and ends in CancelledError; the same id opens again at once."""
    sid = _stored(workspace, data_dir)
    entered, gate = threading.Event(), threading.Event()
    kw = _kwargs(workspace, data_dir)
    if kind == "open":
        task = asyncio.ensure_future(
            built_off_loop(_gated(open_session, entered, gate), session_id=sid, **kw)
        )
    else:
        task = asyncio.ensure_future(
            built_off_loop(_gated(create_session, entered, gate), cwd=workspace, **kw)
        )
    await _until(entered)
    task.cancel()
    await asyncio.sleep(0)  # the cancellation is delivered while the thread still waits at the gate
    assert not task.done()  # it waits for the thread: nothing it builds may outlive the request
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT_S)
    sessions = sorted(p.name for p in (data_dir / "sessions").iterdir())
    assert all(holder(data_dir / "sessions" / s / "lock") is None for s in sessions), sessions
    again = await built_off_loop(open_session, session_id=sid, **_kwargs(workspace, data_dir))
    try:
        assert again.id == sid and not again.closed
    finally:
        again.close()


async def test_two_opens_of_one_session_at_once_end_in_one_session_and_one_session_locked(
    workspace: Path, data_dir: Path
) -> None:
    """Issue 16 §1: two loads of the same id whose threads open the store at the same moment: exactly one
    session, and one SessionLocked naming this process; never two live sessions of one log."""
    sid = _stored(workspace, data_dir)
    barrier = threading.Barrier(2, timeout=WAIT_S)

    def lined_up(**kw: Any) -> Session:
        barrier.wait()
        return open_session(**kw)

    results = await asyncio.gather(
        built_off_loop(lined_up, session_id=sid, **_kwargs(workspace, data_dir)),
        built_off_loop(lined_up, session_id=sid, **_kwargs(workspace, data_dir)),
        return_exceptions=True,
    )
    opened = [r for r in results if isinstance(r, Session)]
    locked = [r for r in results if isinstance(r, SessionLocked)]
    try:
        assert (len(opened), len(locked)) == (1, 1), results
        assert locked[0].data["sameProcess"] is True
    finally:
        for s in opened:
            s.close()
    assert holder(data_dir / "sessions" / sid / "lock") is None


async def test_the_loop_runs_while_a_session_is_opened_and_errors_pass_through(
    workspace: Path, data_dir: Path
) -> None:
    """Issue 16 §1: while the worker thread opens a session the loop serves other callbacks; a missing session
    raises the factory's SessionNotFound from the thread, as it did on the loop."""
    sid = _stored(workspace, data_dir)
    entered, gate = threading.Event(), threading.Event()
    task = asyncio.ensure_future(
        built_off_loop(_gated(open_session, entered, gate), session_id=sid, **_kwargs(workspace, data_dir))
    )
    await _until(entered)
    ticks = 0
    for _ in range(5):  # the loop goes on while the thread is held at the gate
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 5 and not task.done()
    gate.set()
    session = await asyncio.wait_for(task, WAIT_S)
    session.close()
    with pytest.raises(SessionNotFound):
        await built_off_loop(open_session, session_id="sess_0000000000000000000000000z",
                             **_kwargs(workspace, data_dir))  # fmt: skip
