"""Compression: cut points, the flattened transcript, the summary request and the rebuilt history
(CONTRACTS.md §7, §11; case C02), with a property test of history surgery (TESTING.md §1.3)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core.compaction import (
    find_cut,
    flatten,
    rebuild,
    summary_request,
    summary_text_from,
)
from agentd.core.context import Context
from agentd.core.todos import TodoTracker
from agentd.core.validate import validate_messages, validate_request
from agentd.providers.base import ModelRequest

try:
    from agentd.testing.emulator import validate_request as emu_validate
except ImportError:  # the emulator package's __init__ is not written yet
    from agentd.testing.emulator.validate import validate_request as emu_validate

INSTRUCTION = (
    "Summarize the conversation below in one paragraph. Keep tool calls, file paths and any facts the next "
    "turn needs. Do not call tools. No preamble."
)
ACK = {"role": "assistant", "content": [{"type": "text", "text": "Understood, continuing from here."}]}
SYSTEM = [{"type": "text", "text": "You are agentd."}, {"type": "text", "text": "Workspace: /ws"}]
TOOLS = [
    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "run_command", "description": "Run a command.", "input_schema": {"type": "object"}},
]
H1 = {"type": "ephemeral", "ttl": "1h"}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(tid: str, name: str = "read_file", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp or {"path": f"{tid}.py"}}


def result(tid: str, content: Any = "ok", is_error: bool = False) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "tool_result", "tool_use_id": tid, "content": content}
    if is_error:
        b["is_error"] = True
    return b


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def tool_history(rounds: int) -> list[dict[str, Any]]:
    msgs = [user(text("start"))]
    for k in range(rounds):
        msgs += [assistant(use(f"t{k}")), user(result(f"t{k}"))]
    return msgs


# ---- find_cut ------------------------------------------------------------------------------------
def test_find_cut_walks_back_over_a_tool_result_message() -> None:
    msgs = tool_history(5)  # 11 messages; len - 8 = 3 is the user tool_result of t0 ... index 3 = asst t1
    assert [m["role"] for m in msgs[:5]] == ["user", "assistant", "user", "assistant", "user"]
    assert find_cut(msgs, 8) == 3  # msgs[3] is an assistant: no walk
    assert find_cut(msgs, 7) == 3  # msgs[4] carries a tool_result: walk back to its tool_use
    assert find_cut(msgs, 6) == 5
    assert find_cut(msgs, 5) == 5


def test_find_cut_keeps_a_user_prompt_as_first_kept_message() -> None:
    msgs = [user(text("a")), assistant(text("b")), user(text("c")), assistant(text("d")), user(text("e"))]
    assert find_cut(msgs, 3) == 2


def test_find_cut_none_for_short_histories() -> None:
    msgs = tool_history(3)  # 7 messages
    assert find_cut(msgs, 7) is None
    assert find_cut(msgs, 8) is None
    assert find_cut(msgs[:8], 8) is None
    assert find_cut([], 2) is None


def test_find_cut_none_when_the_walk_reaches_0() -> None:
    msgs = [user(result("x")), user(result("y")), assistant(text("a")), user(text("b"))]
    assert find_cut(msgs, 3) is None


# ---- flatten -------------------------------------------------------------------------------------
def test_flatten_is_readable_text() -> None:
    long = "L" * 2500
    msgs = [
        user(text("Fix the failing test in app.py")),
        assistant(
            text("Reading both files."),
            use("a", path="app.py"),
            use("b", name="run_command", command="pytest -q"),
        ),
        user(result("a", [text("def f():"), text("    return 1")]), result("b", long, is_error=True)),
        assistant(text("Fixed: f returns 2 now.")),
        user({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}),
    ]
    assert flatten(msgs) == (
        "User: Fix the failing test in app.py\n"
        "Assistant: Reading both files.\n"
        'Assistant called read_file {"path": "app.py"}\n'
        'Assistant called run_command {"command": "pytest -q"}\n'
        "Tool result: def f():\n    return 1\n"
        "Tool error: [2500 characters; the first 2000:] " + "L" * 2000 + "\n"
        "Assistant: Fixed: f returns 2 now.\n"
        "User: [image]"
    )


# ---- summary_request -----------------------------------------------------------------------------
def _session() -> Context:
    ctx = Context(ttl="1h")
    ctx.add_user([text("Fix app.py")])
    for k in range(6):
        ctx.add_assistant([text(f"step {k}"), use(f"t{k}")])
        ctx.add_user([result(f"t{k}", f"out {k}")])
    return ctx


def test_summary_request_reuses_the_sessions_tools_and_system_bytes() -> None:
    ctx = _session()
    turn = ctx.to_request(model="claude-x", system=SYSTEM, tools=TOOLS, max_tokens=8192)
    history = ctx.messages
    cut = find_cut(history, 8)
    assert cut == 5
    old = history[:cut]
    request = summary_request(old, model="claude-x", system=SYSTEM, tools=TOOLS, max_tokens=512)
    assert request == ModelRequest(
        model="claude-x",
        system=[SYSTEM[0], {**SYSTEM[1], "cache_control": H1}],
        tools=TOOLS,
        messages=[{"role": "user", "content": [text(INSTRUCTION + "\n\n" + flatten(old))]}],
        max_tokens=512,
        purpose="summary",
    )
    assert json.dumps(request.system) == json.dumps(turn.system)
    assert json.dumps(request.tools) == json.dumps(turn.tools)
    assert "tool_choice" not in request.body()
    assert request.messages[0]["content"][0]["text"].startswith(INSTRUCTION + "\n\nUser: Fix app.py\n")
    assert validate_request(request.body()) is None
    assert emu_validate(request.body()) is None
    assert SYSTEM[1] == {"type": "text", "text": "Workspace: /ws"}  # the session's system is not mutated


def test_summary_request_without_system_anchors_on_the_last_tool() -> None:
    ctx = _session()
    turn = ctx.to_request(model="m", system=[], tools=TOOLS, max_tokens=100)
    request = summary_request(ctx.messages[:5], model="m", system=[], tools=TOOLS, max_tokens=512)
    assert request.tools == turn.tools == [TOOLS[0], {**TOOLS[1], "cache_control": H1}]
    assert TOOLS[1] == {
        "name": "run_command",
        "description": "Run a command.",
        "input_schema": {"type": "object"},
    }


def test_summary_request_without_caching_is_the_plain_session_prefix() -> None:
    old = _session().messages[:3]
    request = summary_request(
        old, model="m", system=SYSTEM, tools=TOOLS, max_tokens=512, prompt_caching=False
    )
    assert (request.system, request.tools) == (SYSTEM, TOOLS)
    assert "cache_control" not in json.dumps(request.body())


def test_summary_text_ignores_tool_use_in_the_reply() -> None:
    reply = [text("The user asked to fix app.py. "), use("x"), text("t0..t5 read files.")]
    assert summary_text_from(reply) == "The user asked to fix app.py. \nt0..t5 read files."


# ---- rebuild -------------------------------------------------------------------------------------
def test_rebuild_adds_the_ack_when_the_kept_part_starts_with_a_user_message() -> None:
    msgs = [user(text("a")), assistant(text("b")), user(text("c")), assistant(text("d"))]
    rebuilt = rebuild(msgs, 2, "A asked, B answered.", None)
    assert rebuilt.cut == 2
    assert rebuilt.summary == user(text("[Summary of earlier conversation]\nA asked, B answered."))
    assert rebuilt.ack == ACK


def test_rebuild_without_ack_when_the_kept_part_starts_with_an_assistant() -> None:
    msgs = tool_history(5)
    rebuilt = rebuild(msgs, 3, "S", None)
    assert (rebuilt.summary, rebuilt.ack) == (user(text("[Summary of earlier conversation]\nS")), None)


def test_rebuild_restates_the_todo_snapshot_verbatim() -> None:
    tracker = TodoTracker()
    ok, _ = tracker.write(
        {"todos": [{"content": "编写 README", "status": "done"}, {"content": "tests", "status": "pending"}]}
    )
    assert ok is True
    rebuilt = rebuild(tool_history(5), 3, "S", tracker.carry_over_text())
    assert rebuilt.summary == user(
        text(
            "[Summary of earlier conversation]\nS\n\nCurrent TODO list (todo_write snapshot):\n"
            '{"todos":[{"content":"\\u7f16\\u5199 README","status":"done"},{"content":"tests","status":"pending"}]}'
        )
    )


# ---- property test: history surgery (TESTING.md §1.3) --------------------------------------------
@st.composite
def valid_sessions(draw: st.DrawFn) -> Context:
    """A Context built through its public API from random turns: user prompts, text replies, rounds of
    parallel tool_use/tool_result blocks, empty replies (C13) and empty-text traps (which the Context
    drops, so they never reach the history)."""
    ctx = Context()
    counter = 0

    def trap() -> list[dict[str, Any]]:
        return [text("")] if draw(st.booleans()) else []

    turns = draw(st.integers(min_value=1, max_value=5))
    for turn in range(turns):
        ctx.add_user([*trap(), text(f"prompt {turn}"), *trap()])
        for _ in range(draw(st.integers(min_value=0, max_value=4))):  # tool rounds in this turn
            width = draw(st.integers(min_value=1, max_value=4))
            ids = [f"toolu_{counter + k:03d}" for k in range(width)]
            counter += width
            lead = [text(f"working {counter}")] if draw(st.booleans()) else []
            ctx.add_assistant([*lead, *trap(), *(use(i) for i in ids), *trap()])
            order = draw(st.permutations(ids))
            ctx.add_user([result(i, f"output of {i}", is_error=draw(st.booleans())) for i in order] + trap())
        kind = draw(st.sampled_from(["text", "empty"]))
        if kind == "text":
            ctx.add_assistant([text(f"answer {turn}"), *trap()])
        else:
            assert ctx.add_assistant(trap()) is False  # C13: an empty reply is never stored
    if draw(st.booleans()):
        ctx.add_user([*trap(), text(f"prompt {turns}")])
    return ctx


def _result_ids(message: dict[str, Any]) -> set[str]:
    return {b["tool_use_id"] for b in message["content"] if b.get("type") == "tool_result"}


def _use_ids(message: dict[str, Any]) -> set[str]:
    return {b["id"] for b in message["content"] if b.get("type") == "tool_use"}


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    session=valid_sessions(), keep_recent=st.integers(min_value=2, max_value=12), summary=st.text(max_size=30)
)
def test_every_proposed_cut_rebuilds_a_valid_history(
    session: Context, keep_recent: int, summary: str
) -> None:
    history = session.messages
    body = {"model": "m", "max_tokens": 10, "messages": history}
    assert validate_messages(history) is None
    assert emu_validate(body) is None
    assert all(b != text("") for m in history for b in m["content"])

    cut = find_cut(history, keep_recent)
    walk = len(history) - keep_recent
    while walk > 0 and _result_ids(history[walk]):
        walk -= 1
    if len(history) <= keep_recent or walk == 0:
        assert cut is None
        return
    assert cut == walk

    rebuilt = rebuild(history, cut, summary, None)
    original = json.dumps(history[cut:])
    session.replace_prefix(rebuilt.cut, rebuilt.summary, rebuilt.ack)
    new = session.messages
    head = 2 if rebuilt.ack is not None else 1

    assert validate_messages(new) is None
    assert emu_validate({"model": "m", "max_tokens": 10, "messages": new}) is None
    assert json.dumps(new[head:]) == original  # the kept suffix is byte-identical
    assert (rebuilt.ack is not None) == (history[cut]["role"] == "user")
    assert new[0] == user(
        text("[Summary of earlier conversation]\n" + (summary or "(no summary was produced)"))
    )
    # No tool pair is split: every tool_result kept has its tool_use kept, right before it.
    for i, m in enumerate(new):
        if _result_ids(m):
            assert _result_ids(m) == _use_ids(new[i - 1])
    # And the next request built from the rebuilt history is accepted by both validators.
    request = session.to_request(model="m", system=SYSTEM, tools=TOOLS, max_tokens=10)
    assert validate_request(request.body()) is None
    assert emu_validate(request.body()) is None
