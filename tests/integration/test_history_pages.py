"""break16 F4 (issue 16 §3): `agentd/session/history` reads only the records of the page it answers, found
through the log's index and a binary search on seqs, bounded per answer, with `before` to go on; paging back
through a session of many compactions gives what the whole-log replay gives, every message once, in order,
and what one answer reads does not grow with the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.core.history import earlier_updates
from agentd.core.pages import Page, read_page
from agentd.errors import UsageError
from tests.benchmarks.gen import generate_paged
from tests.conftest import TAMPERED_MARK

BOUND = 16 << 10


def _summary_before(replayed: list[dict[str, Any]]) -> int:
    summaries = [u for u in replayed if (u.get("_meta") or {}).get("agentd", {}).get("summary")]
    assert len(summaries) == 1, replayed[:3]
    return int(summaries[0]["_meta"]["agentd"]["earlier"]["before"])


def _page_back(session: Any, before: int | None, bound: int) -> tuple[list[dict[str, Any]], list[Page]]:
    shown: list[dict[str, Any]] = []
    answers: list[Page] = []
    while before is not None:
        page = read_page(session, before, bound)
        assert page.result() == session.history(before, bound)
        answers.append(page)
        shown = page.updates + shown
        assert page.before is None or page.before < before
        before = page.before
    return shown, answers


def _whole_log(session: Any, before: int | None) -> list[dict[str, Any]]:
    """The reference: the pages of the whole-log replay (`earlier_updates`), each compaction's page whole."""
    records, shown = session.journal.all_records(), []
    while before is not None:
        page = earlier_updates(session, records, before)
        shown = page["updates"] + shown
        before = page["before"]
    return shown


def _open(make_harness: Any, data_dir: Path, compactions: int) -> Any:
    (data_dir / TAMPERED_MARK).write_text("generated sessions (tests/benchmarks/gen.py) have no audit log\n")
    sid = generate_paged(data_dir, compactions=compactions, kib_between=48, seed=7)
    return make_harness(resume=sid).session


def test_paging_back_through_many_compactions_equals_the_whole_log_replay(
    make_harness: Any, data_dir: Path
) -> None:
    """break16 F4: a session of 12 compactions paged back 16 KiB at a time from the replayed summary: the
    answers, put together, are the whole-log replay's pages (summaries included), every prompt and tool call
    once and in log order; each answer is within the bound unless it is one part (a turn or an assistant
    message and what follows it); the last answer's `before` is null."""
    session = _open(make_harness, data_dir, 12)
    replayed = session.replay_updates()
    start = _summary_before(replayed)
    shown, answers = _page_back(session, start, BOUND)
    assert shown == _whole_log(session, start)
    assert len(answers) > 12
    assert all(p.size <= BOUND or p.parts == 1 for p in answers), [(p.size, p.parts) for p in answers]
    prompts = [r["messageId"] for r in session.journal.all_records() if r["kind"] == "prompt"]
    shown_prompts = [u["messageId"] for u in shown + replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert shown_prompts == prompts
    calls = [u["toolCallId"] for u in shown if u["sessionUpdate"] == "tool_call"]
    assert len(calls) == len(set(calls)) > 100
    assert sum(1 for u in shown if (u.get("_meta") or {}).get("agentd", {}).get("summary")) == 11


def test_what_one_answer_reads_does_not_grow_with_the_log(make_harness: Any, data_dir: Path) -> None:
    """break16 F4: the records parsed and log bytes read per answer are about the bound, the same for a log
    three times as long (12 vs 36 compactions), never the whole log or a whole page."""
    costs = []
    for n in (12, 36):
        session = _open(make_harness, data_dir, n)
        _, answers = _page_back(session, _summary_before(session.replay_updates()), BOUND)
        log_bytes = session.journal.store.log_path.stat().st_size
        costs.append((max(p.bytes_read for p in answers), max(p.records for p in answers), log_bytes))
    (small_bytes, small_records, small_log), (big_bytes, big_records, big_log) = costs
    assert big_log > 2.5 * small_log
    assert big_bytes < 1.5 * small_bytes + BOUND and big_records < 1.5 * small_records + 50, costs
    assert big_bytes < 48 << 10 < small_log / 10, costs


def test_a_before_that_is_no_turn_or_assistant_message_is_a_usage_error(
    make_harness: Any, data_dir: Path
) -> None:
    """break16 F4: `before` names a record where an answer may end (a turn's start, an assistant message);
    anything else (a seq past the log, a tool result, the meta record) is a UsageError that says what to
    pass."""
    session = _open(make_harness, data_dir, 2)
    records = session.journal.all_records()
    result = next(r for r in records if r["kind"] == "message" and r["message"]["role"] == "user"
                  and r["message"]["content"][0].get("type") == "tool_result")  # fmt: skip
    for before in (10**9, result["seq"], 1, 0, -3):
        with pytest.raises(UsageError, match="not a page of this session"):
            session.history(before)
