"""Issue 9 H1 (case C16): repeated tool_use ids. Both request validators refuse them with the service's
texts, and the core's id rule (`agentd.core.replies`) gives every repeat a fresh, deterministic id."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.core.replies import IdRepair, Renamed, cut_notice, fresh_tool_use_id, unique_tool_use_ids
from agentd.core.validate import validate_messages, validate_request
from agentd.testing.emulator import validate_chat_request
from agentd.testing.emulator import validate_request as emu_validate


def use(tid: str, path: str = "a.py") -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "read_file", "input": {"path": path}}


def result(tid: str, content: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "emu-sonnet", "max_tokens": 100, "messages": messages}


CASES = [
    (
        "repeat_in_one_message",
        [user(text("go")), assistant(use("t1"), use("t1")), user(result("t1"), result("t1"))],
        "messages.1.content.1: `tool_use` ids must be unique",
    ),
    (
        "repeat_across_messages",
        [
            user(text("go")),
            assistant(use("t1")),
            user(result("t1")),
            assistant(use("t1")),
            user(result("t1")),
        ],
        "messages.3.content.0: `tool_use` ids must be unique",
    ),
    (
        "two_results_for_one_use",
        [user(text("go")), assistant(use("t1")), user(result("t1"), result("t1", "again"))],
        "messages.2.content.1: each tool_use must have a single result. Found multiple `tool_result` blocks "
        "with id: t1",
    ),
]


@pytest.mark.parametrize(("messages", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_both_validators_refuse_repeated_ids(messages: list[dict[str, Any]], expected: str) -> None:
    """H1 / C16: agentd's validator and the emulator's independent one refuse a repeated tool_use id anywhere
    in the request, and a second tool_result for one tool_use, with the service's texts."""
    assert (validate_messages(messages), validate_request(body(messages))) == (expected, expected)
    err = emu_validate(body(messages))
    assert err is not None and (err.status, err.message) == (400, expected)


def test_emulator_chat_validator_refuses_a_repeated_tool_call_id() -> None:
    """H1 / C16, OpenAI-compatible side: a tool_call id used twice in one chat request is a 400."""

    def call(cid: str) -> dict[str, Any]:
        return {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}

    repeated = {
        "model": "emu-gpt",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1"), call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
    }
    err = validate_chat_request(repeated)
    assert err is not None and err.status == 400 and "'c1' is used more than once" in err.message
    unique = {**repeated, "messages": [*repeated["messages"][:1], repeated["messages"][1] | {"tool_calls": [call("c1")]},
                                       repeated["messages"][2]]}  # fmt: skip
    assert validate_chat_request(unique) is None


def test_unique_ids_keep_the_first_use_and_rename_repeats() -> None:
    """H1 / C16: the first use of an id keeps it; a repeat in the reply is renamed and marked `repeat`; an id
    already in the history is renamed but is no repeat (that call runs)."""
    blocks = [text("two reads"), use("a"), use("a", "b.py"), use("h"), use("a_dup1"), use("a")]
    out, renames = unique_tool_use_ids(blocks, {"h"})
    assert [b.get("id") for b in out] == [None, "a", "a_dup1", "h_dup1", "a_dup1_dup1", "a_dup2"]
    assert renames == [
        Renamed(old="a", new="a_dup1", repeat=True),
        Renamed(old="h", new="h_dup1", repeat=False),
        Renamed(old="a_dup1", new="a_dup1_dup1", repeat=False),
        Renamed(old="a", new="a_dup2", repeat=True),
    ]
    assert out[0] is blocks[0] and out[1] is blocks[1] and blocks[2]["id"] == "a"  # input untouched
    assert fresh_tool_use_id("x", {"x_dup1"}, {"x_dup2"}) == "x_dup3"


def test_id_repair_renames_results_to_follow_their_uses() -> None:
    """H1 / C16 (replay): the k-th result for a repeated id answers its k-th use; a surplus result is dropped."""
    repair = IdRepair()
    uses = repair.assistant([use("t"), use("t", "b.py")], set())
    assert [b["id"] for b in uses] == ["t", "t_dup1"]
    fixed = repair.user([result("t", "first"), result("t", "second"), result("t", "third"), text("next")])
    assert fixed == [result("t", "first"), result("t_dup1", "second"), text("next")]
    messages = [user(text("go")), assistant(*uses), user(*fixed)]
    assert validate_messages(messages) is None and emu_validate(body(messages)) is None


def test_cut_notice_names_each_call() -> None:
    """H3: the note names the calls that were cut off and did not run (CONTRACTS.md §11)."""
    assert cut_notice(["write_file"]) == (
        "Your previous reply hit max_tokens: the write_file call was cut off before its input was complete and "
        "was not run. Send it again with a shorter input, or split the work into smaller calls."
    )
    assert "the calls to write_file, run_command were cut off" in cut_notice(["write_file", "run_command"])
