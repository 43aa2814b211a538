"""H19: odd input from the model never ends a turn. A lone surrogate in a tool input, a path swapped for a
symbolic link between a tool's own checks, and any other failure while a call is prepared become an
`is_error` tool_result; the turn goes on, the next request is valid and the session resumes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentd.permissions.approver import QueueApprover
from agentd.testing.emulator import validate_request as emu_validate
from tests.integration.conftest import answers_of, text


def _prompt(t: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t}]


def _use(name: str, **inp: Any) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": inp}}


def _results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in b.items() if k != "cache_control"}
        for b in body["messages"][-1]["content"]
        if b.get("type") == "tool_result"
    ]


def _audit(data_dir: Path, sid: str) -> list[dict[str, Any]]:
    lines = (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines]


@pytest.mark.parametrize(
    ("name", "inp", "loc"),
    [
        ("read_file", {"path": "a\udcff.txt"}, "path"),
        ("run_command", {"command": "echo \udcff"}, "command"),
        ("write_file", {"path": "b.txt", "content": "x\ud800y"}, "content"),
        ("todo_write", {"todos": [{"content": "t\udfff", "status": "pending"}]}, "todos.0.content"),
    ],
)
async def test_a_lone_surrogate_in_a_tool_input_is_an_is_error_result(
    make_harness, workspace: Path, data_dir: Path, name: str, inp: dict[str, Any], loc: str
) -> None:
    """H19: the call does not run, the model learns which field is not valid Unicode, the stored reply holds
    U+FFFD instead (so the log, the audit record and every later request encode), and the session resumes."""
    approver = QueueApprover.of("allow_once")
    h = make_harness(answers_of([_use(name, **inp)], [text("ok")]), approver=approver)
    assert await h.session.prompt(_prompt("go")) == "end_turn"
    (result,) = _results(h.requests[1])
    assert result["is_error"] is True
    assert result["content"].startswith(f"invalid_arguments: {loc}: not valid Unicode (a lone surrogate U+")
    assert approver.requests == [] and not (workspace / "b.txt").exists()
    assert [emu_validate(r) for r in h.requests] == [None, None]
    sent = json.dumps(h.requests[1], ensure_ascii=False)
    sent.encode("utf-8")  # no lone surrogate left anywhere
    assert "\ufffd" in sent
    (record,) = _audit(data_dir, h.session.id)
    assert record["decidedBy"] == "invalid_input"
    sid = h.session.id
    h.session.close()
    again = make_harness(answers_of([text("still here")]), resume=sid)
    assert await again.session.prompt(_prompt("and now?")) == "end_turn"
    assert emu_validate(again.requests[0]) is None


async def test_a_lone_surrogate_in_the_prompt_is_stored_as_u_fffd(make_harness) -> None:
    """H19: a prompt from argv with undecodable bytes (`agentd run $'\\xff'`) does not end the turn."""
    h = make_harness(answers_of([text("ok")]))
    assert await h.session.prompt(_prompt("fix \udcff")) == "end_turn"
    assert h.requests[0]["messages"][0]["content"][0]["text"].startswith("fix \ufffd")


async def test_a_file_swapped_for_a_link_between_check_and_preview_is_refused(
    make_harness, workspace: Path, tmp_path: Path, data_dir: Path
) -> None:
    """H19: `write_file`'s target becomes a symbolic link to a file outside right after the containment
    check (the race the attack won 7 times in 8): the call is refused with the §11 text, nothing outside
    changes, and the turn goes on."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (workspace / "f.txt").write_text("mine\n")
    h = make_harness(answers_of([_use("write_file", path="f.txt", content="x")], [text("ok")]))
    tool = h.session.p.registry.get("write_file")
    assert tool is not None
    real_check = tool.check

    def check_then_swap(args: Any, ctx: Any) -> None:
        real_check(args, ctx)
        os.unlink(workspace / "f.txt")
        os.symlink(outside, workspace / "f.txt")

    tool.check = check_then_swap  # type: ignore[method-assign]
    assert await h.session.prompt(_prompt("go")) == "end_turn"
    root = h.session.p.tool_ctx.root
    assert _results(h.requests[1]) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_scr_1_1",
            "is_error": True,
            "content": f"Refused: f.txt is outside the workspace ({root}) or reached through a symbolic link;"
            " the call was not run.",
        }
    ]
    assert outside.read_text() == "secret\n"
    (record,) = _audit(data_dir, h.session.id)
    assert (record["decidedBy"], record["outcome"]) == ("invalid_input", "refused_outside_workspace")


async def test_any_failure_while_preparing_a_call_is_an_is_error_result(
    make_harness, workspace: Path
) -> None:
    """H19: an unexpected exception from a tool's preview is the model's error; the turn goes on."""
    h = make_harness(answers_of([_use("write_file", path="n.txt", content="x")], [text("ok")]))
    tool = h.session.p.registry.get("write_file")
    assert tool is not None

    async def broken(args: Any, ctx: Any) -> Any:
        raise RuntimeError("preview exploded")

    tool.preview = broken  # type: ignore[method-assign]
    assert await h.session.prompt(_prompt("go")) == "end_turn"
    (result,) = _results(h.requests[1])
    assert result["content"] == "write_file could not prepare the call: RuntimeError: preview exploded"
    assert result["is_error"] is True and not (workspace / "n.txt").exists()


@pytest.mark.parametrize("levels", [800, 1000, 5000])
async def test_a_tool_input_nested_too_deeply_is_an_is_error_result(
    make_harness, data_dir: Path, levels: int
) -> None:
    """H19: `{"a": {"a": …}}` 800 levels deep (past what deepcopy and the log encoder take) is stored as
    `{}`, answered with `invalid_arguments`, and the session still resumes. H19 follow-up (issue 12
    follow-up, item 8): the scripted provider plays such a reply at any depth (it crashed with a
    RecursionError from about 1000 levels), so the model gets the same clear error."""
    deep: Any = 1
    for _ in range(levels):
        deep = {"a": deep}
    h = make_harness(answers_of([{"tool_use": {"name": "read_file", "input": deep}}], [text("ok")]))
    assert await h.session.prompt(_prompt("go")) == "end_turn"
    (result,) = _results(h.requests[1])
    assert result["content"] == "invalid_arguments: input: nested deeper than 64 levels; send a flatter input"
    assert h.requests[1]["messages"][1]["content"][0]["input"] == {}
    sid = h.session.id
    h.session.close()
    again = make_harness(answers_of([text("fine")]), resume=sid)
    assert await again.session.prompt(_prompt("next")) == "end_turn"
