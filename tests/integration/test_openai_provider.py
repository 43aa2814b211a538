"""OpenAICompatProvider: the request translation, and the real `openai` SDK against the OpenAI-compatible
emulator over HTTP (TESTING.md §3.8): streaming text and tool calls, usage flavours, retries and errors,
DeepSeek `reasoning_content` round trip (cases C15), the `tool_calls_as_text` fallback.
"""

from __future__ import annotations

from typing import Any

from agentd.providers.base import ModelRequest
from agentd.providers.openai_compat import OpenAICompatProvider, tool_calls_from_text

TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        "cache_control": {"type": "ephemeral"},
    }
]
SYSTEM = [{"type": "text", "text": "You are agentd.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def request(messages: list[dict[str, Any]], model: str = "emu-gpt", max_tokens: int = 1024) -> ModelRequest:
    return ModelRequest(model=model, system=SYSTEM, tools=TOOLS, messages=messages, max_tokens=max_tokens)


HISTORY = [
    user("read a.txt and b.txt"),
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading both."},
            {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt"}},
            {
                "type": "tool_use",
                "id": "call_2",
                "name": "read_file",
                "input": {"_invalid_json": "{path: b}"},
            },
        ],
        "reasoning_content": "The user wants two files.",
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "alpha"},
            {
                "type": "tool_result",
                "tool_use_id": "call_2",
                "content": [{"type": "text", "text": "bad input"}],
                "is_error": True,
            },
            {"type": "text", "text": "<reminder>", "cache_control": {"type": "ephemeral"}},
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_3", "name": "read_file", "input": {"path": "c"}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_3", "content": "gamma"}]},
]


def test_translation_to_chat_completions() -> None:
    provider = OpenAICompatProvider("emu-gpt", "k", "http://127.0.0.1:9/v1", temperature=0.0, seed=3)
    assert provider.body(request(HISTORY)) == {
        "model": "emu-gpt",
        "messages": [
            {"role": "system", "content": "You are agentd."},
            {"role": "user", "content": "read a.txt and b.txt"},
            {
                "role": "assistant",
                "content": "Reading both.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{path: b}"},
                    },
                ],
                "reasoning_content": "The user wants two files.",
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "alpha"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: bad input"},
            {"role": "user", "content": "<reminder>"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_3",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "c"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_3", "content": "gamma"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file.",
                    "parameters": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                    },
                },
            }
        ],
        "max_tokens": 1024,
        "temperature": 0.0,
        "seed": 3,
        "stream_options": {"include_usage": True},
    }


def test_official_openai_gets_max_completion_tokens_and_no_unset_options() -> None:
    body = OpenAICompatProvider("gpt-4o-mini", "k").body(request([user("hi")]))
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "You are agentd."}, {"role": "user", "content": "hi"}],
        "tools": body["tools"],
        "max_completion_tokens": 1024,
        "stream_options": {"include_usage": True},
    }


def test_tool_calls_from_text() -> None:
    names = ["read_file"]
    assert tool_calls_from_text('```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```', names) == [
        ("read_file", {"path": "a"})
    ]
    assert tool_calls_from_text(
        '  {"name": "read_file", "parameters": "{\\"path\\": \\"b\\"}"}\n', names
    ) == [("read_file", {"path": "b"})]
    assert tool_calls_from_text('[{"name": "read_file", "input": {"path": "c"}}]', names) == [
        ("read_file", {"path": "c"})
    ]
    assert tool_calls_from_text('{"name": "delete_all", "arguments": {}}', names) is None
    assert tool_calls_from_text('Here: {"name": "read_file", "arguments": {}}', names) is None
    assert tool_calls_from_text("```python\nprint(1)\n```", names) is None
