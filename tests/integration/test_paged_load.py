"""Issue 16 (bounded load): after a compression, `session/load` replays the last summary and what follows;
`agentd/session/history` pages in what came before, page by page, each update exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.errors import UsageError
from tests.integration.conftest import answers_of, read_file, text


def _ids(updates: list[dict]) -> list[str]:
    return [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]


async def test_load_replays_from_the_last_compaction_and_pages_in_the_rest(
    make_harness, workspace: Path
) -> None:
    """The replay starts with one summary (`_meta.agentd.summary`, `earlier.before`); following `before`
    from page to page ends at the first page (`before: null`, the first prompt in it); the tool calls of
    all pages and the replay are the live turn's, each once; a `before` that is no compaction's seq is a
    UsageError. Reopening the session gives the same pages."""
    (workspace / "a.txt").write_text("x" * 4000)
    turn = [[read_file("a.txt")] for _ in range(4)] + [[text("done")]]
    h = make_harness(answers_of(*(turn * 3)))
    h.session.p.settings.context.compress_threshold_tokens = 2500
    h.session.p.settings.context.keep_recent_messages = 4
    for n in range(3):
        assert await h.session.prompt([{"type": "text", "text": f"read a lot ({n})"}]) == "end_turn"
    live = _ids(h.updates)
    assert len(live) == 12

    def pages(session) -> tuple[list[dict], list[dict]]:
        replayed = session.replay_updates()
        summaries = [u for u in replayed if (u.get("_meta") or {}).get("agentd", {}).get("summary")]
        assert len(summaries) == 1 and replayed[1] is summaries[0], replayed[:3]
        before, earlier = summaries[0]["_meta"]["agentd"]["earlier"]["before"], []
        while before is not None:
            page = session.history(before)
            earlier = page["updates"] + earlier
            before = page["before"]
        return earlier, replayed

    earlier, replayed = pages(h.session)
    prompts = [u["content"]["text"] for u in earlier + replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert prompts == ["read a lot (0)", "read a lot (1)", "read a lot (2)"]
    assert sorted(_ids(earlier) + _ids(replayed)) == sorted(live)
    assert len(_ids(replayed)) < len(live)
    with pytest.raises(UsageError, match="not a page of this session"):
        h.session.history(10_000)
    sid = h.session.id
    h.session.close()
    again, replayed_again = pages(make_harness(resume=sid).session)
    assert (again, _ids(replayed_again)) == (earlier, _ids(replayed))
