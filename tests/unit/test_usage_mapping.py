"""Usage mapping of both providers on dict inputs (CONTRACTS.md §6, PROTOCOL.md §10.2, cases C12).

Anthropic: cumulative `message_delta.usage` overwrites (the `repeat_input_usage_in_delta` stream), the TTL split.
OpenAI-compatible: `in` = prompt tokens minus cached; the cached count in the openai, deepseek and moonshot-legacy
shapes; an unreported count is None, never 0.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentd.providers.anthropic import MessageAccumulator, apply_delta_usage, usage_from_anthropic
from agentd.providers.base import ModelResponse, StreamEvent, Usage
from agentd.providers.openai_compat import ChatAccumulator, usage_from_openai

START_USAGE = {
    "input_tokens": 3,
    "cache_creation_input_tokens": 12304,
    "cache_read_input_tokens": 0,
    "cache_creation": {"ephemeral_1h_input_tokens": 12000, "ephemeral_5m_input_tokens": 304},
    "output_tokens": 1,
}


def test_anthropic_usage_with_ttl_split() -> None:
    usage = usage_from_anthropic(START_USAGE)
    assert usage == Usage(
        input_tokens=3,
        output_tokens=1,
        cache_creation_input_tokens=12304,
        cache_read_input_tokens=0,
        cache_creation_1h=12000,
        cache_creation_5m=304,
    )
    assert usage.prompt_tokens == 12307  # C12: the three input fields added, not input_tokens alone


def test_anthropic_usage_absent_fields_are_unknown() -> None:
    assert usage_from_anthropic({"input_tokens": 5, "output_tokens": 2}) == Usage(
        5, 2, None, None, None, None
    )
    assert usage_from_anthropic(None) == Usage(None, None, None, None)


def test_delta_usage_overwrites_and_never_adds() -> None:
    usage = usage_from_anthropic(START_USAGE)
    apply_delta_usage(usage, {"output_tokens": 550, "input_tokens": 3, "cache_creation_input_tokens": 12304})
    assert usage == Usage(3, 550, 12304, 0, 12000, 304)
    apply_delta_usage(usage, {"output_tokens": 600})
    assert usage == Usage(3, 600, 12304, 0, 12000, 304)


def _events(repeat_input: bool) -> list[dict[str, Any]]:
    delta_usage: dict[str, Any] = {"output_tokens": 550}
    if repeat_input:
        delta_usage |= {"input_tokens": 3, "cache_creation_input_tokens": 12304, "cache_read_input_tokens": 0}
    return [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
                "stop_reason": None,
                "usage": START_USAGE,
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": 'th": "a"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "brand_new_event", "data": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": delta_usage,
        },
        {"type": "message_stop"},
    ]


@pytest.mark.parametrize("repeat_input", [False, True])
def test_stream_accumulator_matches_the_non_streamed_totals(repeat_input: bool) -> None:
    acc = MessageAccumulator()
    shown = [out for event in _events(repeat_input) for out in acc.feed(event)]
    text = {"type": "text", "text": "Hello"}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}}
    assert acc.finished
    assert shown == [
        StreamEvent("text_delta", text="Hel"),
        StreamEvent("text_delta", text="lo"),
        StreamEvent("block_done", block=text),
        StreamEvent("block_done", block=tool),
    ]
    assert acc.response() == ModelResponse(
        id="msg_1",
        content=[text, tool],
        stop_reason="tool_use",
        usage=Usage(3, 550, 12304, 0, 12000, 304),
        model="m",
    )


def test_stream_accumulator_keeps_a_truncated_tool_use_out() -> None:
    events = _events(False)
    events[8] = {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": 'th": "a'},
    }
    events[11]["delta"]["stop_reason"] = "max_tokens"
    acc = MessageAccumulator()
    shown = [out.kind for event in events for out in acc.feed(event)]
    response = acc.response()
    assert shown == ["text_delta", "text_delta", "block_done"]
    assert (response.content, response.stop_reason, response.truncated_tool_use_ids) == (
        [{"type": "text", "text": "Hello"}],
        "max_tokens",
        ["toolu_1"],
    )


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # openai: prompt_tokens includes the cached tokens
        (
            {
                "prompt_tokens": 2000,
                "completion_tokens": 40,
                "total_tokens": 2040,
                "prompt_tokens_details": {"cached_tokens": 1536},
            },
            Usage(464, 40, None, 1536),
        ),
        # deepseek: hit + miss = prompt
        (
            {
                "prompt_tokens": 2000,
                "completion_tokens": 40,
                "prompt_cache_hit_tokens": 1920,
                "prompt_cache_miss_tokens": 80,
            },
            Usage(80, 40, None, 1920),
        ),
        # moonshot-legacy: top-level cached_tokens
        ({"prompt_tokens": 2000, "completion_tokens": 40, "cached_tokens": 1792}, Usage(208, 40, None, 1792)),
        # none: the cache read is unknown, never 0
        ({"prompt_tokens": 2000, "completion_tokens": 40, "total_tokens": 2040}, Usage(2000, 40, None, None)),
        # openai with a zero cache hit is a known 0
        (
            {"prompt_tokens": 900, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 0}},
            Usage(900, 4, None, 0),
        ),
        (None, Usage(None, None, None, None)),
    ],
)
def test_openai_usage_flavours(usage: dict[str, Any] | None, expected: Usage) -> None:
    assert usage_from_openai(usage) == expected


def test_openai_accounting_line_marks_unknown_counts() -> None:
    """new-user R7: an unknown cache read is `?`; the cache write chat completions never report is left
    out, not `cache_write=?` on every line."""
    line = usage_from_openai({"prompt_tokens": 2000, "completion_tokens": 40}).accounting_line()
    assert line == "[turn · in=2000 out=40 cache_read=?]"
    cached = {
        "prompt_tokens": 2000,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 1500},
    }
    assert usage_from_openai(cached).accounting_line() == "[turn · in=500 out=40 cache_read=1500]"


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: Any = None
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "model": "deepseek-chat",
        "object": "chat.completion.chunk",
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def test_chat_accumulator_assembles_tool_calls_reasoning_and_usage() -> None:
    acc = ChatAccumulator(["read_file"])
    chunks = [
        _chunk({"role": "assistant", "reasoning_content": "Need the "}),
        _chunk({"reasoning_content": "file."}),
        _chunk({"content": "Let me look."}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "a.txt"}'}}]}),
        _chunk({}, finish="tool_calls"),
        _chunk(
            None,
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "prompt_cache_hit_tokens": 64,
                "prompt_cache_miss_tokens": 36,
            },
        ),
    ]
    shown = [out for c in chunks for out in acc.feed(c)]
    response, done = acc.finish()
    text = {"type": "text", "text": "Let me look."}
    tool = {"type": "tool_use", "id": "call_9", "name": "read_file", "input": {"path": "a.txt"}}
    assert shown + done == [
        StreamEvent("text_delta", text="Let me look."),
        StreamEvent("block_done", block=text),
        StreamEvent("block_done", block=tool),
    ]
    assert response == ModelResponse(
        id="chatcmpl-1",
        content=[text, tool],
        stop_reason="tool_use",
        usage=Usage(36, 20, None, 64),
        model="deepseek-chat",
        extra={"reasoning_content": "Need the file."},
    )


def test_chat_accumulator_truncated_and_invalid_arguments() -> None:
    call = {"index": 0, "id": "call_1", "function": {"name": "read_file", "arguments": '{"path": "a'}}
    cut = ChatAccumulator(["read_file"])
    cut.feed(_chunk({"tool_calls": [call]}, finish="length"))
    response, _ = cut.finish()
    assert (response.content, response.stop_reason, response.truncated_tool_use_ids) == (
        [],
        "max_tokens",
        ["call_1"],
    )
    bad = ChatAccumulator(["read_file"])
    bad.feed(_chunk({"tool_calls": [call]}, finish="tool_calls"))
    response, _ = bad.finish()
    assert response.content == [
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"_invalid_json": '{"path": "a'}}
    ]
