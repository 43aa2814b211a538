"""agentd's request validator against every rule of CONTRACTS.md §8, and agreement with the emulator.

Each rule has a minimal violating request (agentd's exact text) and a corrected one that passes. The emulator's
independent `validate_request` (TESTING.md §3.5) must agree on valid/invalid, and its text starts with agentd's.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agentd.core.validate import validate_messages, validate_request

try:
    from agentd.testing.emulator import validate_request as emu_validate
except ImportError:  # the emulator package's __init__ is not written yet
    from agentd.testing.emulator.validate import validate_request as emu_validate

CC_5M = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}


def text(t: str, cc: dict[str, str] | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "text", "text": t}
    if cc is not None:
        b["cache_control"] = dict(cc)
    return b


def use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "read_file", "input": {"path": "a.py"}}


def result(tid: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, **extra, "messages": messages}


TOOL = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}

# Message rules: (id, bad messages, agentd's exact text, corrected messages)
MESSAGE_RULES: list[tuple[str, list[dict[str, Any]], str, list[dict[str, Any]]]] = [
    (
        "tool_use_unanswered",
        [user(text("hi")), assistant(use("t1"), use("t2")), user(result("t1"), text("next"))],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t2",
        [user(text("hi")), assistant(use("t1"), use("t2")), user(result("t1"), result("t2"), text("next"))],
    ),
    (
        "tool_use_unanswered_at_the_end",
        [user(text("hi")), assistant(text("reading"), use("t1"))],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1",
        [user(text("hi")), assistant(text("reading"), use("t1")), user(result("t1"))],
    ),
    (
        "tool_result_without_tool_use",
        [user(text("hi")), assistant(use("t1")), user(result("t1"), result("t9"))],
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: t9",
        [user(text("hi")), assistant(use("t1")), user(result("t1"))],
    ),
    (
        "tool_result_in_first_message",
        [user(result("t1"))],
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: t1",
        [user(text("t1 was interrupted"))],
    ),
    (
        "tool_result_not_first",
        [user(text("hi")), assistant(use("t1")), user(text("also this"), result("t1"))],
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message",
        [user(text("hi")), assistant(use("t1")), user(result("t1"), text("also this"))],
    ),
    (
        "empty_assistant_in_the_middle",  # C13
        [user(text("hi")), assistant(), user(text("more"))],
        "messages.1: all messages must have non-empty content except for the optional final assistant message",
        [user(text("hi")), assistant(text("done")), user(text("more"))],
    ),
    (
        "empty_string_content",
        [{"role": "user", "content": ""}],
        "messages.0: all messages must have non-empty content except for the optional final assistant message",
        [{"role": "user", "content": "hi"}],
    ),
    (
        "empty_text_block",
        [user(text("hi"), text(""))],
        "messages: text content blocks must be non-empty",
        [user(text("hi"))],
    ),
    (
        "empty_text_block_inside_tool_result",
        [user(text("hi")), assistant(use("t1")), user(result("t1", [text("")]))],
        "messages: text content blocks must be non-empty",
        [user(text("hi")), assistant(use("t1")), user(result("t1", [text("(no output)")]))],
    ),
    (
        "first_message_not_user",
        [assistant(text("hello")), user(text("hi"))],
        'messages: first message must use the "user" role',
        [user(text("hi")), assistant(text("hello"))],
    ),
    (
        "consecutive_user_messages",
        [user(text("a")), user(text("b"))],
        'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row',
        [user(text("a"), text("b"))],
    ),
    (
        "consecutive_assistant_messages",
        [user(text("a")), assistant(text("b")), assistant(text("c"))],
        'messages: roles must alternate between "user" and "assistant", but found multiple "assistant" roles in a row',
        [user(text("a")), assistant(text("b"), text("c"))],
    ),
    (
        "no_messages",
        [],
        "messages: at least one message is required",
        [user(text("a"))],
    ),
]

# Cache rules (whole bodies): (id, bad body, agentd's exact text, corrected body)
CACHE_RULES: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
    (
        "more_than_4_breakpoints",
        body(
            [user(text("a", CC_5M)), assistant(text("b", CC_5M)), user(text("c", CC_5M))],
            system=[text("S", CC_1H)],
            tools=[{**TOOL, "cache_control": CC_1H}],
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        body(
            [user(text("a", CC_5M)), assistant(text("b")), user(text("c", CC_5M))],
            system=[text("S", CC_1H)],
            tools=[{**TOOL, "cache_control": CC_1H}],
        ),
    ),
    (
        "more_than_4_breakpoints_inside_tool_results",
        body(
            [
                user(text("a")),
                assistant(use("t1")),
                user(result("t1", [text(str(k), CC_5M) for k in range(5)])),
            ]
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        body(
            [
                user(text("a")),
                assistant(use("t1")),
                user(result("t1", [text(str(k), CC_5M) for k in range(4)])),
            ]
        ),
    ),
    (
        "cache_control_on_empty_text",  # C14
        body([user(text("hi")), assistant(text("", CC_5M), use("t1")), user(result("t1"))]),
        "messages.1.content.0.text: cache_control cannot be set for empty text blocks",
        body([user(text("hi")), assistant({**use("t1"), "cache_control": CC_5M}), user(result("t1"))]),
    ),
    (
        "1h_after_5m_in_messages",  # C14
        body([user(text("a", CC_5M)), assistant(text("b")), user(text("c", CC_1H))], system=[text("S")]),
        "messages.2.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block",
        body([user(text("a", CC_1H)), assistant(text("b")), user(text("c", CC_5M))], system=[text("S")]),
    ),
    (
        "1h_system_after_5m_tool",
        body([user(text("a"))], system=[text("S", CC_1H)], tools=[{**TOOL, "cache_control": CC_5M}]),
        "system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block",
        body([user(text("a"))], system=[text("S", CC_5M)], tools=[{**TOOL, "cache_control": CC_1H}]),
    ),
    (
        "empty_system_text",
        body([user(text("a"))], system=[text("S"), text("")]),
        "system: text content blocks must be non-empty",
        body([user(text("a"))], system=[text("S")]),
    ),
]


def _emu_error(b: dict[str, Any]) -> str | None:
    err = emu_validate(b)
    return None if err is None else err.message


@pytest.mark.parametrize(
    ("bad", "expected", "good"), [c[1:] for c in MESSAGE_RULES], ids=[c[0] for c in MESSAGE_RULES]
)
def test_message_rule(bad: list[dict[str, Any]], expected: str, good: list[dict[str, Any]]) -> None:
    assert validate_messages(bad) == expected
    assert validate_request(body(bad)) == expected
    assert validate_messages(good) is None
    assert validate_request(body(good)) is None


@pytest.mark.parametrize(
    ("bad", "expected", "good"), [c[1:] for c in MESSAGE_RULES], ids=[c[0] for c in MESSAGE_RULES]
)
def test_emulator_agrees_on_message_rule(
    bad: list[dict[str, Any]], expected: str, good: list[dict[str, Any]]
) -> None:
    emu_text = _emu_error(body(bad))
    assert emu_text is not None
    assert emu_text[: len(expected)] == expected
    assert _emu_error(body(good)) is None


@pytest.mark.parametrize(
    ("bad", "expected", "good"), [c[1:] for c in CACHE_RULES], ids=[c[0] for c in CACHE_RULES]
)
def test_cache_rule(bad: dict[str, Any], expected: str, good: dict[str, Any]) -> None:
    assert validate_request(bad) == expected
    assert validate_request(good) is None


@pytest.mark.parametrize(
    ("bad", "expected", "good"), [c[1:] for c in CACHE_RULES], ids=[c[0] for c in CACHE_RULES]
)
def test_emulator_agrees_on_cache_rule(bad: dict[str, Any], expected: str, good: dict[str, Any]) -> None:
    emu_text = _emu_error(bad)
    assert emu_text is not None
    assert emu_text[: len(expected)] == expected
    assert _emu_error(good) is None


def test_validate_messages_ignores_cache_control() -> None:
    # validate_messages checks the message rules only; the breakpoint rules need the whole body.
    messages = [user(text("a", CC_5M)), assistant(text("b")), user(text("c", CC_1H))]
    assert validate_messages(messages) is None
    assert validate_request(body(messages)) == (
        "messages.2.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block"
    )


def test_final_assistant_may_be_empty() -> None:
    for final in (assistant(), {"role": "assistant", "content": ""}):
        messages = [user(text("hi")), final]
        assert validate_messages(messages) is None
        assert validate_request(body(messages)) is None
        assert emu_validate(body(messages)) is None


def test_parallel_tool_results_in_any_order_pass() -> None:
    messages = [
        user(text("hi")),
        assistant(text("three reads"), use("a"), use("b"), use("c")),
        user(result("c"), result("a"), result("b"), text("and then summarise")),
        assistant(text("done")),
    ]
    assert validate_messages(messages) is None
    assert emu_validate(body(messages)) is None


def test_bare_ephemeral_counts_as_5m() -> None:
    bad = body(
        [user(text("a", CC_5M)), assistant(text("b", {"type": "ephemeral", "ttl": "1h"})), user(text("c"))]
    )
    expected = (
        "messages.1.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block"
    )
    assert validate_request(bad) == expected
    emu = _emu_error(bad)
    assert emu is not None and emu[: len(expected)] == expected


def test_validator_does_not_mutate_its_input() -> None:
    b = body(
        [user(text("a")), assistant(use("t1")), user(text("x"), result("t1"))], system=[text("S", CC_1H)]
    )
    before = copy.deepcopy(b)
    assert (
        validate_request(b)
        == "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message"
    )
    assert b == before
