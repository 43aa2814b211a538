"""The Context: history invariants and token accounting (CONTRACTS.md §6, §7; cases C12, C13)."""

from __future__ import annotations

from typing import Any

from agentd.core.compaction import should_compress
from agentd.core.context import Context
from agentd.core.tokens import estimate_request, estimate_tokens
from agentd.core.validate import validate_request
from agentd.providers.base import Usage

try:
    from agentd.testing.emulator import validate_request as emu_validate
except ImportError:  # the emulator package's __init__ is not written yet
    from agentd.testing.emulator.validate import validate_request as emu_validate

SYSTEM = [{"type": "text", "text": "You are agentd."}]
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(tid: str, path: str = "a.py") -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "read_file", "input": {"path": path}}


def result(tid: str, content: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content}


def test_add_user_merges_consecutive_user_content_tool_results_first() -> None:
    ctx = Context()
    ctx.add_user([text("read a and b")])
    assert ctx.add_assistant([use("a"), use("b")]) is True
    ctx.add_user([result("a")])
    ctx.add_user([text("also look at c")])
    ctx.add_user([result("b", "B")])
    assert ctx.messages == [
        {"role": "user", "content": [text("read a and b")]},
        {"role": "assistant", "content": [use("a"), use("b")]},
        {"role": "user", "content": [result("a"), result("b", "B"), text("also look at c")]},
    ]
    assert validate_request({"messages": ctx.messages}) is None


def test_add_user_puts_tool_results_first_in_a_new_message() -> None:
    ctx = Context()
    ctx.add_user([text("go")])
    ctx.add_assistant([use("a")])
    ctx.add_user([text("note"), result("a")])
    assert ctx.messages[-1] == {"role": "user", "content": [result("a"), text("note")]}
    assert validate_request({"messages": ctx.messages}) is None


def test_add_user_drops_empty_text_and_stores_nothing_empty() -> None:
    ctx = Context()
    ctx.add_user([text("")])
    ctx.add_user([])
    assert ctx.messages == []
    ctx.add_user([text(""), text("hi"), text("")])
    assert ctx.messages == [{"role": "user", "content": [text("hi")]}]


def test_add_assistant_refuses_empty_content_c13() -> None:
    ctx = Context()
    ctx.add_user([text("read a")])
    ctx.add_assistant([use("a")])
    ctx.add_user([result("a")])
    before = ctx.messages
    assert ctx.add_assistant([]) is False
    assert ctx.add_assistant([text("")]) is False
    assert ctx.messages == before
    # The next prompt merges into the tool_result message; the request stays valid (C13).
    ctx.add_user([text("next question")])
    assert ctx.messages == [
        {"role": "user", "content": [text("read a")]},
        {"role": "assistant", "content": [use("a")]},
        {"role": "user", "content": [result("a"), text("next question")]},
    ]
    request = ctx.to_request(model="m", system=SYSTEM, tools=TOOLS, max_tokens=10)
    assert validate_request(request.body()) is None
    assert emu_validate(request.body()) is None


def test_add_assistant_keeps_extra_fields_and_drops_empty_text() -> None:
    ctx = Context()
    ctx.add_user([text("q")])
    assert ctx.add_assistant([text(""), use("a")], {"reasoning_content": "thinking"}) is True
    assert ctx.last() == {"role": "assistant", "content": [use("a")], "reasoning_content": "thinking"}


def test_messages_property_is_a_deep_copy() -> None:
    ctx = Context()
    blocks = [text("hi")]
    ctx.add_user(blocks)
    blocks[0]["text"] = "changed by the caller"
    snapshot = ctx.messages
    snapshot[0]["content"][0]["text"] = "mutated"
    snapshot.append({"role": "assistant", "content": [text("x")]})
    last = ctx.last()
    assert last is not None
    last["content"].clear()
    assert ctx.messages == [{"role": "user", "content": [text("hi")]}]
    assert len(ctx) == 1


def test_open_tool_use_ids() -> None:
    ctx = Context()
    assert ctx.open_tool_use_ids() == []
    ctx.add_user([text("q")])
    assert ctx.open_tool_use_ids() == []
    ctx.add_assistant([text("three reads"), use("a"), use("b"), use("c")])
    assert ctx.open_tool_use_ids() == ["a", "b", "c"]
    ctx.add_user([result("b")])
    assert ctx.open_tool_use_ids() == ["a", "c"]
    ctx.add_user([result("a"), result("c")])
    assert ctx.open_tool_use_ids() == []
    ctx.add_assistant([text("done")])
    assert ctx.open_tool_use_ids() == []


def _history(ctx: Context, rounds: int) -> None:
    ctx.add_user([text("start")])
    for k in range(rounds):
        ctx.add_assistant([use(f"t{k}")])
        ctx.add_user([result(f"t{k}", "x" * 40)])


def test_estimate_before_any_response_is_the_request_estimate() -> None:
    ctx = Context()
    _history(ctx, 2)
    request = ctx.to_request(model="m", system=SYSTEM, tools=TOOLS, max_tokens=10)
    assert ctx.estimated_tokens() == estimate_request(request.body())
    assert ctx.last_request_estimate == estimate_request(request.body())


def test_estimated_tokens_exact_after_record_usage_c12() -> None:
    ctx = Context()
    _history(ctx, 1)
    ctx.to_request(model="m", system=SYSTEM, tools=TOOLS, max_tokens=10)
    ctx.add_assistant([text("the answer")])
    usage = Usage(
        input_tokens=3, output_tokens=550, cache_creation_input_tokens=12304, cache_read_input_tokens=0
    )
    ctx.record_usage(usage, estimated_prompt=12307)  # estimate == observed: the factor stays 1.0
    assert ctx.estimator.factor == 1.0
    assert ctx.estimated_tokens() == 3 + 12304 + 0 + 550
    later = text("y" * 400)
    ctx.add_user([later])
    assert ctx.estimated_tokens() == 12857 + estimate_tokens(later)


def test_estimate_of_later_messages_uses_the_calibrated_factor() -> None:
    ctx = Context()
    _history(ctx, 1)
    ctx.add_assistant([text("a")])
    ctx.record_usage(
        Usage(input_tokens=200, output_tokens=10, cache_creation_input_tokens=0, cache_read_input_tokens=0),
        100,
    )
    assert ctx.estimator.factor == 2.0
    later = text("z" * 396)  # canonical JSON 424 bytes -> 106 tokens
    ctx.add_user([later])
    assert estimate_tokens(later) == 106
    assert ctx.estimated_tokens() == 210 + 212


def test_prompt_merged_after_an_empty_reply_is_estimated() -> None:
    # C13 path: the empty reply is not stored, the next prompt merges into the message that the last
    # response already covered; its tokens must still count, or compression triggers too late.
    ctx = Context()
    _history(ctx, 1)
    assert ctx.add_assistant([]) is False
    usage = Usage(input_tokens=100, output_tokens=0, cache_creation_input_tokens=0, cache_read_input_tokens=0)
    ctx.record_usage(usage, 100)
    assert ctx.estimated_tokens() == 100
    prompt = text("p" * 4000)
    ctx.add_user([prompt])
    assert ctx.estimated_tokens() == 100 + estimate_tokens(prompt)


def test_cache_hits_still_trigger_compression_c12() -> None:
    ctx = Context()
    _history(ctx, 5)  # 11 messages > keep_recent 8
    ctx.add_assistant([text("done")])
    usage = Usage(
        input_tokens=3, output_tokens=20, cache_creation_input_tokens=0, cache_read_input_tokens=12000
    )
    ctx.record_usage(usage, usage.prompt_tokens)
    assert ctx.estimated_tokens() == 12023
    assert should_compress(ctx, threshold_tokens=12000, keep_recent=8) is True
    # The seed's counter (input + output only) would never reach the threshold.
    assert (usage.input_tokens or 0) + (usage.output_tokens or 0) == 23
    assert should_compress(ctx, threshold_tokens=12024, keep_recent=8) is False


def test_no_compression_with_keep_recent_or_fewer_messages() -> None:
    ctx = Context()
    _history(ctx, 3)  # 7 messages
    ctx.add_assistant([text("done")])  # 8
    ctx.record_usage(Usage(3, 20, 0, 50000), 50023)
    assert len(ctx) == 8
    assert should_compress(ctx, threshold_tokens=12000, keep_recent=8) is False
    assert should_compress(ctx, threshold_tokens=12000, keep_recent=7) is True


def test_replace_prefix_forgets_the_known_size() -> None:
    ctx = Context()
    _history(ctx, 2)
    ctx.add_assistant([text("done")])
    usage = Usage(
        input_tokens=3, output_tokens=20, cache_creation_input_tokens=0, cache_read_input_tokens=12000
    )
    ctx.record_usage(usage, usage.prompt_tokens)
    assert ctx.estimated_tokens() == 12023
    summary = {"role": "user", "content": [text("[Summary of earlier conversation]\nS")]}
    ctx.replace_prefix(3, summary, None)
    assert ctx.messages == [
        summary,
        {"role": "assistant", "content": [use("t1")]},
        {"role": "user", "content": [result("t1", "x" * 40)]},
        {"role": "assistant", "content": [text("done")]},
    ]
    assert (ctx.compaction.compactions, ctx.compaction.replaced_total) == (1, 3)
    request = ctx.to_request(model="m", system=SYSTEM, tools=TOOLS, max_tokens=10)
    assert ctx.estimated_tokens() == estimate_request(request.body())
