"""Defects found in review, each pinned by a test (see the commit that added this file)."""

from __future__ import annotations

import pytest

from agentd.core import compaction
from agentd.core.context import Context
from agentd.core.session import clean_prompt
from agentd.core.tokens import estimate_messages
from agentd.core.validate import validate_request
from agentd.errors import UsageError
from agentd.permissions.approver import ApprovalRequest, render_prompt
from agentd.providers.base import Usage
from agentd.testing.emulator import validate_request as emu_validate
from agentd.tools.base import Preview, model_text, visible


def _body(*texts: str) -> dict:
    return {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "text", "text": t} for t in texts]}],
    }


def test_whitespace_only_text_is_rejected_by_both_validators() -> None:
    text = "messages: text content blocks must contain non-whitespace text"
    emu = emu_validate(_body("hi", " \n\t"))
    assert (validate_request(_body("hi", " \n\t")), emu.message if emu else None) == (text, text)
    assert (validate_request(_body("hi", " x ")), emu_validate(_body("hi", " x "))) == (None, None)


def test_context_never_stores_whitespace_only_text() -> None:
    ctx = Context()
    ctx.add_user([{"type": "text", "text": "go"}, {"type": "text", "text": "  "}])
    stored = ctx.add_assistant([{"type": "text", "text": "\n\n"}])
    ctx.add_assistant(
        [{"type": "text", "text": "\n\n"}, {"type": "tool_use", "id": "t", "name": "x", "input": {}}]
    )
    assert (stored, ctx.messages) == (
        False,
        [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]},
        ],
    )


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t"])
def test_an_empty_prompt_is_a_usage_error(prompt: str) -> None:
    with pytest.raises(UsageError) as err:
        clean_prompt([{"type": "text", "text": prompt}])
    assert err.value.exit_code == 2


def test_undecodable_input_becomes_replacement_characters() -> None:
    assert clean_prompt([{"type": "text", "text": "caf\udce9"}]) == [{"type": "text", "text": "caf\ufffd"}]
    assert model_text("ls: caf\udce9.txt") == "ls: caf\ufffd.txt"


def test_secrets_are_redacted_and_large_output_keeps_head_and_tail() -> None:
    out = model_text(
        "ANTHROPIC_API_KEY=sk-ant-abcdef123456\n" + "z" * 100, secrets=["sk-ant-abcdef123456"], max_bytes=40
    )
    assert out == "ANTHROPIC_API_KEY=[r\n[... 89 of 129 bytes omitted ...]\nzzzzzzzzzzzzzzzzzzzz"


def test_the_approval_prompt_shows_control_characters() -> None:
    preview = Preview(summary="x", command="rm -rf ~ #\r\x1b[K$ ls -la", cwd="/w")
    req = ApprovalRequest(
        session_id="s", tool_use_id="t", tool_name="run_command", title="Run", preview=preview
    )
    assert (
        render_prompt(req)
        == "[agentd] Run\n$ rm -rf ~ #\\r\\x1b[K$ ls -la\n(cwd /w)\nAllow? [o]nce / [a]lways / [d]eny: "
    )
    assert visible("a\nb\x07", one_line=True) == "a\\nb\\x07"


def test_unknown_usage_keeps_the_local_estimate() -> None:
    ctx = Context()
    ctx.add_user([{"type": "text", "text": "x" * 4000}])
    before = ctx.estimated_tokens()
    ctx.record_usage(Usage(None, None, None, None), 0)
    assert ctx.estimated_tokens() == before > 900


def test_a_summary_alone_is_never_summarised_again() -> None:
    head = compaction.rebuild([{"role": "user", "content": [{"type": "text", "text": "q"}]}], 0, "s", None)
    assert compaction.only_summary([head.summary, *([head.ack] if head.ack else [])]) is True
    assert (
        compaction.only_summary(
            [head.summary, {"role": "assistant", "content": [{"type": "text", "text": "x"}]}]
        )
        is False
    )


def test_the_running_block_count_matches_the_history() -> None:
    """The block index kept as the history changes (issue 16: flat view, starts, estimates) stays equal to a
    full count after merges, a rollback and a compression."""

    def full(c: Context) -> list[tuple[int, int]]:
        return [(i, j) for i, m in enumerate(c.view()) for j in range(len(m["content"]))]

    ctx = Context()
    ctx.add_user([{"type": "text", "text": "a"}])
    ctx.add_assistant(
        [{"type": "text", "text": "b"}, {"type": "tool_use", "id": "t", "name": "x", "input": {}}]
    )
    ctx.add_user([{"type": "tool_result", "tool_use_id": "t", "content": "r"}])
    assert ctx.estimated_tokens() == estimate_messages(ctx.messages)  # estimates known up to here
    ctx.add_user([{"type": "text", "text": "merged"}])
    ctx.add_assistant([{"type": "text", "text": "c"}])
    ctx.drop_last()
    counts = [len(ctx._index.flat)]
    assert ctx._index.flat == full(ctx) and ctx.estimated_tokens() == estimate_messages(ctx.messages)
    head = compaction.rebuild(ctx.messages, 2, "s", None)
    ctx.replace_prefix(head.cut, head.summary, head.ack)
    counts.append(len(ctx._index.flat))
    assert counts == [5, 4] and ctx._index.flat == full(ctx)
    assert ctx._index.starts == [0, 1, 2] and ctx.estimated_tokens() == estimate_messages(ctx.messages)
