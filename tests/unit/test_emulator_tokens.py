"""EMU-TOK-1 (TESTING.md §3.6) on hand-computed cases, and the reply cap that uses it (§3.3).

tokens(block) = max(1, ceil(utf8_len(canon(block)) / 4)) after removing cache_control; a text block
`{"text":"<s>","type":"text"}` is 25 bytes plus the UTF-8 length of s.
"""

from __future__ import annotations

from typing import Any

from agentd.testing.emulator import SUMMARY_TEXT, count_tokens
from agentd.testing.emulator.scenario import build_reply, history_tokens, load_scenario


def test_text_block_and_string_are_the_same() -> None:
    # {"text":"hi","type":"text"} = 27 bytes -> ceil(27 / 4) = 7
    assert count_tokens("hi") == 7
    assert count_tokens({"type": "text", "text": "hi"}) == 7


def test_cache_control_is_not_counted() -> None:
    assert (
        count_tokens({"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}) == 7
    )


def test_utf8_bytes_not_escapes() -> None:
    # "ééé" is 6 UTF-8 bytes (ensure_ascii=False): 25 + 6 = 31 -> 8; escaped it would be 25 + 18 = 43 -> 11
    assert count_tokens("ééé") == 8


def test_minimum_one_token() -> None:
    assert count_tokens({}) == 1  # "{}" = 2 bytes -> ceil(0.5) = 1, at least 1 anyway


def test_tool_use_block() -> None:
    # {"id":"t","input":{},"name":"n","type":"tool_use"} = 50 bytes -> 13
    assert count_tokens({"type": "tool_use", "id": "t", "name": "n", "input": {}}) == 13


def test_request_total_is_tools_plus_system_plus_blocks() -> None:
    body = {
        "model": "emu-sonnet",  # model and max_tokens are not prompt
        "max_tokens": 4096,
        "tools": [{"name": "t", "input_schema": {}}],  # {"input_schema":{},"name":"t"} = 30 bytes -> 8
        "system": "sys",  # 28 bytes -> 7
        "messages": [
            {"role": "user", "content": "hi"},  # 7
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
            },  # 13
        ],
    }
    assert count_tokens(body) == 8 + 7 + 7 + 13
    assert count_tokens([{"type": "text", "text": "hi"}, "hi"]) == 14


def test_openai_counts_whole_messages() -> None:
    # {"content":"hi","role":"user"} = 30 bytes -> 8
    assert count_tokens({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, api="openai") == 8


def test_output_is_the_history_form() -> None:
    reply = build_reply(
        load_scenario([{"reply": [{"text": "hi"}, {"tool_use": {"name": "n", "input": {}}}]}])["answers"][0],
        1,
        id_prefix="toolu_emu",
        max_tokens=None,
        cost=lambda bs: sum(history_tokens(b) for b in bs),
    )
    history = [
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "toolu_emu_1_1", "name": "n", "input": {}},
    ]
    assert [history_tokens(b) for b in reply.blocks] == [count_tokens(b) for b in history]
    # "toolu_emu_1_1" instead of "t": 50 + 12 = 62 bytes -> 16
    assert [history_tokens(b) for b in reply.blocks] == [7, 16]


def test_summary_is_500_tokens() -> None:
    assert count_tokens(SUMMARY_TEXT) == 500


def _reply(answer: dict[str, Any], max_tokens: int | None) -> Any:
    return build_reply(
        load_scenario([answer])["answers"][0],
        1,
        id_prefix="toolu_emu",
        max_tokens=max_tokens,
        cost=lambda bs: sum(history_tokens(b) for b in bs),
    )


def test_max_tokens_cuts_text_to_the_longest_fitting_prefix() -> None:
    reply = _reply({"reply": [{"text": "abcdefghij" * 10}]}, 20)  # 25 + n <= 80 -> n = 55
    assert (reply.blocks, reply.stop_reason) == (
        [{"type": "text", "text": ("abcdefghij" * 10)[:55]}],
        "max_tokens",
    )


def test_max_tokens_cuts_tool_json_and_marks_it_incomplete() -> None:
    reply = _reply({"reply": [{"tool_use": {"name": "n", "input": {"path": "a" * 40}}}]}, 20)
    # shell {"id":"toolu_emu_1_1","input":{},"name":"n","type":"tool_use"} = 62 bytes; 62 - 2 + n <= 80 -> n = 20
    assert reply.blocks == [
        {
            "type": "tool_use",
            "id": "toolu_emu_1_1",
            "name": "n",
            "input": {"path": "a" * 40},
            "json": '{"path":"aaaaaaaaaaa',
            "complete": False,
        }
    ]
    assert reply.stop_reason == "max_tokens"


def test_reply_within_max_tokens_is_untouched() -> None:
    reply = _reply({"reply": [{"text": "hi"}]}, 7)
    assert (reply.blocks, reply.stop_reason, reply.capped) == (
        [{"type": "text", "text": "hi"}],
        "end_turn",
        False,
    )
