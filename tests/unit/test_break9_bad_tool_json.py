"""H3 class (break9): a tool_use whose input JSON does not parse, in an Anthropic-format reply that did not
hit max_tokens (a local model behind an Anthropic-compatible endpoint), was reported to the model as "Your
previous reply hit max_tokens" and never answered. Now it is stored with `{}` and answered with
`invalid_arguments` naming the JSON error, as the OpenAI-compatible provider does; a reply that did hit
max_tokens still reports the cut call (H3)."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.providers.anthropic import MessageAccumulator


def _events(stop_reason: str, finished: bool = True) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": use},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"path": a.txt}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 9}},
    ]  # fmt: skip
    return events + ([{"type": "message_stop"}] if finished else [])


def _fold(events: list[dict[str, Any]]) -> Any:
    acc = MessageAccumulator()
    for e in events:
        acc.feed(e)
    return acc.response()


@pytest.mark.parametrize("stop_reason", ["tool_use", "end_turn"])
def test_bad_json_in_a_finished_reply_is_an_invalid_arguments_call(stop_reason: str) -> None:
    """H3 (break9): stored as a tool_use with `{}` (so the history stays valid) and answered with the
    JSON error; not reported as cut off."""
    response = _fold(_events(stop_reason))
    assert response.content[1] == {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}
    assert response.truncated_tool_use_ids == []
    assert response.invalid_tool_inputs["toolu_1"].startswith("invalid_arguments: input: not valid JSON (")


@pytest.mark.parametrize("finished", [True, False])
def test_bad_json_at_max_tokens_is_still_a_cut_call(finished: bool) -> None:
    """H3: at max_tokens (or a reply that never finished) the call was cut off: kept out, reported."""
    response = _fold(_events("max_tokens", finished))
    assert [b["type"] for b in response.content] == ["text"]
    assert (response.truncated_tool_use_ids, response.truncated_tool_names) == (
        ["toolu_1"],
        {"toolu_1": "read_file"},
    )
    assert response.invalid_tool_inputs == {}
