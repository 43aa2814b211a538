"""The terminal client's SIGINT has one owner (new-user H: Ctrl-C after an approval): the approval question's
prompt_toolkit application removed the turn's SIGINT handler when it closed, so Ctrl-C was ignored for the
rest of the turn. No application of the client touches signal handlers; a SIGINT the client forwards is the
question's Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

from prompt_toolkit.application.current import create_app_session, get_app_or_none
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from agentd.adapters.tui import approval
from agentd.adapters.tui.approval import CANCELLED, choose_option
from agentd.adapters.tui.entry import send_interrupt
from tests.lsp.harness import wait_until

OPTIONS = [{"optionId": "once", "name": "Allow once", "kind": "allow_once"},
           {"optionId": "no", "name": "Reject", "kind": "reject_once"}]  # fmt: skip
TUI = Path(approval.__file__).parent


async def _ask(keys: str, forward: bool = False) -> tuple[str, bool]:
    """choose_option answered with `keys` (or a forwarded SIGINT) while the loop holds a SIGINT handler;
    its answer, and whether a SIGINT after it still reaches that handler."""
    loop = asyncio.get_running_loop()
    got = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, got.set)
    try:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            asking = asyncio.ensure_future(choose_option(OPTIONS, "Allow?"))
            await wait_until(lambda: getattr(get_app_or_none(), "is_running", False), "the question shown")
            if forward:
                assert send_interrupt()
            pipe.send_text(keys)
            answer = await asyncio.wait_for(asking, 30)
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.wait_for(got.wait(), 30)
        return answer, got.is_set()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def test_the_question_leaves_the_clients_sigint_handler_in_place() -> None:
    """new-user H: Ctrl-C after an approval: after `y` the turn's SIGINT handler is still the loop's."""
    assert asyncio.run(_ask("y")) == ("once", True)


def test_a_forwarded_sigint_is_the_questions_ctrl_c() -> None:
    """new-user H: a SIGINT while the question reads keys cancels the turn as its Ctrl-C does."""
    assert asyncio.run(_ask("", forward=True)) == (CANCELLED, True)


def test_no_application_of_the_client_handles_sigint_itself() -> None:
    """new-user H: every prompt_toolkit application the client runs leaves SIGINT to the client."""
    runs = [
        (path.name, path.read_text()[m.start() : m.start() + 200].partition(")\n")[0])
        for path in sorted(TUI.glob("*.py"))
        for m in re.finditer(r"\b(run_async|prompt_async)\(", path.read_text())
    ]
    assert len(runs) >= 2, runs  # the question (and pickers) and the input line
    assert [r for r in runs if "handle_sigint=False" not in r[1]] == []
