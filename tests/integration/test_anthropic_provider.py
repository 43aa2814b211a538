"""AnthropicProvider through the real `anthropic` SDK against the Messages API emulator over HTTP.

Streaming text and tool_use (the whole ModelResponse), usage with cache fields and the TTL split, the cumulative
`message_delta.usage` (`repeat_input_usage_in_delta`), retries on the injectable clock (429 `retry-after-ms` and
`retry-after` seconds, 529, a mid-stream overload, a dropped stream), retries exhausted, 400 and 401 texts, a
truncated tool_use, and the API key kept out of every log record and error text (CONTRACTS.md §6, §10).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import traceback
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.errors import ProviderError
from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.base import ModelRequest, ModelResponse, StreamEvent, Usage, run_with_retries
from agentd.testing.emulator import Emulator
from agentd.testing.emulator.tokens import block_tokens, count_tokens

MODEL = "emu-sonnet"
KEY = "sk-ant-test-SECRET-0123456789"
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file in the workspace.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }
]
SYSTEM = [{"type": "text", "text": "You are agentd, a coding agent."}]
TEXT = "I will read the file first."
TOOL_INPUT = {"path": "src/app.py"}


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text, **extra}]}


def request(messages: list[dict[str, Any]], system: list[dict[str, Any]] = SYSTEM) -> ModelRequest:
    return ModelRequest(model=MODEL, system=system, tools=TOOLS, messages=messages, max_tokens=1024)


def reply(**options: Any) -> dict[str, Any]:
    return {"reply": [{"text": TEXT}, {"tool_use": {"name": "read_file", "input": TOOL_INPUT}}], **options}


def chunks(text: str) -> list[StreamEvent]:
    return [StreamEvent("text_delta", text=text[i : i + 16]) for i in range(0, len(text), 16)]


@pytest.fixture
async def provider(emulator: Emulator) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(MODEL, KEY, emulator.url, ManualClock())
    yield p
    await p.aclose()


async def call(
    provider: AnthropicProvider,
    req: ModelRequest,
    clock: ManualClock,
    events: list[StreamEvent],
    max_total_s: float = 60.0,
) -> ModelResponse:
    """One request through agentd's retry loop; each retry is announced as a `retry` StreamEvent."""

    def on_retry(n: int, delay: float, err: ProviderError) -> None:
        events.append(StreamEvent("retry", attempt=n, delay_s=delay, reason=err.message))

    return await run_with_retries(
        lambda n: provider.stream(req, events.append), clock=clock, max_total_s=max_total_s, on_retry=on_retry
    )


def expected_tool_reply(msg_id: str, req: ModelRequest, tool_id: str = "toolu_emu_1_1") -> ModelResponse:
    text = {"type": "text", "text": TEXT}
    tool = {"type": "tool_use", "id": tool_id, "name": "read_file", "input": TOOL_INPUT}
    return ModelResponse(
        id=msg_id,
        content=[text, tool],
        stop_reason="tool_use",
        usage=Usage(
            input_tokens=count_tokens(req.body()),
            output_tokens=block_tokens(text) + block_tokens(tool),
            cache_creation_input_tokens=0,
            cache_read_input_tokens=0,
            cache_creation_1h=0,
            cache_creation_5m=0,
        ),
        model=MODEL,
    )


async def test_streams_text_and_tool_use(emulator: Emulator, provider: AnthropicProvider) -> None:
    emulator.script({"answers": [reply(unknown_event="brand_new_event")]})
    req = request([user("Fix the bug in src/app.py")])
    events: list[StreamEvent] = []
    response = await provider.stream(req, events.append)
    expected = expected_tool_reply("msg_emu_1", req)
    assert response == expected
    assert events == [
        *chunks(TEXT),
        StreamEvent("block_done", block=expected.content[0]),
        StreamEvent("block_done", block=expected.content[1]),
    ]
    assert emulator.journal[0]["body"] == {**req.body(), "stream": True}


async def test_only_role_and_content_are_sent(emulator: Emulator, provider: AnthropicProvider) -> None:
    emulator.script({"answers": [{"reply": [{"text": "Done."}]}]})
    assistant = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hi."}],
        "reasoning_content": "hmm",
    }
    req = request([user("hello"), assistant, user("bye")])
    await provider.stream(req, lambda e: None)
    sent = emulator.journal[0]["body"]["messages"]
    assert sent == [
        user("hello"),
        {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
        user("bye"),
    ]


@pytest.mark.parametrize("repeat_input", [False, True])
async def test_cache_usage_with_ttl_split(
    emulator: Emulator, provider: AnthropicProvider, repeat_input: bool
) -> None:
    emulator.script(
        {
            "min_cacheable_tokens": 16,
            "answers": [
                {"reply": [{"text": "First answer."}], "repeat_input_usage_in_delta": repeat_input},
                {"reply": [{"text": "Second answer."}], "repeat_input_usage_in_delta": repeat_input},
            ],
        }
    )
    system = [{**SYSTEM[0], "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    first = request([user("Explain the cache.", cache_control={"type": "ephemeral"})], system=system)
    tools_system = sum(block_tokens(b) for b in [*TOOLS, *SYSTEM])
    total1 = count_tokens(first.body())
    answer1 = {"type": "text", "text": "First answer."}
    response = await provider.stream(first, lambda e: None)
    assert response.usage == Usage(
        input_tokens=0,
        output_tokens=block_tokens(answer1),
        cache_creation_input_tokens=total1,
        cache_read_input_tokens=0,
        cache_creation_1h=tools_system,
        cache_creation_5m=total1 - tools_system,
    )
    assert response.usage.prompt_tokens == total1  # C12: the three input fields add up to the prompt

    second = request(
        [
            user("Explain the cache."),
            {"role": "assistant", "content": [answer1]},
            user("More.", cache_control={"type": "ephemeral"}),
        ],
        system=system,
    )
    total2 = count_tokens(second.body())
    response = await provider.stream(second, lambda e: None)
    assert response.usage == Usage(
        input_tokens=0,
        output_tokens=block_tokens({"type": "text", "text": "Second answer."}),
        cache_creation_input_tokens=total2 - total1,
        cache_read_input_tokens=total1,
        cache_creation_1h=0,
        cache_creation_5m=total2 - total1,
    )


@pytest.mark.parametrize(
    ("headers", "sleeps"),
    [({"retry-after-ms": "1"}, [0.001]), ({"retry-after": "1"}, [1.0])],
)
async def test_429_honours_the_retry_hint(
    emulator: Emulator, provider: AnthropicProvider, headers: dict[str, str], sleeps: list[float]
) -> None:
    emulator.script({"answers": [{"fault": {"http": 429, "headers": headers}}, reply()]})
    clock = ManualClock()
    events: list[StreamEvent] = []
    req = request([user("go")])
    response = await call(provider, req, clock, events)
    assert response == expected_tool_reply("msg_emu_2", req, "toolu_emu_2_1")
    assert clock.sleeps == sleeps
    assert events[0] == StreamEvent(
        "retry",
        attempt=1,
        delay_s=sleeps[0],
        reason="Anthropic rate limit (HTTP 429): Number of request tokens has exceeded your per-minute rate limit",
    )


async def test_529_is_retried_with_backoff(emulator: Emulator, provider: AnthropicProvider) -> None:
    emulator.script({"answers": [{"fault": {"http": 529}}, {"reply": [{"text": "ok"}]}]})
    clock = ManualClock()
    events: list[StreamEvent] = []
    response = await call(provider, request([user("go")]), clock, events)
    assert (response.content, clock.sleeps) == ([{"type": "text", "text": "ok"}], [1.0])
    assert events[0] == StreamEvent(
        "retry", attempt=1, delay_s=1.0, reason="Anthropic is unavailable (HTTP 529): Overloaded"
    )


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ({"stream_error_after_events": 4}, "Anthropic stream failed (overloaded_error): Overloaded"),
        ({"drop_after_events": 4}, "Anthropic stream ended before message_stop (connection dropped)"),
    ],
)
async def test_mid_stream_failure_is_retried_and_the_partial_reply_retracted(
    emulator: Emulator, provider: AnthropicProvider, fault: dict[str, int], reason: str
) -> None:
    # events: message_start, content_block_start, ping, the first text delta; then the fault
    emulator.script({"answers": [reply(**fault), reply()]})
    clock = ManualClock()
    events: list[StreamEvent] = []
    req = request([user("go")])
    response = await call(provider, req, clock, events)
    expected = expected_tool_reply("msg_emu_2", req, "toolu_emu_2_1")
    assert response == expected
    assert events == [
        chunks(TEXT)[0],
        StreamEvent("retry", attempt=1, delay_s=1.0, reason=reason),
        *chunks(TEXT),
        StreamEvent("block_done", block=expected.content[0]),
        StreamEvent("block_done", block=expected.content[1]),
    ]
    assert clock.sleeps == [1.0]


async def test_retries_exhausted_is_unavailable(emulator: Emulator, provider: AnthropicProvider) -> None:
    emulator.script({"answers": [{"fault": {"http": 529}}, {"fault": {"http": 529}}]})
    clock = ManualClock()
    with pytest.raises(ProviderError) as err:
        await call(provider, request([user("go")]), clock, [], max_total_s=2.5)
    assert (err.value.message, err.value.reason, err.value.retryable, err.value.http_status) == (
        "Anthropic is unavailable (HTTP 529): Overloaded (gave up after 2 attempts, 1 s of retries within retries.max_total_s=2.5 s)",
        "unavailable",
        False,
        529,
    )
    assert clock.sleeps == [1.0]


async def test_400_quotes_the_service_text(emulator: Emulator, provider: AnthropicProvider) -> None:
    emulator.expect_errors(1)
    bad = request([{"role": "assistant", "content": [{"type": "text", "text": "Hi."}]}, user("go")])
    with pytest.raises(ProviderError) as err:
        await provider.stream(bad, lambda e: None)
    assert (err.value.message, err.value.reason, err.value.retryable, err.value.http_status) == (
        'Anthropic rejected the request (HTTP 400): messages: first message must use the "user" role',
        "bad_request",
        False,
        400,
    )


async def test_401_is_an_authentication_error(emulator: Emulator, provider: AnthropicProvider) -> None:
    emulator.script({"answers": [{"fault": {"http": 401}}]})
    clock = ManualClock()
    with pytest.raises(ProviderError) as err:
        await call(provider, request([user("go")]), clock, [])
    assert (err.value.message, err.value.reason, err.value.retryable, clock.sleeps) == (
        "Anthropic rejected the API key (HTTP 401). Set ANTHROPIC_API_KEY in the environment that launches "
        "your editor, then restart agentd.",
        "authentication",
        False,
        [],
    )


async def test_truncated_tool_use_never_reaches_content(
    emulator: Emulator, provider: AnthropicProvider
) -> None:
    emulator.script({"answers": [reply(stop_reason="max_tokens", truncate_tool_json=True)]})
    events: list[StreamEvent] = []
    response = await provider.stream(request([user("go")]), events.append)
    text = {"type": "text", "text": TEXT}
    assert (response.content, response.stop_reason, response.truncated_tool_use_ids) == (
        [text],
        "max_tokens",
        ["toolu_emu_1_1"],
    )
    assert events == [*chunks(TEXT), StreamEvent("block_done", block=text)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connection_refused_is_retryable() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    provider = AnthropicProvider(MODEL, KEY, url)
    try:
        with pytest.raises(ProviderError) as err:
            await provider.stream(request([user("go")]), lambda e: None)
    finally:
        await provider.aclose()
    assert (err.value.message, err.value.reason, err.value.retryable, err.value.max_attempts) == (
        f"Anthropic refused the connection at {url}: nothing is listening there. Start the server, or fix "
        "--base-url (base_url in the config)",
        "unavailable",
        True,
        2,  # H11: a refused connection on this machine is retried once, not for a minute
    )


def _texts(exc: BaseException) -> list[str]:
    """Every text a traceback of `exc` would show (its chain as printed), plus its `data`."""
    return [*traceback.format_exception(exc), repr(exc), repr(getattr(exc, "data", None))]


async def test_the_api_key_is_in_no_log_record_and_no_error(
    emulator: Emulator, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    emulator.script(
        {
            "answers": [
                {"fault": {"http": 429, "headers": {"retry-after-ms": "1"}}},
                {"reply": [{"text": "ok"}], "stream_error_after_events": 3},
                {"reply": [{"text": "ok"}]},
                {"fault": {"http": 401, "message": f"invalid x-api-key {KEY}"}},
            ]
        }
    )
    await call(provider, request([user("go")]), ManualClock(), [])
    errors: list[ProviderError] = []
    for req in (request([user("go")]), request([{"role": "assistant", "content": "x"}, user("go")])):
        try:
            await provider.stream(req, lambda e: None)
        except ProviderError as exc:
            errors.append(exc)
    emulator.expect_errors(1)
    assert [e.reason for e in errors] == ["authentication", "bad_request"]
    records = [r.getMessage() for r in caplog.records]
    assert len(records) > 0
    assert [r for r in records if KEY in r] == []
    assert [t for e in errors for t in _texts(e) if KEY in t] == []


async def test_a_burst_of_stream_events_lets_the_loop_run(
    emulator: Emulator, provider: AnthropicProvider
) -> None:
    """break16 F6 (issue 16 §1): a long reply whose events arrive at once was handled in one step of the
    event loop (16-34 ms of CPU, every other session waiting). The provider lets the loop run every
    STREAM_YIELD_EVERY events: a callback that reschedules itself runs between them."""
    from collections import Counter

    from agentd.providers.base import STREAM_YIELD_EVERY

    emulator.script({"answers": [{"reply": [{"text": "x" * 16 * 200}]}]})
    loop = asyncio.get_running_loop()
    turns = [0]
    done = [False]

    def tick() -> None:
        turns[0] += 1
        if not done[0]:
            loop.call_soon(tick)

    seen: list[int] = []
    tick()
    try:
        await provider.stream(request([user("Write a lot.")]), lambda e: seen.append(turns[0]))
    finally:
        done[0] = True
    assert len(seen) > 100
    assert max(Counter(seen).values()) <= STREAM_YIELD_EVERY + 2


async def test_a_burst_of_unknown_stream_events_lets_the_loop_run() -> None:
    """Recheck of break16 F6: events of a type agentd skips were not counted, so 20,000 of them made loop
    steps of up to 62 ms. Every event counts toward the yield."""
    import json as _json
    from collections import Counter

    from agentd.providers.base import STREAM_YIELD_EVERY

    def sse(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {_json.dumps(data)}\n\n".encode()

    start = {"id": "msg_x", "type": "message", "role": "assistant", "model": MODEL, "content": [],
             "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    body = sse("message_start", {"type": "message_start", "message": start})
    body += sse("weird_event", {"type": "weird_event"}) * 2000
    body += sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}})  # fmt: skip
    body += sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": "ok"}})  # fmt: skip
    body += sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    body += sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                  "usage": {"output_tokens": 1}})  # fmt: skip
    body += sse("message_stop", {"type": "message_stop"})

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n"
                     b"connection: close\r\n\r\n%s" % (len(body), body))  # fmt: skip
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    p = AnthropicProvider(MODEL, KEY, f"http://127.0.0.1:{port}", ManualClock())
    loop = asyncio.get_running_loop()
    turns = [0]
    done = [False]
    marks: list[int] = []

    def tick() -> None:
        turns[0] += 1
        if not done[0]:
            loop.call_soon(tick)

    import agentd.providers.base as base

    real = base.pace

    async def counted(n: int) -> None:
        marks.append(turns[0])
        await real(n)

    tick()
    try:
        import agentd.providers.anthropic as anth

        anth.pace = counted  # type: ignore[assignment]
        response = await p.stream(request([user("hi")]), lambda e: None)
    finally:
        anth.pace = real  # type: ignore[assignment]
        done[0] = True
        await p.aclose()
        server.close()
    assert response.stop_reason == "end_turn"
    assert len(marks) > 2000
    assert max(Counter(marks).values()) <= STREAM_YIELD_EVERY + 1
