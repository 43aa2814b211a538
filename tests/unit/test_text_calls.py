"""Tool calls written as text (issue 17 part 3): each shape accepted and each rejected, with the exact error text
the model gets; the streamed-text hold point; the bound on malformed rounds."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.providers.text_calls import (
    MAX_MALFORMED_ROUNDS,
    TextCall,
    hold_point,
    malformed_rounds,
    recover_calls,
)

READ = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
EDIT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "old_text": {"type": "string"},
        "new_text": {"type": "string"},
    },
    "required": ["path", "old_text", "new_text"],
}
TOOLS: dict[str, Any] = {"read_file": READ, "edit_file": EDIT}
CALL = '{"name": "read_file", "arguments": {"path": "a.py"}}'
CALL_B = '{"name": "read_file", "arguments": {"path": "b.py"}}'
A, B = TextCall("read_file", {"path": "a.py"}), TextCall("read_file", {"path": "b.py"})


@pytest.mark.parametrize(
    ("text", "calls", "prose"),
    [
        (CALL, [A], ""),
        ("  " + CALL + "\n", [A], ""),
        (f"```json\n{CALL}\n```", [A], ""),
        (f"```\n{CALL}\n```", [A], ""),
        (f"```tool_call\n{CALL}\n```", [A], ""),
        (f"<tool_call>\n{CALL}\n</tool_call>", [A], ""),
        (f"<tool_call>\n{CALL}", [A], ""),  # an unclosed tag at the end of the reply
        (
            f"I'll read it first.\n```json\n{CALL}\n```\nThen I'll edit.",
            [A],
            "I'll read it first.\n\nThen I'll edit.",
        ),
        (f"Reading: {CALL} now.", [A], "Reading:  now."),
        (f"```json\n{CALL}\n```\n```json\n{CALL_B}\n```", [A, B], ""),
        (f"First {CALL}, then {CALL_B}.", [A, B], "First , then ."),
        (f"[{CALL}, {CALL_B}]", [A, B], ""),
        ('{"name": "read_file", "parameters": {"path": "a.py"}}', [A], ""),
        ('{"name": "read_file", "input": {"path": "a.py"}}', [A], ""),
        ('{"name": "read_file", "args": {"path": "a.py"}}', [A], ""),
        ('{"tool": "read_file", "arguments": {"path": "a.py"}}', [A], ""),
        ('{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}', [A], ""),
        (
            '{"type": "function", "function": {"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}}',
            [A],
            "",
        ),
        ('{"name": "read_file", "arguments": [{"path": "a.py"}]}', [A], ""),
        ('{"name": "read_file", "arguments": ["a.py"]}', [A], ""),  # one required property: unambiguous
        ('{"name": "read_file", "arguments": "a.py"}', [A], ""),
        ('{"name": "read_file"}', [TextCall("read_file", {})], ""),  # the tool's validation names the field
        ('{"name": "read_file", "arguments": null}', [TextCall("read_file", {})], ""),
    ],
)
def test_accepted_shapes(text: str, calls: list[TextCall], prose: str) -> None:
    """Issue 17: every unambiguous shape is executed; the prose around stays the reply's text."""
    found = recover_calls(text, TOOLS)
    assert found is not None
    assert (found.calls, found.text) == (calls, prose)


HINT_EDIT = '{"path": <string>, "old_text": <string>, "new_text": <string>}'


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            '{"name": "edit_file", "arguments": ["a.py", "x", "y"]}',
            "malformed tool call: edit_file was not run: its arguments are a list of 3 items, not a JSON object. "
            f"Call the tool again with the arguments as one JSON object, e.g. {HINT_EDIT}.",
        ),
        (
            '{"name": "edit_file", "arguments": "a.py x y"}',
            'malformed tool call: edit_file was not run: its arguments are the string "a.py x y", not a JSON '
            f"object. Call the tool again with the arguments as one JSON object, e.g. {HINT_EDIT}.",
        ),
        (
            '{"name": "read_file", "arguments": [{"path": "a.py"}, {"path": "b.py"}]}',
            "malformed tool call: read_file was not run: its arguments are a list of 2 items, not a JSON object. "
            'Call the tool again with the arguments as one JSON object, e.g. {"path": <string>}.',
        ),
        (
            '{"name": "read_file", "arguments": 42}',
            "malformed tool call: read_file was not run: its arguments are int 42, not a JSON object. "
            'Call the tool again with the arguments as one JSON object, e.g. {"path": <string>}.',
        ),
        (
            '```json\n{"name": "read_file", "arguments": {"path": "a.py"}\n```',
            "malformed tool call: read_file was not run: its JSON does not parse (Expecting ',' delimiter: "
            "line 1 column 52 (char 51)). Call the tool again with the arguments as one JSON object, e.g. "
            '{"path": <string>}.',
        ),
        (
            '<tool_call>\n{"name": "edit_file", "arguments": {"path": "a.py",}}\n</tool_call>',
            "malformed tool call: edit_file was not run: its JSON does not parse (Expecting property name "
            "enclosed in double quotes: line 1 column 52 (char 51)). Call the tool again with the arguments as "
            f"one JSON object, e.g. {HINT_EDIT}.",
        ),
    ],
)
def test_rejected_shapes_get_an_error_the_model_can_act_on(text: str, error: str) -> None:
    """Issue 17: an attempted call of an offered tool that cannot be executed is answered, not swallowed."""
    found = recover_calls(text, TOOLS)
    assert found is not None
    assert [(c.name, c.input, c.error) for c in found.calls] == [(found.calls[0].name, {}, error)]


@pytest.mark.parametrize(
    "text",
    [
        "Plain prose, no call.",
        '{"name": "delete_all", "arguments": {}}',  # not an offered tool: data, left as text
        'Example: {"name": "bash", "arguments": {}} is a call.',
        'The config is {"name": "agentd", "version": 1}.',  # other keys: data
        '```python\nprint({"name": "read_file", "arguments": {}})\n```',  # JSON inside code
        "```json\n{not json at all}\n```",  # unparsable, names no offered tool
    ],
)
def test_text_that_is_not_an_attempted_call_stays_text(text: str) -> None:
    assert recover_calls(text, TOOLS) is None


def test_hold_point_shows_prose_before_a_possible_call() -> None:
    assert hold_point("Sure, reading it.\n```json\n{") == len("Sure, reading it.\n")
    assert hold_point("I'll call <tool_call>") == len("I'll call ")
    assert hold_point("partial <tool") == len("partial ")
    assert hold_point('calls: [{"name"') == len("calls: ")
    assert hold_point("no call here") == len("no call here")


def _round(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "read_file", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "x", "content": text, "is_error": True}],
        },
    ]


def test_malformed_rounds_counts_the_trailing_rounds_answered_only_with_that_error() -> None:
    bad = "malformed tool call: read_file was not run: ..."
    history = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        *_round("file text"),
        *_round(bad),
    ]
    assert malformed_rounds(history) == 1
    assert malformed_rounds(history + _round(bad) + _round(bad)) == MAX_MALFORMED_ROUNDS
    assert malformed_rounds(history + _round("ok")) == 0
