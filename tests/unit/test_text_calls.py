"""Tool calls written as text (issue 17 part 3): each shape accepted and each rejected, with the exact error text
the model gets; the streamed-text hold point; the bound on malformed rounds."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.providers.openai_compat import ChatAccumulator
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
        ('{"name": "read_file", "path": "a.py"}', [A], ""),  # flat: every key is a parameter
        ('{"tool": "read_file", "path": "a.py"}', [A], ""),
        (
            '{"name": "read_file", "arguments": {"path": "a.py"}, "reason": "look"}',
            [A],
            "",
        ),  # extra key ignored
        (
            '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}, "thought": "x"}\n</tool_call>',
            [A],
            "",
        ),
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
        (
            '{"name": "read_file", "file": "a.py"}',
            'malformed tool call: read_file was not run: it has no "arguments" object and "file" is not among its '
            'parameters. Call the tool again with the arguments as one JSON object, e.g. {"path": <string>}.',
        ),
        (
            'Editing now: {"name": "edit_file", "path": "a.py", "old": "x", "new": "y"} and done.',
            'malformed tool call: edit_file was not run: it has no "arguments" object and "old", "new" are not '
            "among its parameters. Call the tool again with the arguments as one JSON object, e.g. "
            f"{HINT_EDIT}.",
        ),
    ],
)
def test_rejected_shapes_get_an_error_the_model_can_act_on(text: str, error: str) -> None:
    """Issue 17: an attempted call of an offered tool that cannot be executed is answered, not swallowed."""
    found = recover_calls(text, TOOLS)
    assert found is not None
    assert [(c.name, c.input, c.error) for c in found.calls] == [(found.calls[0].name, {}, error)]


def test_one_reply_with_a_good_and_a_malformed_call_runs_the_good_one_and_answers_the_other() -> None:
    """Issue 17 part 3: several calls in one reply are judged one by one, in order; the prose stays text."""
    text = (
        f'Reading a.py.\n```json\n{CALL}\n```\nThen:\n```json\n{{"name": "read_file", "arguments": 3}}\n```'
    )
    found = recover_calls(text, TOOLS)
    assert found is not None
    assert found.calls == [
        A,
        TextCall(
            "read_file",
            {},
            "malformed tool call: read_file was not run: its arguments are int 3, not a JSON object. Call the "
            'tool again with the arguments as one JSON object, e.g. {"path": <string>}.',
        ),
    ]
    assert found.text == "Reading a.py.\n\nThen:"


@pytest.mark.parametrize(
    "text",
    [
        "Plain prose, no call.",
        '{"name": "delete_all", "arguments": {}}',  # not an offered tool: data, left as text
        'Example: {"name": "bash", "arguments": {}} is a call.',
        'The config is {"name": "agentd", "version": 1}.',  # names no offered tool: data
        'The package is {"name": "idna", "path": "idna/"}.',
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


def _reply(acc: Any, text: str) -> Any:
    acc.feed({"id": "r", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]})
    acc.feed({"id": "r", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    response, _ = acc.finish()
    return response


def test_recovered_calls_keep_unique_ids_across_replies_and_provider_instances() -> None:
    """Issue 17 part 3: ids of calls recovered from text never repeat: within a reply, across the replies of
    one provider (the counter lives on it) and across provider instances (a resumed session: a new prefix)."""
    import itertools

    from agentd.providers.openai_compat import OpenAICompatProvider

    two = f"```json\n{CALL}\n```\n```json\n{CALL_B}\n```"
    ids: list[str] = []
    for _ in range(2):  # two processes working on one session
        provider = OpenAICompatProvider("m", "k", "http://127.0.0.1:9/v1")
        counter = itertools.count(1)
        for _ in range(2):  # two replies of one process
            acc = ChatAccumulator(TOOLS, counter, provider.text_call_prefix)
            ids += [b["id"] for b in _reply(acc, two).content if b["type"] == "tool_use"]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert all(i.startswith("call_text_") for i in ids)


def test_a_malformed_call_reaches_the_loop_as_an_error_to_answer_then_as_text_once_retries_are_used() -> None:
    """Issue 17 part 3: the accumulator hands the loop the exact error text (the loop answers it as an is_error
    result and the turn goes on); with the retries used up (`answer_malformed=False`) the reply is text."""
    bad = '{"name": "read_file", "arguments": ["a.py", "b.py"]}'
    response = _reply(ChatAccumulator(TOOLS), bad)
    [use] = response.content
    assert (use["name"], use["input"], response.stop_reason) == ("read_file", {}, "tool_use")
    assert response.invalid_tool_inputs == {
        use[
            "id"
        ]: "malformed tool call: read_file was not run: its arguments are a list of 2 items, not a JSON "
        'object. Call the tool again with the arguments as one JSON object, e.g. {"path": <string>}.'
    }
    spent = _reply(ChatAccumulator(TOOLS, answer_malformed=False), bad)
    assert (spent.content, spent.stop_reason) == ([{"type": "text", "text": bad}], "end_turn")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,  # deeper than the interpreter's stack
        '{"name": "read_file", "arguments": ' + '{"a": ' * 50_000,
        '<tool_call>\n{"name": "read_file", "arguments": ' + "[" * 50_000 + "\n</tool_call>",
    ],
)
def test_a_degenerate_reply_never_crashes_the_recovery(text: str) -> None:
    """issue 17 (break17): a reply of deeply nested brackets raised RecursionError out of the stream (the turn
    failed as an internal error); it is text, or a call whose JSON does not parse."""
    found = recover_calls(text, TOOLS)
    assert found is None or all(c.error for c in found.calls)


@pytest.mark.parametrize(
    "text",
    [
        "x [" * 50_000,  # many openers, no call key
        "function f() { return {a: 1}; }\n" * 3_000,  # code
        '{"a": 1, ' * 20_000 + '"name": "read_file"',  # unclosed objects with a call key at the end
    ],
)
def test_the_recovery_is_not_quadratic_in_the_reply(text: str) -> None:
    """issue 17 (break17): every `{` / `[` of the reply was decoded to the end of the text when it failed (150 KB
    of `x [` took 3 s of the event loop); only where a call may start, and only when a call key is present."""
    import time

    started = time.process_time()
    recover_calls(text, TOOLS)
    assert time.process_time() - started < 1.0  # it was 2-3 s; linear is ~10 ms


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (f"<tool_call>\n```json\n{CALL}\n```\n</tool_call>", [A]),  # a fence inside the tags
        (f'{{"tool_calls": [{CALL}, {CALL_B}]}}', [A, B]),  # the API's own wrapper
        ('{"function_call": {"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}}', [A]),
        (f"```tool-call\n{CALL}\n```", [A]),
    ],
)
def test_more_unambiguous_shapes_run(text: str, calls: list[TextCall]) -> None:
    """issue 17 (break17): a fenced block inside `<tool_call>` tags was answered "its JSON does not parse"; the
    API's wrappers left `{"tool_calls": }` as the reply's text."""
    found = recover_calls(text, TOOLS)
    assert found is not None
    assert (found.calls, found.text) == (calls, "")


NO_TOOL = 'malformed tool call: there is no tool named "read_files"; the tools are: edit_file, read_file.'


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (
            '<tool_call>\n{"name": "read_files", "arguments": {"path": "a.py"}}\n</tool_call>',
            [TextCall("read_files", {}, NO_TOOL)],
        ),
        (
            f'[{CALL}, {{"name": "read_files", "arguments": {{"path": "b.py"}}}}]',
            [A, TextCall("read_files", {}, NO_TOOL)],
        ),
    ],
)
def test_a_call_of_a_tool_that_is_not_offered_is_answered_where_it_is_unambiguous(
    text: str, calls: list[TextCall]
) -> None:
    """issue 17 (break17): a call in Qwen's `<tool_call>` tags naming a tool that does not exist, or a list of
    calls with one wrong name, was left as text and the turn ended: the model never learnt the name was wrong."""
    found = recover_calls(text, TOOLS)
    assert found is not None
    assert found.calls == calls


@pytest.mark.parametrize(
    "text",
    [
        '```python\nprint({"name": "read_file", "arguments": {"path": "a.py"}})\n',  # the fence never closed
        '```sh\necho \'{"name": "read_file", "arguments": {"path": "a.py"}}\'\n',
        'Results: [{"name": "read_file"}, {"name": "grep"}]',  # data naming a tool, no arguments
    ],
)
def test_code_and_data_stay_text(text: str) -> None:
    """issue 17 (break17): JSON in a code block of another language that the reply left open was run as a
    call (only closed fences were code)."""
    assert recover_calls(text, TOOLS) is None


def test_a_call_with_huge_arguments_is_recovered_whole() -> None:
    """issue 17 (break17): the recovery decodes a short slice first; a call longer than it (a write_file of
    200 KB written as text, with prose and code before it) is still recovered whole."""
    content = 'line of the file with {braces} and "quotes"\n' * 5000
    call = {"name": "edit_file", "arguments": {"path": "a.py", "old_text": "x", "new_text": content}}
    import json as _json

    text = 'Here {"a": 1, is code.\n' * 300 + _json.dumps(call) + "\nDone."
    found = recover_calls(text, TOOLS)
    assert found is not None
    assert found.calls == [TextCall("edit_file", call["arguments"])]


WRITE = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}


@pytest.mark.parametrize(
    ("wrap", "prose"),
    [
        ("```json\n{}\n```", ""),
        ("Writing it:\n```json\n{}\n```\nDone.", "Writing it:\n\nDone."),
        ("<tool_call>\n{}\n</tool_call>", ""),
        ("```json\n{}\n```\nthen\n```json\n{}\n```", "then"),
    ],
)
def test_a_fenced_call_whose_arguments_hold_a_fence_runs(wrap: str, prose: str) -> None:
    """issue 17 (break17): a call in a ```json fence writing a Markdown file (its content holds ``` in a JSON
    string) was cut at that inner ```, answered "its JSON does not parse", and the model, whose JSON was valid,
    could not correct it; also `</tool_call>` inside an argument within the tags."""
    import json as _json

    args = {"path": "README.md", "content": "# T\n\n```bash\nmake test\n```\n</tool_call> is a tag\n"}
    call = _json.dumps({"name": "write_file", "arguments": args})
    found = recover_calls(wrap.replace("{}", call), {"write_file": WRITE})
    assert found is not None
    assert (found.calls, found.text) == ([TextCall("write_file", args)] * wrap.count("{}"), prose)


@pytest.mark.parametrize(
    "arguments",
    [
        '"{\\"path\\": \\"a.py\\"}"',  # once: already accepted
        '"\\"{\\\\\\"path\\\\\\": \\\\\\"a.py\\\\\\"}\\""',  # a JSON string of a JSON string of the object
        '"\\"a.py\\""',  # the sole required property, encoded as a JSON string
    ],
)
def test_arguments_encoded_as_json_more_than_once_run(arguments: str) -> None:
    """issue 17 (break17): arguments written as a JSON string of a JSON string of an object (a model that
    encodes twice) were answered "its arguments are the string ..." although the object was unambiguous."""
    found = recover_calls(f'{{"name": "read_file", "arguments": {arguments}}}', TOOLS)
    assert found is not None and found.calls == [A]
