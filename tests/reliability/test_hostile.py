"""Hostile tool inputs and a hostile data dir against a real daemon (issue 16 §6; tests/reliability/hostile.py
says what each case checks). The report counts them as `hostile_cases`, `hostile_cases_ok`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability import hostile as h

pytestmark = pytest.mark.reliability


@pytest.mark.timeout(900)
async def test_a_gib_of_output_and_a_fork_storm_leave_the_daemon_and_other_sessions_fine(
    tmp_path: Path,
) -> None:
    """1 GiB of run_command output: peak RSS grows < 64 MiB, the result is capped and counted; a bounded fork
    bomb (511 shells): another session's turn completes meanwhile, nothing of it outlives its timeout; the
    daemon answers after both, no traceback."""
    outcomes = await h._tool_cases(tmp_path)
    assert [o.case for o in outcomes] == ["output_1gib", "fork_storm"]
    assert all(o.ok for o in outcomes), [f"{o.case}: {p}" for o in outcomes for p in o.problems]


@pytest.mark.timeout(600)
async def test_a_full_data_dir_is_one_clear_error_and_an_intact_log(tmp_path: Path) -> None:
    """A data dir that fills up mid-session (a 4 MiB tmpfs): the next prompt gets the StorageError, the daemon
    answers, the log keeps every record of the first turn with contiguous seqs and no torn line."""
    why_not = h.namespaces_usable()
    if why_not:
        pytest.skip(why_not)
    out = await h._full(tmp_path)
    assert out.ok, out.problems


@pytest.mark.timeout(600)
async def test_a_read_only_data_dir_is_named_in_the_answer_to_initialize(tmp_path: Path) -> None:
    """A read-only data dir: `initialize` is answered with the StorageError saying it is not writable and
    what to pass instead (H12); no traceback."""
    why_not = h.namespaces_usable()
    if why_not:
        pytest.skip(why_not)
    out = await h._read_only(tmp_path)
    assert out.ok, out.problems
