"""The cache breakpoint planner of `Context.to_request` (CONTRACTS.md §6; cases C11, C14): placement, with
the fixed `cache.ttl` policies (the "auto" policy: tests/unit/test_cache_ttl.py).

Every request built here also passes agentd's validator and the emulator's `validate_request`.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.clock import ManualClock
from agentd.core.breakpoints import TtlMode
from agentd.core.context import Context
from agentd.core.todos import REMINDER_TEXT, apply_reminder
from agentd.core.validate import validate_request
from agentd.providers.base import ModelRequest

try:
    from agentd.testing.emulator import validate_request as emu_validate
except ImportError:  # the emulator package's __init__ is not written yet
    from agentd.testing.emulator.validate import validate_request as emu_validate

SYSTEM = [{"type": "text", "text": "You are agentd."}, {"type": "text", "text": "Workspace: /ws"}]
TOOLS = [
    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "todo_write", "description": "Write the TODO list.", "input_schema": {"type": "object"}},
]
H1 = {"type": "ephemeral", "ttl": "1h"}
M5 = {"type": "ephemeral", "ttl": "5m"}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "read_file", "input": {"path": f"{tid}.py"}}


def result(tid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": f"contents of {tid}"}


def cache_points(body: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """(path, cache_control) of every breakpoint in wire order tools -> system -> messages."""
    out = [
        (f"tools.{k}", t["cache_control"])
        for k, t in enumerate(body.get("tools", []))
        if "cache_control" in t
    ]
    out += [
        (f"system.{k}", b["cache_control"])
        for k, b in enumerate(body.get("system", []))
        if "cache_control" in b
    ]
    for i, m in enumerate(body["messages"]):
        for j, b in enumerate(m["content"]):
            if "cache_control" in b:
                out.append((f"messages.{i}.content.{j}", b["cache_control"]))
    return out


def build(
    ctx: Context, system: list[dict[str, Any]] = SYSTEM, tools: list[dict[str, Any]] = TOOLS
) -> ModelRequest:
    request = ctx.to_request(model="m", system=system, tools=tools, max_tokens=100)
    assert_valid(request.body())
    return request


def assert_valid(body: dict[str, Any]) -> None:
    assert validate_request(body) is None
    assert emu_validate(body) is None


def tool_round(ctx: Context, ids: list[str]) -> None:
    ctx.add_assistant([use(i) for i in ids])
    ctx.add_user([result(i) for i in ids])


def test_system_gets_1h_and_moving_breakpoint_on_the_last_block() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("read a")])
    tool_round(ctx, ["a"])
    request = build(ctx)
    assert cache_points(request.body()) == [("system.1", H1), ("messages.2.content.0", H1)]
    assert request.system == [SYSTEM[0], {**SYSTEM[1], "cache_control": H1}]
    assert request.tools == TOOLS
    assert request.messages[2] == {"role": "user", "content": [{**result("a"), "cache_control": H1}]}


def test_without_system_the_last_tool_is_the_anchor() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("hi")])
    request = build(ctx, system=[])
    assert cache_points(request.body()) == [("tools.1", H1), ("messages.0.content.0", H1)]


def test_to_request_does_not_touch_inputs_or_history() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("hi")])
    system = json.loads(json.dumps(SYSTEM))
    tools = json.loads(json.dumps(TOOLS))
    build(ctx, system, tools)
    assert (system, tools) == (SYSTEM, TOOLS)
    assert ctx.messages == [{"role": "user", "content": [text("hi")]}]


def test_moving_breakpoint_is_before_the_request_only_reminder_c11() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("fix the bug")])
    for k in range(3):
        tool_round(ctx, [f"r{k}"])
    request = build(ctx)
    request.messages = apply_reminder(request.messages)
    assert_valid(request.body())
    assert request.messages[-1] == {
        "role": "user",
        "content": [{**result("r2"), "cache_control": H1}, {"type": "text", "text": REMINDER_TEXT}],
    }
    assert cache_points(request.body()) == [("system.1", H1), ("messages.6.content.0", H1)]
    # The stored history never sees the reminder or a breakpoint.
    assert ctx.messages[-1] == {"role": "user", "content": [result("r2")]}


def test_never_on_an_empty_text_block_c14() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("hi")])
    ctx.add_assistant([text(""), use("a"), text("")])
    ctx.add_user([result("a"), text("")])
    request = build(ctx)
    assert request.messages == [
        {"role": "user", "content": [text("hi")]},
        {"role": "assistant", "content": [use("a")]},
        {"role": "user", "content": [{**result("a"), "cache_control": H1}]},
    ]


def test_planner_walks_back_past_an_empty_text_block() -> None:
    # Only replay can bring an empty text block in (a stored summary message); the planner skips it.
    ctx = Context(ttl="1h")
    ctx.add_user([text("old")])
    ctx.replace_prefix(1, {"role": "user", "content": [text("summary"), text("")]}, None)
    request = ctx.to_request(model="m", system=SYSTEM, tools=TOOLS, max_tokens=100)
    assert request.messages == [
        {"role": "user", "content": [{**text("summary"), "cache_control": H1}, text("")]}
    ]


def test_fixed_5m_policy_marks_every_breakpoint_5m() -> None:
    ctx = Context(ttl="5m")
    ctx.add_user([text("hi")])
    build(ctx)
    tool_round(ctx, [f"p{k}" for k in range(10)])  # 20 blocks: anchor + intermediate + moving
    request = build(ctx)
    assert cache_points(request.body()) == [
        ("system.1", M5),
        ("messages.0.content.0", M5),
        ("messages.2.content.7", M5),
        ("messages.2.content.9", M5),
    ]
    no_system = build(ctx, system=[])
    assert cache_points(no_system.body())[0] == ("tools.1", M5)


def test_anchor_at_the_previous_end_when_few_blocks_were_added() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("hi")])
    build(ctx)
    tool_round(ctx, ["a", "b"])  # 4 blocks added
    request = build(ctx)
    assert cache_points(request.body()) == [
        ("system.1", H1),
        ("messages.0.content.0", H1),
        ("messages.2.content.1", H1),
    ]


def test_intermediate_breakpoint_when_more_than_18_blocks_were_added() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("hi")])
    build(ctx)  # moving breakpoint at flat block 0
    tool_round(ctx, [f"p{k}" for k in range(9)])  # 18 blocks added: flat 1..18
    request = build(ctx)
    assert cache_points(request.body()) == [
        ("system.1", H1),
        ("messages.0.content.0", H1),
        ("messages.2.content.8", H1),
    ]
    tool_round(ctx, [f"q{k}" for k in range(10)])  # 20 more: flat 19..38, moving at 38 > 18 + 18
    request = build(ctx)
    assert cache_points(request.body()) == [
        ("system.1", H1),
        ("messages.2.content.8", H1),  # previous end (flat 18)
        ("messages.4.content.7", H1),  # flat 36 = 18 + 18
        ("messages.4.content.9", H1),  # moving (flat 38)
    ]


def test_same_history_serialises_to_identical_bytes() -> None:
    def session() -> Context:
        ctx = Context(ttl="1h")
        ctx.add_user([text("héllo ✓")])
        tool_round(ctx, ["a", "b"])
        return ctx

    a, b = session(), session()
    assert json.dumps(build(a).body()) == json.dumps(build(b).body())
    # Asking again for the same history (after a previous request) gives the same bytes too.
    ctx = Context(ttl="1h")
    ctx.add_user([text("hi")])
    build(ctx)
    tool_round(ctx, ["a", "b"])
    first = json.dumps(build(ctx).body())
    second = json.dumps(build(ctx).body())
    assert first == second
    assert cache_points(json.loads(second)) == [
        ("system.1", H1),
        ("messages.0.content.0", H1),
        ("messages.2.content.1", H1),
    ]


def test_prompt_caching_off_gives_no_cache_control() -> None:
    ctx = Context(prompt_caching=False)
    ctx.add_user([text("hi")])
    build(ctx)
    tool_round(ctx, [f"p{k}" for k in range(12)])
    raw = json.dumps(build(ctx).body())
    assert "cache_control" not in raw
    assert json.loads(raw)["system"] == SYSTEM


def test_replace_prefix_resets_the_previous_end() -> None:
    ctx = Context(ttl="1h")
    ctx.add_user([text("hi")])
    for k in range(5):
        build(ctx)
        tool_round(ctx, [f"t{k}"])
    ctx.replace_prefix(9, {"role": "user", "content": [text("[Summary of earlier conversation]\nS")]}, None)
    request = build(ctx)
    assert cache_points(request.body()) == [("system.1", H1), ("messages.2.content.0", H1)]


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    rounds=st.lists(st.integers(min_value=0, max_value=14), min_size=1, max_size=8),
    ttl=st.sampled_from(["1h", "5m", "auto"]),
    gaps=st.lists(st.sampled_from([1.0, 200.0, 400.0, 2000.0, 5000.0]), min_size=8, max_size=8),
    with_system=st.booleans(),
    reminder_every=st.integers(min_value=1, max_value=4),
)
def test_every_request_of_a_session_is_accepted(
    rounds: list[int], ttl: TtlMode, gaps: list[float], with_system: bool, reminder_every: int
) -> None:
    clock = ManualClock()
    ctx = Context(ttl=ttl, now=clock.now)
    ctx.add_user([text("start")])
    n = 0
    for r, width in enumerate(rounds):
        clock.advance(gaps[r])
        request = build(ctx, system=SYSTEM if with_system else [])
        if r % reminder_every == 0:
            request.messages = apply_reminder(request.messages)
        body = request.body()
        assert_valid(body)
        points = cache_points(body)
        assert 2 <= len(points) <= 4
        ttls = [cc["ttl"] for _, cc in points]
        assert ttls == sorted(ttls, key=lambda t: t != "1h")  # every 1h before every 5m
        # The last breakpoint is on the last block of the stored history, never on the reminder.
        last_i = len(ctx) - 1
        last_j = len(ctx.messages[-1]["content"]) - 1
        assert points[-1][0] == f"messages.{last_i}.content.{last_j}"
        if width == 0:
            ctx.add_assistant([text(f"answer {r}")])
            ctx.add_user([text(f"question {r}")])
        else:
            ids = [f"u{n + k}" for k in range(width)]
            n += width
            tool_round(ctx, ids)
