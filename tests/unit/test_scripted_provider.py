"""ScriptedProvider: scenario replay, faults, compaction marker, exhaustion, request validation, scenario errors.

Also the provider factory (unknown provider, missing credentials, defaults) and the model table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentd.clock import ManualClock
from agentd.errors import ConfigError, MissingCredentials, ProviderError
from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.base import ModelRequest, ModelResponse, StreamEvent, Usage, run_with_retries
from agentd.providers.factory import make_provider
from agentd.providers.models import DEFAULT_WINDOW_TOKENS, accepts_images, context_window
from agentd.providers.openai_compat import OpenAICompatProvider
from agentd.providers.scripted import DEFAULT_SUMMARY, ScriptedProvider, load_scenario

TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]
SYSTEM = [{"type": "text", "text": "You are agentd."}]


def request(messages: list[dict[str, Any]], max_tokens: int = 1024) -> ModelRequest:
    return ModelRequest(
        model="scripted", system=SYSTEM, tools=TOOLS, messages=messages, max_tokens=max_tokens
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def tokens(value: Any) -> int:
    return -(-len(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)) // 4)


async def run(provider: ScriptedProvider, req: ModelRequest) -> tuple[ModelResponse, list[StreamEvent]]:
    events: list[StreamEvent] = []
    return await provider.stream(req, events.append), events


async def test_replays_text_and_tool_use_then_the_next_answer() -> None:
    scenario = {
        "answers": [
            {
                "reply": [
                    {"text": "Reading the file now."},
                    {"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}},
                ],
                "stop_reason": "tool_use",
            },
            {"reply": [{"text": "Done."}]},
        ]
    }
    provider = ScriptedProvider(scenario)
    first = request([user("read a.txt")])
    response, events = await run(provider, first)
    text = {"type": "text", "text": "Reading the file now."}
    tool = {"type": "tool_use", "id": "toolu_scr_1_1", "name": "read_file", "input": {"path": "a.txt"}}
    assert response == ModelResponse(
        id="msg_scr_1",
        content=[text, tool],
        stop_reason="tool_use",
        usage=Usage(
            input_tokens=tokens(first.body()),
            output_tokens=tokens([text, tool]),
            cache_creation_input_tokens=0,
            cache_read_input_tokens=0,
        ),
        model="scripted",
    )
    assert events == [
        StreamEvent("text_delta", text="Reading the file"),
        StreamEvent("text_delta", text=" now."),
        StreamEvent("block_done", block=text),
        StreamEvent("block_done", block=tool),
    ]

    second = request(
        [
            user("read a.txt"),
            {"role": "assistant", "content": [text, tool]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_scr_1_1", "content": "hi"}],
            },
        ]
    )
    response, events = await run(provider, second)
    assert (response.id, response.content, response.stop_reason) == (
        "msg_scr_2",
        [{"type": "text", "text": "Done."}],
        "end_turn",
    )
    assert provider.answers_left == 0


async def test_fault_429_honours_retry_after_ms_on_the_clock() -> None:
    provider = ScriptedProvider(
        {
            "answers": [
                {"fault": {"http": 429, "headers": {"retry-after-ms": "1"}}},
                {"fault": {"http": 529}},
                {"reply": [{"text": "ok"}]},
            ]
        }
    )
    clock = ManualClock()
    seen: list[tuple[int, float, str]] = []
    req = request([user("hi")])
    response = await run_with_retries(
        lambda n: provider.stream(req, lambda e: None),
        clock=clock,
        max_total_s=60,
        on_retry=lambda n, delay, err: seen.append((n, delay, err.message)),
    )
    assert response.content == [{"type": "text", "text": "ok"}]
    assert clock.sleeps == [0.001, 2.0]  # the 529 has no hint: backoff for attempt 2
    assert seen == [
        (1, 0.001, "Scripted provider rate limit (HTTP 429): Rate limited"),
        (2, 2.0, "Scripted provider is unavailable (HTTP 529): Overloaded"),
    ]


async def test_fault_400_and_401_are_not_retryable() -> None:
    provider = ScriptedProvider(
        {"answers": [{"fault": {"http": 400, "message": "bad thing"}}, {"fault": {"http": 401}}]}
    )
    with pytest.raises(ProviderError) as bad:
        await run(provider, request([user("hi")]))
    assert (bad.value.message, bad.value.reason, bad.value.retryable, bad.value.http_status) == (
        "Scripted provider rejected the request (HTTP 400): bad thing",
        "bad_request",
        False,
        400,
    )
    with pytest.raises(ProviderError) as auth:
        await run(provider, request([user("hi")]))
    assert (auth.value.reason, auth.value.retryable) == ("authentication", False)


async def test_mid_stream_error_is_retryable_and_the_retry_is_announced() -> None:
    provider = ScriptedProvider(
        {
            "answers": [
                {"reply": [{"text": "This will be cut off soon."}], "stream_error_after_events": 3},
                {"reply": [{"text": "Again."}]},
            ]
        }
    )
    events: list[StreamEvent] = []
    req = request([user("hi")])

    def on_retry(n: int, delay: float, err: ProviderError) -> None:
        events.append(StreamEvent("retry", attempt=n, delay_s=delay, reason=err.message))

    response = await run_with_retries(
        lambda n: provider.stream(req, events.append), clock=ManualClock(), max_total_s=60, on_retry=on_retry
    )
    assert events == [
        StreamEvent("text_delta", text="This will be cut"),
        StreamEvent(
            "retry",
            attempt=1,
            delay_s=1.0,
            reason="Scripted provider stream failed (overloaded_error): Overloaded",
        ),
        StreamEvent("text_delta", text="Again."),
        StreamEvent("block_done", block={"type": "text", "text": "Again."}),
    ]
    assert response.content == [{"type": "text", "text": "Again."}]


async def test_retries_exhausted_is_unavailable() -> None:
    provider = ScriptedProvider({"answers": [{"fault": {"http": 503}}] * 3})
    req = request([user("hi")])
    with pytest.raises(ProviderError) as err:
        await run_with_retries(
            lambda n: provider.stream(req, lambda e: None), clock=ManualClock(), max_total_s=2.5
        )
    assert (err.value.reason, err.value.retryable, err.value.message) == (
        "unavailable",
        False,
        "Scripted provider is unavailable (HTTP 503): Internal server error "
        "(gave up after 2 attempts, 1 s of retries within retries.max_total_s=2.5 s)",
    )


async def test_compaction_request_gets_the_summary_and_consumes_no_answer() -> None:
    provider = ScriptedProvider(
        {"compaction_marker": "Please summarise:", "answers": [{"reply": [{"text": "after"}]}]}
    )
    summary, _ = await run(provider, request([user("Please summarise: the old talk")], max_tokens=512))
    assert summary.content == [{"type": "text", "text": DEFAULT_SUMMARY}]
    assert provider.answers_left == 1
    default_marker = ScriptedProvider({"answers": [], "summary": "S."})
    response, _ = await run(default_marker, request([user("Summarize the conversation below.\n\nuser: hi")]))
    assert response.content == [{"type": "text", "text": "S."}]


async def test_exhausted_scenario_is_a_bad_request() -> None:
    provider = ScriptedProvider({"answers": [{"reply": [{"text": "one"}]}]})
    await run(provider, request([user("hi")]))
    with pytest.raises(ProviderError) as err:
        await run(provider, request([user("hi")]))
    assert (err.value.message, err.value.reason) == (
        "scripted scenario exhausted: all 1 answers were used before request 2",
        "bad_request",
    )


async def test_invalid_request_is_rejected_before_any_answer() -> None:
    provider = ScriptedProvider({"answers": [{"reply": [{"text": "one"}]}]})
    bad = request([{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}])
    with pytest.raises(ProviderError) as err:
        await run(provider, bad)
    assert (err.value.message, err.value.reason, provider.answers_left) == (
        'scripted provider rejected the request (as the API would, HTTP 400): messages: first message must use the "user" role',
        "bad_request",
        1,
    )


async def test_truncated_tool_json_and_empty_end_turn() -> None:
    provider = ScriptedProvider(
        {
            "answers": [
                {
                    "reply": [
                        {"text": "Writing."},
                        {"tool_use": {"name": "read_file", "input": {"path": "x"}}},
                    ],
                    "stop_reason": "max_tokens",
                    "truncate_tool_json": True,
                },
                {"empty_end_turn": True},
            ]
        }
    )
    response, events = await run(provider, request([user("hi")]))
    assert (response.content, response.stop_reason, response.truncated_tool_use_ids) == (
        [{"type": "text", "text": "Writing."}],
        "max_tokens",
        ["toolu_scr_1_1"],
    )
    assert [e.kind for e in events] == ["text_delta", "block_done"]
    response, events = await run(provider, request([user("hi")]))
    assert (response.content, response.stop_reason, events) == ([], "end_turn", [])


def test_load_scenario_reads_a_file(tmp_path: Path) -> None:
    data = {"answers": [{"reply": [{"text": "hi"}]}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    assert load_scenario(path) == data
    assert ScriptedProvider(str(path)).scenario == data


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "file not found; pass the path of a scenario JSON file"),
        ("{oops", "not valid JSON (line 1 column 2: Expecting property name enclosed in double quotes)"),
        ("[]", 'the top level must be an object with "answers"'),
        ('{"answers": {}}', '"answers" must be a list of answers'),
        ('{"answers": [{"text": "x"}]}', 'answers[0] must have "reply" or "fault"'),
        (
            '{"answers": [{"reply": []}, {"reply": []}, {"reply": {"text": "x"}}]}',
            'answers[2].reply must be a list of {"text": "..."} or '
            '{"tool_use": {"name": "...", "input": {...}}} items',
        ),
        (
            '{"answers": [{"reply": [{"tool_use": {"input": {}}}]}]}',
            'answers[0].reply[0] must be {"text": "..."} or {"tool_use": {"name": "...", "input": {...}}}',
        ),
        (
            '{"answers": [{"fault": {"http": "529"}}]}',
            'answers[0].fault must be an object with an integer "http" status',
        ),
    ],
)
def test_malformed_scenarios_give_one_clear_line(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "scenario.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert err.value.message == f"scenario {path}: {problem}"


# ---------------------------------------------------------------- the factory and the model table


def test_factory_unknown_provider_and_missing_scenario() -> None:
    with pytest.raises(ConfigError) as unknown:
        make_provider("gemini", env={})
    assert unknown.value.message == "unknown provider 'gemini'; use anthropic, openai or scripted"
    with pytest.raises(ConfigError) as no_scenario:
        make_provider("scripted", env={})
    assert no_scenario.value.message == (
        "provider 'scripted' needs a scenario: set scenario = \"FILE\" or pass --scenario FILE"
    )


def test_factory_missing_credentials() -> None:
    with pytest.raises(MissingCredentials) as anthropic_err:
        make_provider("anthropic", env={"ANTHROPIC_API_KEY": " "})
    assert (anthropic_err.value.message, anthropic_err.value.reason) == (
        "No API key: set ANTHROPIC_API_KEY in the environment (or choose another provider with --provider)",
        "missing_credentials",
    )
    with pytest.raises(MissingCredentials) as openai_err:
        make_provider("openai", api_key_env="DEEPSEEK_API_KEY", base_url="https://api.deepseek.com", env={})
    assert openai_err.value.message == (
        "No API key: set DEEPSEEK_API_KEY in the environment (or choose another provider with --provider)"
    )


def test_factory_builds_each_provider() -> None:
    anthropic_p = make_provider("anthropic", env={"ANTHROPIC_API_KEY": "k-123456"})
    assert isinstance(anthropic_p, AnthropicProvider)
    assert (anthropic_p.model, anthropic_p.base_url, anthropic_p.api_key_env) == (
        "claude-sonnet-4-6",
        None,
        "ANTHROPIC_API_KEY",
    )
    local = make_provider(
        "openai",
        model="qwen2.5-coder",
        base_url="http://127.0.0.1:11434/v1",
        openai_options={"seed": 7},
        env={},
    )
    assert isinstance(local, OpenAICompatProvider)
    assert (local.model, local.seed, local.temperature) == ("qwen2.5-coder", 7, None)
    from_env = make_provider(
        "openai", env={"OPENAI_API_KEY": "k-1", "OPENAI_BASE_URL": "http://localhost:8080/v1"}
    )
    assert isinstance(from_env, OpenAICompatProvider)
    assert (from_env.model, from_env.base_url) == ("gpt-4o-mini", "http://localhost:8080/v1")
    scripted = make_provider("scripted", scenario={"answers": []}, env={})
    assert isinstance(scripted, ScriptedProvider)
    assert scripted.model == "scripted"


def test_model_windows() -> None:
    assert [
        context_window("claude-sonnet-4-6"),
        context_window("claude-sonnet-4-5-20250929"),
        context_window("gpt-4o-mini-2024-07-18"),
        context_window("deepseek-chat"),
        context_window("qwen2.5-coder:7b"),
    ] == [200_000, 200_000, 128_000, 128_000, DEFAULT_WINDOW_TOKENS]
    assert DEFAULT_WINDOW_TOKENS == 32768


def test_model_images_follow_the_table_and_the_setting() -> None:
    """A text-only model is not offered image prompts (found after issue 10: ACP advertised images for every
    provider but `scripted`, so a llama.cpp model got a request with an image block it cannot read)."""
    cases = [
        ("anthropic", "claude-haiku-4-5-20251001", None), ("openai", "gpt-4o-2024-08-06", None),
        ("openai", None, None), ("openai", "deepseek-chat", None), ("openai", "qwen2.5-coder:7b", None),
        ("openai", "llava:13b", True), ("anthropic", "claude-sonnet-4-6", False), ("scripted", "scripted", None),
    ]  # fmt: skip
    assert [accepts_images(p, m, c) for p, m, c in cases] == [
        True,
        True,
        True,
        False,
        False,
        True,
        False,
        False,
    ]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_JSON)
def test_usage_length_is_the_compact_json_length(value: Any) -> None:
    """Issue 12 follow-up, item 8 (H19): the usage estimate's length, counted without recursion, is exactly the
    compact JSON length the provider estimated before."""
    from agentd.providers.scripted import _json_length

    assert _json_length(value) == len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
