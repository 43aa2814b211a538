"""OpenAICompatProvider: the request translation, and the real `openai` SDK against the OpenAI-compatible
emulator over HTTP (TESTING.md §3.8): streaming text and tool calls, usage flavours, retries and errors,
DeepSeek `reasoning_content` round trip (cases C15), the `tool_calls_as_text` fallback.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.errors import ProviderError
from agentd.providers.base import ModelRequest, ModelResponse, StreamEvent, Usage, run_with_retries
from agentd.providers.openai_compat import OpenAICompatProvider, tool_calls_from_text
from agentd.testing.emulator import Emulator
from agentd.testing.emulator.tokens import block_tokens, canon, count_tokens

KEY = "sk-test-SECRET-9876543210"
TEXT = "I will read the file first."
TOOL_INPUT = {"path": "src/app.py"}

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
    # issue 17: prose around a call no longer hides it
    assert tool_calls_from_text('Here: {"name": "read_file", "arguments": {}}', names) == [("read_file", {})]
    assert tool_calls_from_text("```python\nprint(1)\n```", names) is None


# ---------------------------------------------------------------- over HTTP, through the real openai SDK


@pytest.fixture
async def provider(openai_emulator: Emulator) -> AsyncIterator[OpenAICompatProvider]:
    p = OpenAICompatProvider("emu-gpt", KEY, openai_emulator.url + "/v1", ManualClock())
    yield p
    await p.aclose()


def reply(**options: Any) -> dict[str, Any]:
    return {"reply": [{"text": TEXT}, {"tool_use": {"name": "read_file", "input": TOOL_INPUT}}], **options}


def chunks(text: str) -> list[StreamEvent]:
    return [StreamEvent("text_delta", text=text[i : i + 16]) for i in range(0, len(text), 16)]


def completion_tokens(text: str, call_id: str | None = None, reasoning: str | None = None) -> int:
    """EMU-TOK-1 output of the emulator's assistant message (its history form)."""
    msg: dict[str, Any] = {"role": "assistant", "content": text if text or not call_id else None}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if call_id:
        msg["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "read_file", "arguments": canon(TOOL_INPUT)},
            }
        ]
    return block_tokens(msg)


async def call(
    provider: OpenAICompatProvider,
    req: ModelRequest,
    clock: ManualClock,
    events: list[StreamEvent],
    max_total_s: float = 60.0,
) -> ModelResponse:
    def on_retry(n: int, delay: float, err: ProviderError) -> None:
        events.append(StreamEvent("retry", attempt=n, delay_s=delay, reason=err.message))

    return await run_with_retries(
        lambda n: provider.stream(req, events.append), clock=clock, max_total_s=max_total_s, on_retry=on_retry
    )


def tool_reply(msg_id: str, call_id: str, body: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        id=msg_id,
        content=[
            {"type": "text", "text": TEXT},
            {"type": "tool_use", "id": call_id, "name": "read_file", "input": TOOL_INPUT},
        ],
        stop_reason="tool_use",
        usage=Usage(count_tokens(body, api="openai"), completion_tokens(TEXT, call_id), None, 0),
        model="emu-gpt",
    )


async def test_streams_text_and_tool_calls(openai_emulator: Emulator, provider: OpenAICompatProvider) -> None:
    openai_emulator.script({"answers": [reply()]})
    req = request([user("Fix the bug in src/app.py")])
    events: list[StreamEvent] = []
    response = await provider.stream(req, events.append)
    body = openai_emulator.journal[0]["body"]
    assert body == {**provider.body(req), "stream": True}
    expected = tool_reply("chatcmpl-emu-1", "call_emu_1_1", body)
    assert response == expected
    assert events == [
        *chunks(TEXT),
        StreamEvent("block_done", block=expected.content[0]),
        StreamEvent("block_done", block=expected.content[1]),
    ]


@pytest.mark.parametrize("flavour", ["openai", "deepseek", "moonshot-legacy", "none"])
async def test_cached_tokens_of_each_usage_flavour(
    openai_emulator: Emulator, provider: OpenAICompatProvider, flavour: str
) -> None:
    openai_emulator.script(
        {
            "flavour": flavour,
            "min_cacheable_tokens": 16,
            "cache_unit": 1,
            "answers": [{"reply": [{"text": "First."}]}, {"reply": [{"text": "Second."}]}],
        }
    )
    first = await provider.stream(request([user("Explain the cache.")]), lambda e: None)
    history = [user("Explain the cache."), {"role": "assistant", "content": first.content}, user("More.")]
    second = await provider.stream(request(history), lambda e: None)
    prompt1, prompt2 = (count_tokens(e["body"], api="openai") for e in openai_emulator.journal)
    known = flavour != "none"
    assert first.usage == Usage(prompt1, completion_tokens("First."), None, 0 if known else None)
    assert second.usage == Usage(
        prompt2 - prompt1 if known else prompt2,
        completion_tokens("Second."),
        None,
        prompt1 if known else None,
    )
    read = prompt1 if known else "?"
    assert second.usage.accounting_line() == (
        f"[turn · in={second.usage.input_tokens} out={completion_tokens('Second.')} cache_read={read}]"
    )


async def test_reasoning_content_round_trip(
    openai_emulator: Emulator, provider: OpenAICompatProvider
) -> None:
    openai_emulator.script(
        {
            "flavour": "deepseek",
            "thinking": True,
            "require_content_key": True,
            "answers": [
                {
                    "reply": [{"tool_use": {"name": "read_file", "input": TOOL_INPUT}}],
                    "reasoning": "Read it first.",
                },
                {"reply": [{"text": "The bug is on line 3."}], "reasoning": "Found it."},
                {"reply": [{"text": "unused"}]},
            ],
        }
    )
    openai_emulator.allow_unused = True
    first = await provider.stream(request([user("Find the bug")]), lambda e: None)
    tool = {"type": "tool_use", "id": "call_emu_1_1", "name": "read_file", "input": TOOL_INPUT}
    assert (first.content, first.stop_reason, first.extra) == (
        [tool],
        "tool_use",
        {"reasoning_content": "Read it first."},
    )
    # the loop stores `extra` on the assistant message; the translator sends it back (cases C15)
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_emu_1_1", "content": "x = 1"}],
    }
    history = [user("Find the bug"), {"role": "assistant", "content": first.content, **first.extra}, result]
    second = await provider.stream(request(history), lambda e: None)
    assert (second.content, second.extra) == (
        [{"type": "text", "text": "The bug is on line 3."}],
        {"reasoning_content": "Found it."},
    )
    assert openai_emulator.journal[1]["body"]["messages"][2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_emu_1_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/app.py"}'},
            }
        ],
        "reasoning_content": "Read it first.",
    }
    # without it the endpoint refuses the request: the test above is not vacuous
    openai_emulator.expect_errors(1)
    dropped = [user("Find the bug"), {"role": "assistant", "content": first.content}, result]
    with pytest.raises(ProviderError) as err:
        await provider.stream(request(dropped), lambda e: None)
    assert err.value.message == (
        f"The OpenAI-compatible server at {provider.base_url} rejected the request (HTTP 400): "
        "The `reasoning_content` in the thinking mode must be passed back to the API."
    )


@pytest.mark.parametrize("style", ["bare", "fenced"])
async def test_tool_calls_as_text_become_tool_use_for_offered_tools(
    openai_emulator: Emulator, provider: OpenAICompatProvider, style: str
) -> None:
    openai_emulator.script(
        {
            "tool_calls_as_text": style,
            "answers": [
                {"reply": [{"tool_use": {"name": "read_file", "input": TOOL_INPUT}}]},
                {"reply": [{"tool_use": {"name": "delete_all", "input": {}}}]},
            ],
        }
    )
    events: list[StreamEvent] = []
    response = await provider.stream(request([user("go")]), events.append)
    tool = {
        "type": "tool_use",
        "id": f"call_text_{provider.text_call_prefix}_1",
        "name": "read_file",
        "input": TOOL_INPUT,
    }
    assert (response.content, response.stop_reason, events) == (
        [tool],
        "tool_use",
        [StreamEvent("block_done", block=tool)],
    )
    events = []
    response = await provider.stream(request([user("go")]), events.append)
    bare = canon({"arguments": {}, "name": "delete_all"})
    text = bare if style == "bare" else f"```json\n{bare}\n```"
    assert (response.content, response.stop_reason, events) == (
        [{"type": "text", "text": text}],
        "end_turn",
        [
            StreamEvent("text_delta", text=text),
            StreamEvent("block_done", block={"type": "text", "text": text}),
        ],
    )


@pytest.mark.parametrize(
    ("headers", "sleeps"),
    [({"retry-after-ms": "1"}, [0.001]), ({"retry-after": "1"}, [1.0])],
)
async def test_429_honours_the_retry_hint(
    openai_emulator: Emulator, provider: OpenAICompatProvider, headers: dict[str, str], sleeps: list[float]
) -> None:
    openai_emulator.script({"answers": [{"fault": {"http": 429, "headers": headers}}, reply()]})
    clock = ManualClock()
    events: list[StreamEvent] = []
    req = request([user("go")])
    response = await call(provider, req, clock, events)
    assert response == tool_reply("chatcmpl-emu-2", "call_emu_2_1", openai_emulator.journal[1]["body"])
    assert clock.sleeps == sleeps
    assert events[0] == StreamEvent(
        "retry",
        attempt=1,
        delay_s=sleeps[0],
        reason=f"The OpenAI-compatible server at {provider.base_url} rate limit (HTTP 429): "
        "Rate limit reached (scripted fault).",
    )


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ({"http": 500}, "is unavailable (HTTP 500): The server had an error while processing your request."),
        ({"stream_error_after_events": 2}, "stream failed (server_error): Overloaded"),
        ({"drop_after_events": 2}, "the stream ended before a finish_reason (connection dropped)"),
    ],
)
async def test_server_errors_and_cut_streams_are_retried(
    openai_emulator: Emulator, provider: OpenAICompatProvider, fault: dict[str, int], reason: str
) -> None:
    answer = {"fault": fault} if "http" in fault else reply(**fault)
    openai_emulator.script({"answers": [answer, reply()]})
    clock = ManualClock()
    events: list[StreamEvent] = []
    response = await call(provider, request([user("go")]), clock, events)
    expected = tool_reply("chatcmpl-emu-2", "call_emu_2_1", openai_emulator.journal[1]["body"])
    partial = [] if "http" in fault else chunks(TEXT)[:1]
    sep = ": " if reason.startswith("the stream") else " "
    assert response == expected
    assert events == [
        *partial,
        StreamEvent(
            "retry",
            attempt=1,
            delay_s=1.0,
            reason=f"The OpenAI-compatible server at {provider.base_url}{sep}{reason}",
        ),
        *chunks(TEXT),
        StreamEvent("block_done", block=expected.content[0]),
        StreamEvent("block_done", block=expected.content[1]),
    ]
    assert clock.sleeps == [1.0]


async def test_retries_exhausted_is_unavailable(
    openai_emulator: Emulator, provider: OpenAICompatProvider
) -> None:
    openai_emulator.script({"answers": [{"fault": {"http": 503}}, {"fault": {"http": 503}}]})
    with pytest.raises(ProviderError) as err:
        await call(provider, request([user("go")]), ManualClock(), [], max_total_s=2.5)
    assert (err.value.message, err.value.reason, err.value.retryable) == (
        f"The OpenAI-compatible server at {provider.base_url} is unavailable (HTTP 503): The engine is currently "
        "overloaded, please try again later. (gave up after 2 attempts, 1 s of retries within retries.max_total_s=2.5 s)",
        "unavailable",
        False,
    )


async def test_400_quotes_the_service_text(openai_emulator: Emulator, provider: OpenAICompatProvider) -> None:
    openai_emulator.expect_errors(1)
    unanswered = [
        user("go"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "read_file", "input": {}}],
        },
        user("and?"),
    ]
    with pytest.raises(ProviderError) as err:
        await provider.stream(request(unanswered), lambda e: None)
    assert (err.value.message, err.value.reason, err.value.http_status) == (
        f"The OpenAI-compatible server at {provider.base_url} rejected the request (HTTP 400): An assistant message "
        "with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following "
        "tool_call_ids did not have response messages: call_1",
        "bad_request",
        400,
    )


async def test_401_and_the_api_key_in_no_log_or_error(
    openai_emulator: Emulator, provider: OpenAICompatProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_emulator.script(
        {
            "answers": [
                {"fault": {"http": 429, "headers": {"retry-after-ms": "1"}}},
                {"reply": [{"text": "ok"}]},
                {"fault": {"http": 401, "message": f"Incorrect API key provided: {KEY}."}},
            ]
        }
    )
    await call(provider, request([user("go")]), ManualClock(), [])
    with pytest.raises(ProviderError) as err:
        await call(provider, request([user("go")]), ManualClock(), [])
    assert (err.value.message, err.value.reason, err.value.retryable) == (
        f"The OpenAI-compatible server at {provider.base_url} rejected the API key (HTTP 401). Set OPENAI_API_KEY "
        "in the environment that launches your editor, then restart agentd.",
        "authentication",
        False,
    )
    texts = [*traceback.format_exception(err.value), repr(err.value.data)]
    records = [r.getMessage() for r in caplog.records]
    assert len(records) > 0
    assert [t for t in [*texts, *records] if KEY in t] == []
