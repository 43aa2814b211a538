"""The emulators over HTTP with the real SDKs (TESTING.md §3.2-§3.4, §3.8, §3.9): anthropic 2.14.0 parses
the SSE into the same message as the JSON response; faults, caps, validation texts, auth, the journal, the
cache, gates and the standalone `python -m agentd.testing.emulator`; openai 3.57.0 against the
OpenAI-compatible emulator in every usage flavour."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anthropic
import httpx2
import openai
import pytest

from agentd.testing.emulator import SUMMARY_TEXT, Emulator, ManualClock

KEY = "sk-ant-emu-test"
REQ: dict[str, Any] = {
    "model": "emu-sonnet",
    "max_tokens": 1000,
    "messages": [{"role": "user", "content": "hi"}],
}
READ = {"tool_use": {"name": "read_file", "input": {"path": "src/app.py"}}}
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


class Clients:
    """SDK clients made by one test, closed at its teardown (on the test's own event loop)."""

    def __init__(self) -> None:
        self.made: list[anthropic.AsyncAnthropic | openai.AsyncOpenAI] = []

    def anthropic(self, emu: Emulator) -> anthropic.AsyncAnthropic:
        self.made.append(anthropic.AsyncAnthropic(base_url=emu.url, api_key=KEY, max_retries=0))
        return self.made[-1]  # type: ignore[return-value]

    def openai(self, emu: Emulator) -> openai.AsyncOpenAI:
        self.made.append(openai.AsyncOpenAI(base_url=emu.url + "/v1", api_key="sk-emu-test", max_retries=0))
        return self.made[-1]  # type: ignore[return-value]


@pytest.fixture
async def sdk() -> AsyncIterator[Clients]:
    clients = Clients()
    yield clients
    for c in clients.made:
        await c.close()


def raw(
    url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any, bytes]:
    """One request to base `url` with the standard library: (status, headers, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(url).port, timeout=10)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"content-type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


async def streamed(c: anthropic.AsyncAnthropic, **overrides: Any) -> Any:
    async with c.messages.stream(**{**REQ, **overrides}) as stream:
        return await stream.get_final_message()


async def test_stream_final_message_equals_json_response(sdk: Clients) -> None:
    answer = {"reply": [{"text": "Reading it, and then some more text."}, READ]}
    with Emulator(scenario=[answer]) as a, Emulator(scenario=[answer]) as b:
        final = await streamed(sdk.anthropic(a))
        whole = await sdk.anthropic(b).messages.create(**REQ)
        a.check()
        b.check()
    assert final.model_dump() == whole.model_dump()
    assert whole.model_dump(exclude_none=True) == {
        "id": "msg_emu_1",
        "type": "message",
        "role": "assistant",
        "model": "emu-sonnet",
        "content": [
            {"type": "text", "text": "Reading it, and then some more text."},
            {"type": "tool_use", "id": "toolu_emu_1_1", "name": "read_file", "input": {"path": "src/app.py"}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 7,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
            "output_tokens": 16 + 23,  # text: 25 + 36 bytes -> 16; tool_use: 89 bytes -> 23
        },
    }


async def test_tool_use_streams_input_json_delta(emulator: Emulator, sdk: Clients) -> None:
    emulator.script([{"reply": [{"text": "Reading it."}, READ]}])
    stream = await sdk.anthropic(emulator).messages.create(**REQ, stream=True)
    seen = []
    async for event in stream:
        delta = getattr(event, "delta", None)
        detail = (
            getattr(delta, "text", None)
            or getattr(delta, "partial_json", None)
            or getattr(delta, "stop_reason", None)
        )
        seen.append((event.type, getattr(delta, "type", None), detail))
    assert seen == [
        ("message_start", None, None),
        ("content_block_start", None, None),
        ("content_block_delta", "text_delta", "Reading it."),
        ("content_block_stop", None, None),
        ("content_block_start", None, None),
        ("content_block_delta", "input_json_delta", '{"path":"src/app'),
        ("content_block_delta", "input_json_delta", '.py"}'),
        ("content_block_stop", None, None),
        ("message_delta", None, "tool_use"),
        ("message_stop", None, None),
    ]


def test_raw_event_sequence_has_a_ping_after_the_first_block_start(emulator: Emulator) -> None:
    emulator.script([{"reply": ["Hi."]}])
    status, headers, data = raw(
        emulator.url, "POST", "/v1/messages", {**REQ, "stream": True}, {"x-api-key": KEY}
    )
    frames = [f for f in data.decode().split("\n\n") if f]
    names = [f.split("\n")[0] for f in frames]
    assert (status, headers["content-type"], headers["request-id"]) == (200, "text/event-stream", "req_emu_1")
    assert names == [
        "event: message_start",
        "event: content_block_start",
        "event: ping",
        "event: content_block_delta",
        "event: content_block_stop",
        "event: message_delta",
        "event: message_stop",
    ]
    assert json.loads(frames[5].split("data: ")[1]) == {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 7},  # {"text":"Hi.","type":"text"}: 28 bytes
    }


async def test_mid_stream_error_is_a_200_status_error(emulator: Emulator, sdk: Clients) -> None:
    emulator.script([{"reply": ["x" * 100], "stream_error_after_events": 4}])
    with pytest.raises(anthropic.APIStatusError) as caught:
        await streamed(sdk.anthropic(emulator))
    assert (
        type(caught.value) is anthropic.APIStatusError
    )  # what anthropic 2.14.0 raises: no subclass, no retry
    assert (caught.value.status_code, caught.value.type) == (200, "overloaded_error")
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert emulator.journal[0]["outcome"] == "stream_error"


async def test_max_tokens_caps_the_reply(emulator: Emulator, sdk: Clients) -> None:
    emulator.script([{"reply": ["abcdefghij" * 10]}])
    final = await streamed(sdk.anthropic(emulator), max_tokens=20)
    assert (final.stop_reason, final.usage.output_tokens) == ("max_tokens", 20)
    assert [b.model_dump(exclude_none=True) for b in final.content] == [
        {"type": "text", "text": ("abcdefghij" * 10)[:55]}
    ]


async def test_http_faults_are_answered_with_headers(emulator: Emulator, sdk: Clients) -> None:
    emulator.script(
        [
            {"fault": {"http": 429, "headers": {"retry-after-ms": "1"}}},
            {"fault": {"http": 429, "headers": {"retry-after": "1", "x-should-retry": "true"}}},
            {"fault": {"http": 529}},
        ]
    )
    c = sdk.anthropic(emulator)
    with pytest.raises(anthropic.RateLimitError) as first:
        await c.messages.create(**REQ)
    with pytest.raises(anthropic.RateLimitError) as second:
        await c.messages.create(**REQ)
    with pytest.raises(anthropic.OverloadedError) as third:
        await c.messages.create(**REQ)
    assert (first.value.response.headers["retry-after-ms"], first.value.type) == ("1", "rate_limit_error")
    assert (
        second.value.response.headers["retry-after"],
        second.value.response.headers["x-should-retry"],
    ) == ("1", "true")
    assert third.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_emu_3",
    }
    assert (third.value.status_code, third.value.request_id) == (529, "req_emu_3")


async def test_validation_text_reaches_the_sdk(emulator: Emulator, sdk: Clients) -> None:
    emulator.expect_errors(2)
    unanswered = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}],
        },
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk.anthropic(emulator).messages.create(**{**REQ, "messages": unanswered})
    assert caught.value.api_message == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )
    with pytest.raises(anthropic.BadRequestError) as sampling:
        await sdk.anthropic(emulator).messages.create(**REQ, extra_body={"temperature": 0.5})
    assert (sampling.value.type, sampling.value.api_message) == (
        "invalid_request_error",
        "temperature: Extra inputs are not permitted",
    )
    assert [e["validation_error"] for e in emulator.journal] == [
        caught.value.api_message,
        "temperature: Extra inputs are not permitted",
    ]


def test_auth_schemes_and_missing_key(emulator: Emulator) -> None:
    emulator.script([{"reply": ["a"]}, {"reply": ["b"]}])
    status, _, data = raw(emulator.url, "POST", "/v1/messages", REQ)
    assert (status, json.loads(data)) == (
        401,
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": "x-api-key header is required"},
            "request_id": "req_emu_1",
        },
    )
    assert (
        raw(emulator.url, "POST", "/v1/messages", REQ, {"x-api-key": "k1", "authorization": "Bearer k2"})[0]
        == 200
    )
    assert raw(emulator.url, "POST", "/v1/messages", REQ, {"authorization": "Bearer k2"})[0] == 200
    assert raw(emulator.url, "POST", "/v1/nope", REQ, {"x-api-key": "k1"})[0] == 404
    short = {k: hashlib.sha256(k.encode()).hexdigest()[:8] for k in ("k1", "k2")}
    assert [e["auth"] for e in emulator.journal] == [
        None,
        {"scheme": "x-api-key", "key_hash": short["k1"]},
        {"scheme": "bearer", "key_hash": short["k2"]},
        None,
    ]
    assert "k1" not in json.dumps(emulator.journal)


async def test_journal_entry_as_a_whole(emulator: Emulator, sdk: Clients) -> None:
    emulator.script([{"reply": ["ok"]}])
    await sdk.anthropic(emulator).messages.create(**REQ)
    entry = emulator.journal[0]
    assert entry["received_at"] <= entry["first_byte_at"] <= entry["last_byte_at"]
    assert {**entry, "received_at": "<ts>", "first_byte_at": "<ts>", "last_byte_at": "<ts>"} == {
        "seq": 1,
        "request_id": "req_emu_1",
        "api": "anthropic",
        "method": "POST",
        "path": "/v1/messages",
        "auth": {"scheme": "bearer", "key_hash": hashlib.sha256(KEY.encode()).hexdigest()[:8]},
        "anthropic_version": "2026-10-21",
        "anthropic_beta": None,
        "body": REQ,
        "stream": False,
        "received_at": "<ts>",
        "first_byte_at": "<ts>",
        "last_byte_at": "<ts>",
        "clock": 0.0,
        "status": 200,
        "error": None,
        "validation_error": None,
        "usage": {
            "input_tokens": 7,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
            "output_tokens": 7,
        },
        "hit_position": None,
        "answer": 1,
        "compaction": False,
        "outcome": "complete",
    }


async def test_cache_reads_over_http_and_ttl_on_the_clock(emulator: Emulator, sdk: Clients) -> None:
    emulator.script([{"reply": ["ok"]}] * 3)
    system: list[Any] = [
        {"type": "text", "text": "s" * (4 * 1100 - 25), "cache_control": {"type": "ephemeral"}}
    ]
    usages = []
    for advance in (0, 10, 400):
        assert isinstance(emulator.clock, ManualClock)
        emulator.clock.advance(advance)
        message = await sdk.anthropic(emulator).messages.create(**REQ, system=system)
        usages.append(message.usage.model_dump(exclude_none=True))

    def usage(write: int, read: int) -> dict[str, Any]:
        return {
            "input_tokens": 7,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": write},
            "output_tokens": 7,
        }

    assert usages == [usage(1100, 0), usage(0, 1100), usage(1100, 0)]
    assert [e["hit_position"] for e in emulator.journal] == [None, 1, None]


async def test_compaction_request_gets_the_fixed_summary_and_consumes_no_answer(
    emulator: Emulator, sdk: Clients
) -> None:
    marker = "Summarize the conversation below in one paragraph."
    emulator.script({"compaction_marker": marker, "answers": [{"reply": ["after"]}]})
    summary = await sdk.anthropic(emulator).messages.create(
        **{**REQ, "messages": [{"role": "user", "content": marker + "\n\nuser: hi"}]}
    )
    after = await sdk.anthropic(emulator).messages.create(**REQ)
    assert (summary.content[0].text, summary.usage.output_tokens) == (SUMMARY_TEXT, 500)  # type: ignore[union-attr]
    assert after.content[0].text == "after"  # type: ignore[union-attr]
    assert [(e["compaction"], e["answer"]) for e in emulator.journal] == [(True, None), (False, 1)]


async def test_hold_at_a_gate_until_opened(emulator: Emulator, sdk: Clients) -> None:
    emulator.script([{"reply": ["Fixed."], "hold_after_events": 3, "gate": "mid"}])
    task = asyncio.create_task(streamed(sdk.anthropic(emulator)))
    assert await emulator.wait_reached_async("mid", 10)
    assert (task.done(), emulator.journal[0]["outcome"]) == (False, None)
    emulator.gate("mid").open()
    final = await asyncio.wait_for(task, 10)
    assert (final.content[0].text, emulator.journal[0]["outcome"]) == ("Fixed.", "complete")  # type: ignore[union-attr]


async def test_drop_after_events_breaks_the_body(emulator: Emulator, sdk: Clients) -> None:
    emulator.script([{"reply": ["x" * 100], "drop_after_events": 4}])
    with pytest.raises(httpx2.RemoteProtocolError) as caught:  # anthropic 2.14.0 does not wrap it
        await streamed(sdk.anthropic(emulator))
    assert (
        str(caught.value)
        == "peer closed connection without sending complete message body (incomplete chunked read)"
    )
    assert emulator.journal[0]["outcome"] == "dropped"


async def test_stream_shapes_unknown_event_refusal_empty_turn_and_repeated_usage(
    emulator: Emulator, sdk: Clients
) -> None:
    emulator.script(
        [
            {"reply": ["hello"], "unknown_event": "x_new_event"},
            {"reply": ["no"], "refusal": "cyber"},
            {"reply": ["ignored"], "empty_end_turn": True},
            {"reply": ["twice"], "repeat_input_usage_in_delta": True},
        ]
    )
    first, refusal, empty, repeated = [await streamed(sdk.anthropic(emulator)) for _ in range(4)]
    assert first.content[0].text == "hello"  # type: ignore[union-attr]
    assert (refusal.stop_reason, refusal.stop_details.model_dump()) == (  # type: ignore[union-attr]
        "refusal",
        {"type": "refusal", "category": "cyber", "explanation": None},
    )
    assert (empty.content, empty.stop_reason, empty.usage.output_tokens) == ([], "end_turn", 0)
    assert repeated.usage.model_dump(exclude_none=True) == emulator.journal[3]["usage"]


async def test_count_tokens_endpoint(emulator: Emulator, sdk: Clients) -> None:
    counted = await sdk.anthropic(emulator).messages.count_tokens(
        model="emu-sonnet", messages=REQ["messages"]
    )
    assert counted.input_tokens == 7


def test_check_lists_every_problem() -> None:
    emu = Emulator(scenario=[{"reply": ["a"], "expect": {"last_user_text": "hello"}}, {"reply": ["b"]}])
    emu.start()
    try:
        assert raw(emu.url, "POST", "/v1/messages", REQ, {"x-api-key": KEY})[0] == 200
        bad = {**REQ, "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
        assert raw(emu.url, "POST", "/v1/messages", bad, {"x-api-key": KEY})[0] == 400
        with pytest.raises(AssertionError) as unused:
            emu.check()
        assert str(unused.value) == (
            "emulator check failed:\n"
            "- answer 1 (request #1): expect: last_user_text is 'hi', expected 'hello'\n"
            "- 1 request(s) failed validation, expect_errors allowed 0: #2: messages: roles must alternate between "
            '"user" and "assistant", but found multiple "user" roles in a row\n'
            "- 1 scripted answer(s) unused (answers 2..2)"
        )
        emu.expect_errors(1)
        assert raw(emu.url, "POST", "/v1/messages", REQ, {"x-api-key": KEY})[0] == 200
        status, _, data = raw(emu.url, "POST", "/v1/messages", REQ, {"x-api-key": KEY})
        assert (status, json.loads(data)["error"]) == (
            500,
            {"type": "api_error", "message": "emulator: scenario exhausted"},
        )
        assert emu.problems == [
            "answer 1 (request #1): expect: last_user_text is 'hi', expected 'hello'",
            "request #4 came after the scenario ran out",
        ]
    finally:
        emu.stop()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: lines.put(proc.stdout.readline() if proc.stdout else ""), daemon=True
    ).start()
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        pytest.fail(f"the standalone emulator printed no URL within {timeout} s")


def test_standalone_cli_and_control_endpoints() -> None:
    argv = [sys.executable, "-m", "agentd.testing.emulator", "--api", "anthropic", "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--scenario", str(SCENARIOS / "emulator_smoke.json")], stdout=subprocess.PIPE, text=True
    )
    try:
        url = _first_line(proc, 20)
        assert json.loads(raw(url, "GET", "/_emu/check")[2])["problems"] == [
            "4 scripted answer(s) unused (answers 1..4)"
        ]
        assert json.loads(raw(url, "POST", "/_emu/scenario", [{"reply": ["hi"]}])[2]) == {"ok": True}
        assert json.loads(raw(url, "POST", "/_emu/clock/advance", {"seconds": 5})[2]) == {"now": 5.0}
        status, _, data = raw(url, "POST", "/v1/messages", REQ, {"x-api-key": KEY})
        assert (status, json.loads(data)["content"]) == (200, [{"type": "text", "text": "hi"}])
        journal = json.loads(raw(url, "GET", "/_emu/journal")[2])
        assert [(e["seq"], e["clock"], e["status"]) for e in journal] == [(1, 5.0, 200)]
        assert json.loads(raw(url, "POST", "/_emu/gates/mid/open")[2]) == {"ok": True}
        assert json.loads(raw(url, "POST", "/_emu/reset")[2]) == {"ok": True}
        assert json.loads(raw(url, "GET", "/_emu/journal")[2]) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


# --- OpenAI-compatible emulator (§3.8) ---

SYSTEM_MSG = {"role": "system", "content": "x" * 4400}  # {"content":"x…","role":"system"}: 4430 bytes -> 1108
FIRST: list[Any] = [SYSTEM_MSG, {"role": "user", "content": "hi"}]  # + 8 = 1116 tokens
SECOND = [
    *FIRST,
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "more"},
]  # + 10 + 8 = 1134


@pytest.mark.parametrize(
    ("flavour", "cache_fields"),
    [
        ("openai", {"prompt_tokens_details": {"cached_tokens": 1024}}),  # 1116 rounded down to 128s
        (
            "deepseek",
            {
                "prompt_tokens_details": {"cached_tokens": 1088},
                "prompt_cache_hit_tokens": 1088,
                "prompt_cache_miss_tokens": 46,
            },
        ),  # 64s
        ("moonshot-legacy", {"cached_tokens": 1024}),  # 256s
        ("none", {}),
    ],
)
async def test_openai_streaming_usage_per_flavour(
    flavour: str, cache_fields: dict[str, Any], sdk: Clients
) -> None:
    with Emulator(api="openai", scenario={"flavour": flavour, "answers": [{"reply": ["Hello."]}] * 2}) as emu:
        usages, texts = [], []
        for messages in (FIRST, SECOND):
            stream = await sdk.openai(emu).chat.completions.create(
                model="emu-gpt",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [c async for c in stream]
            texts.append("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
            assert (chunks[-2].choices[0].finish_reason, chunks[-1].choices) == ("stop", [])
            usages.append(chunks[-1].usage.model_dump(exclude_none=True))  # type: ignore[union-attr]
        emu.check()
    assert texts == ["Hello.", "Hello."]
    assert usages[1] == {"prompt_tokens": 1134, "completion_tokens": 10, "total_tokens": 1144, **cache_fields}


async def test_openai_tool_calls_stream_partial_arguments(openai_emulator: Emulator, sdk: Clients) -> None:
    answer = {"reply": [{"text": "Reading."}, READ]}
    openai_emulator.script([answer, answer])
    stream = await sdk.openai(openai_emulator).chat.completions.create(
        model="emu-gpt", messages=FIRST, stream=True
    )
    deltas = [
        c.choices[0].delta.tool_calls
        for c in [c async for c in stream]
        if c.choices and c.choices[0].delta.tool_calls
    ]
    whole = await sdk.openai(openai_emulator).chat.completions.create(model="emu-gpt", messages=FIRST)
    assert [(d[0].index, d[0].id, d[0].function.name, d[0].function.arguments) for d in deltas] == [  # type: ignore[union-attr]
        (0, "call_emu_1_1", "read_file", ""),
        (0, None, None, '{"path":"src/app'),
        (0, None, None, '.py"}'),
    ]
    assert whole.choices[0].finish_reason == "tool_calls"
    assert whole.choices[0].message.model_dump(exclude_none=True) == {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [
            {
                "id": "call_emu_2_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"src/app.py"}'},
            }
        ],
    }


async def test_openai_missing_tool_response_is_a_400(openai_emulator: Emulator, sdk: Clients) -> None:
    openai_emulator.expect_errors(1)
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages = [
        *FIRST,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "?"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.openai(openai_emulator).chat.completions.create(model="emu-gpt", messages=messages)
    assert caught.value.body == {
        "message": "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_1",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


async def test_openai_length_cap_and_models_list(openai_emulator: Emulator, sdk: Clients) -> None:
    openai_emulator.script([{"reply": ["abcdefghij" * 10]}])
    reply = await sdk.openai(openai_emulator).chat.completions.create(
        model="emu-gpt", messages=FIRST, max_tokens=20
    )
    # {"content":"…","role":"assistant"}: 33 bytes + n <= 80 -> n = 47
    assert (reply.choices[0].finish_reason, reply.choices[0].message.content) == (
        "length",
        ("abcdefghij" * 10)[:47],
    )
    assert reply.usage.completion_tokens == 20  # type: ignore[union-attr]
    models = await sdk.openai(openai_emulator).models.list()
    assert [m.id for m in models.data] == ["emu-model"]


async def test_deepseek_thinking_mode_round_trip(sdk: Clients) -> None:
    scenario = {
        "flavour": "deepseek",
        "thinking": True,
        "answers": [{"reply": [READ], "reasoning": "Need the file."}],
    }
    with Emulator(api="openai", scenario=scenario) as emu:
        emu.expect_errors(1)
        first = await sdk.openai(emu).chat.completions.create(model="emu-gpt", messages=FIRST)
        message = first.choices[0].message.model_dump(exclude_none=True)
        assert message["reasoning_content"] == "Need the file."
        dropped = {k: v for k, v in message.items() if k != "reasoning_content"}
        tool = {"role": "tool", "tool_call_id": "call_emu_1_1", "content": "print()"}
        resent: list[Any] = [*FIRST, dropped, tool]
        with pytest.raises(openai.BadRequestError) as caught:
            await sdk.openai(emu).chat.completions.create(model="emu-gpt", messages=resent)
        emu.check()
    assert caught.value.body == {
        "message": "The `reasoning_content` in the thinking mode must be passed back to the API.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


async def test_local_server_quirks(sdk: Clients) -> None:
    scenario = {
        "tool_calls_as_text": True,
        "require_content_key": True,
        "answers": [{"reply": [READ]}, {"reply": [READ], "tool_calls_as_text": "fenced"}],
    }
    with Emulator(api="openai", scenario=scenario) as emu:
        bare = await sdk.openai(emu).chat.completions.create(model="emu-gpt", messages=FIRST)
        fenced = await sdk.openai(emu).chat.completions.create(model="emu-gpt", messages=FIRST)
        call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        no_content: list[Any] = [
            *FIRST,
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ]
        with pytest.raises(openai.InternalServerError) as caught:
            await sdk.openai(emu).chat.completions.create(model="emu-gpt", messages=no_content)
        emu.check()
    assert (
        bare.choices[0].message.content,
        bare.choices[0].message.tool_calls,
        bare.choices[0].finish_reason,
    ) == (
        '{"arguments":{"path":"src/app.py"},"name":"read_file"}',
        None,
        "stop",
    )
    assert (
        fenced.choices[0].message.content
        == '```json\n{"arguments":{"path":"src/app.py"},"name":"read_file"}\n```'
    )
    assert caught.value.status_code == 500
