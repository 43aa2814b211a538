"""The emulators' request validation (TESTING.md §3.5, §3.8, §3.9): every row of the §3.5 table gets a
minimal violating request with its exact text and a corrected request that passes; checks run in order."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.testing.emulator import ApiError, count_tokens, validate_chat_request, validate_request

CC = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "emu-sonnet", "max_tokens": 100, "messages": list(messages), **extra}


def user(*content: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "content": content[0] if len(content) == 1 and isinstance(content[0], str) else list(content),
    }


def assistant(*content: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content[0] if len(content) == 1 and isinstance(content[0], str) else list(content),
    }


def text(t: str, cc: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "text", "text": t, **({"cache_control": cc} if cc else {})}


def tool_use(ident: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": "read_file", "input": {"path": "a.txt"}}


def tool_result(ident: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": ident, "content": "alpha"}


def bad_request(message: str) -> ApiError:
    return ApiError(400, "invalid_request_error", message)


ROWS = [
    pytest.param(
        body(user("go"), assistant(tool_use("toolu_1"), tool_use("toolu_2")), user("hi")),
        body(
            user("go"),
            assistant(tool_use("toolu_1"), tool_use("toolu_2")),
            user(tool_result("toolu_1"), tool_result("toolu_2")),
        ),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1, toolu_2. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        id="tool_use-without-tool_result",
    ),
    pytest.param(
        body(user("go"), assistant("ok"), user(tool_result("toolu_9"))),
        body(user("go"), assistant(tool_use("toolu_9")), user(tool_result("toolu_9"))),
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
        id="tool_result-without-tool_use",
    ),
    pytest.param(
        body(user("go"), assistant(tool_use("toolu_1")), user(text("note"), tool_result("toolu_1"))),
        body(user("go"), assistant(tool_use("toolu_1")), user(tool_result("toolu_1"), text("note"))),
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. "
        "Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.",
        id="tool_result-first",
    ),
    pytest.param(
        body(user("go"), assistant(), user("more")),
        body(user("go"), assistant("ok"), user("more")),
        "messages.1: all messages must have non-empty content except for the optional final assistant message",
        id="empty-message",
    ),
    pytest.param(
        body(user(text("look"), text(""))),
        body(user(text("look"), text("here"))),
        "messages: text content blocks must be non-empty",
        id="empty-text-block",
    ),
    pytest.param(
        body(user(*(text(f"t{i}", CC) for i in range(4))), cache_control=CC),
        body(user(*(text(f"t{i}", CC) for i in range(3))), cache_control=CC),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        id="max-4-cache_control",
    ),
    pytest.param(
        body(user(text("look"), text("", CC))),
        body(user(text("look", CC))),
        "messages.0.content.1.text: cache_control cannot be set for empty text blocks",
        id="cache_control-on-empty-text",
    ),
    pytest.param(
        body(user(text("hi", CC_1H)), system=[text("sys", CC)]),
        body(user(text("hi", CC)), system=[text("sys", CC_1H)]),
        "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block. Note that blocks are processed in the following order: `tools`, `system`, `messages`.",
        id="ttl-order",
    ),
    pytest.param(
        body(assistant("hello"), user("go")),
        body(user("go")),
        'messages: first message must use the "user" role',
        id="first-message-user",
    ),
    pytest.param(
        body(user("a"), user("b")),
        body(user("a"), assistant("ok"), user("b")),
        'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row',
        id="alternation",
    ),
    pytest.param(
        {**body(user("go"), assistant("Sure,")), "model": "claude-opus-4-6"},
        {**body(user("go"), assistant("Sure,"), user("go on")), "model": "claude-opus-4-6"},
        "This model does not support assistant message prefill. The conversation must end with a user message.",
        id="no-prefill-4.6",
    ),
]


@pytest.mark.parametrize(("bad", "good", "message"), ROWS)
def test_each_rule_exact_text_and_corrected_request(
    bad: dict[str, Any], good: dict[str, Any], message: str
) -> None:
    assert validate_request(bad) == bad_request(message)
    assert validate_request(good) is None


def test_prompt_too_long() -> None:
    request = body(user("x" * 100))  # {"text":"x…","type":"text"}: 25 + 100 bytes -> 32 tokens
    assert count_tokens(request) == 32
    assert validate_request(request, context_window=31) == bad_request(
        "prompt is too long: 32 tokens > 31 maximum"
    )
    assert validate_request(request, context_window=32) is None


def test_sampling_parameters_rejected_under_2026_10_21() -> None:
    for name in ("temperature", "top_p", "top_k"):
        request = body(user("go"), **{name: 1})
        assert validate_request(request, anthropic_version="2026-10-21") == bad_request(
            f"{name}: Extra inputs are not permitted"
        )
        assert validate_request(request, anthropic_version="2023-06-01") is None


def test_lenient_mode_skips_first_message_and_alternation() -> None:
    assert validate_request(body(assistant("hello"), user("go")), strict=False) is None
    assert validate_request(body(user("a"), user("b")), strict=False) is None


def test_final_assistant_message_may_be_empty_and_prefill_is_allowed_before_4_6() -> None:
    assert validate_request(body(user("go"), assistant())) is None
    assert (
        validate_request({**body(user("go"), assistant("Sure,")), "model": "claude-sonnet-4-5-20250929"})
        is None
    )
    assert validate_request(body(user("go"), assistant("Sure,")), prefill=False) == bad_request(
        "This model does not support assistant message prefill. The conversation must end with a user message."
    )


def test_first_violation_in_table_order_wins() -> None:
    # an empty text block (row 5) and two user messages in a row (row 10): row 5 is reported
    assert validate_request(body(user(text("")), user("b"))) == bad_request(
        "messages: text content blocks must be non-empty"
    )
    # a tool_use without result (row 1) in an assistant-first list (row 9): row 1 is reported
    assert validate_request(body(assistant(tool_use("toolu_1")), user("x"))) == bad_request(
        "messages.0: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )


def test_top_level_cache_control_lands_on_the_last_block() -> None:
    # automatic 1h breakpoint on messages.0.content.1, after an explicit 5m one
    assert validate_request(body(user(text("a", CC), text("b")), cache_control=CC_1H)) == bad_request(
        "messages.0.content.1.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block. Note that blocks are processed in the following order: `tools`, `system`, `messages`."
    )
    assert validate_request(body(user(text("a", CC_1H), text("b")), cache_control=CC)) is None
    # a top-level TTL that conflicts with the explicit one on the last block: documented without a text
    conflict = validate_request(body(user(text("a"), text("b", CC)), cache_control=CC_1H))
    assert conflict is not None
    assert (conflict.status, conflict.type) == (400, "invalid_request_error")
    assert validate_request(body(user(text("a"), text("b", CC)), cache_control=CC)) is None


def test_cache_control_on_thinking_is_rejected() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig", "cache_control": CC}
    err = validate_request(body(user("go"), assistant(thinking, text("ok")), user("more")))
    assert err is not None
    assert (err.status, err.type) == (400, "invalid_request_error")


def test_missing_required_field() -> None:
    assert validate_request({"model": "m", "messages": [user("go")]}) == bad_request(
        "max_tokens: Field required"
    )


# --- OpenAI-compatible (§3.8) ---

CALL = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "emu-gpt", "messages": list(messages)}


def test_openai_missing_tool_response() -> None:
    calls = {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "call_2"}]}
    bad = chat(
        {"role": "user", "content": "go"}, calls, {"role": "tool", "tool_call_id": "call_1", "content": "a"}
    )
    assert validate_chat_request(bad) == bad_request(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_2"
    )
    good = chat(*bad["messages"], {"role": "tool", "tool_call_id": "call_2", "content": "b"})
    assert validate_chat_request(good) is None


def test_openai_tool_message_without_tool_calls() -> None:
    bad = chat({"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "call_1", "content": "a"})
    assert validate_chat_request(bad) == bad_request(
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
    )
    good = chat(
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        bad["messages"][1],
    )
    assert validate_chat_request(good) is None


def test_deepseek_thinking_mode_needs_reasoning_content() -> None:
    calls = {"role": "assistant", "content": "", "tool_calls": [CALL]}
    bad = chat(
        {"role": "user", "content": "go"}, calls, {"role": "tool", "tool_call_id": "call_1", "content": "a"}
    )
    assert validate_chat_request(bad) is None
    assert validate_chat_request(bad, thinking=True) == bad_request(
        "The `reasoning_content` in the thinking mode must be passed back to the API."
    )
    good = chat(bad["messages"][0], {**calls, "reasoning_content": "why"}, bad["messages"][2])
    assert validate_chat_request(good, thinking=True) is None
