"""Knowing the window (issue 17 part 1): what each local server says, the rule that combines it with the
configuration, and the context-exceeded errors of each provider (part 2)."""

from __future__ import annotations

import pytest

from agentd.core.fit import dense_tokens, fit_cut, output_reserve, tool_output_bytes
from agentd.core.window import window_for
from agentd.errors import ContextExceeded
from agentd.providers.anthropic import is_context_exceeded, provider_error_for_status, stated_window
from agentd.providers.served_window import (
    OLLAMA_DEFAULT_NUM_CTX,
    Served,
    from_lmstudio,
    from_models,
    from_ollama,
    from_props,
    server_root,
)


def test_llama_cpp_props_give_the_per_slot_context() -> None:
    props = {"default_generation_settings": {"n_ctx": 16384}, "total_slots": 1, "n_ctx": 32768}
    assert from_props(props) == Served(16384, "llama.cpp /props default_generation_settings.n_ctx")
    assert from_props({"n_ctx": 8192}) == Served(8192, "llama.cpp /props n_ctx")
    assert from_props({"error": {"code": 503}}) is None


def test_vllm_and_lm_studio_models_lists() -> None:
    data = {"data": [{"id": "a", "max_model_len": 4096}, {"id": "b", "max_model_len": 32768}]}
    assert from_models(data, "b") == Served(32768, "/v1/models max_model_len")
    assert from_models({"data": [{"id": "only", "max_model_len": 2048}]}, "other") == Served(
        2048, "/v1/models max_model_len"
    )
    assert (
        from_models({"data": [{"id": "x", "meta": {"n_ctx_train": 32768}}]}, "x") is None
    )  # training length
    assert from_lmstudio({"loaded_context_length": 8192, "max_context_length": 32768}) == Served(
        8192, "LM Studio loaded_context_length"
    )


def test_ollama_num_ctx_then_the_loaded_model_then_its_default() -> None:
    show = {"parameters": "stop <|im_end|>\nnum_ctx 12288", "model_info": {"qwen2.context_length": 32768}}
    assert from_ollama(show, None, "q") == Served(12288, "Ollama /api/show num_ctx")
    ps = {"models": [{"name": "q:latest", "context_length": 8192}]}
    assert from_ollama({"model_info": {}}, ps, "q") == Served(8192, "Ollama /api/ps context_length")
    assert from_ollama({"model_info": {}}, {"models": []}, "q") == Served(
        OLLAMA_DEFAULT_NUM_CTX, "Ollama default num_ctx"
    )
    assert from_ollama(None, None, "q") is None  # not Ollama


def test_server_root_and_the_window_rule() -> None:
    assert server_root("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    assert window_for(None, 32768, 16384) == 16384
    assert window_for(8192, 32768, 16384) == 8192  # the user may want less
    assert window_for(100_000, 32768, 16384) == 16384  # never more than served
    assert window_for(20_000, 32768, None) == 20_000
    assert window_for(None, 32768, None) == 32768


@pytest.mark.parametrize(
    ("message", "error_type", "window"),
    [
        (
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            None,
        ),
        (
            "This model's maximum context length is 4096 tokens. However, your messages resulted in 5013 tokens.",
            None,
            4096,
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", "invalid_request_error", 200000),
        ("Request too long", "context_length_exceeded", None),
    ],
)
def test_context_exceeded_errors_of_each_provider(
    message: str, error_type: str | None, window: int | None
) -> None:
    assert is_context_exceeded(message, error_type)
    assert stated_window(message) == window
    err = provider_error_for_status(
        provider="p", service="S", status=400, message=message, error_type=error_type
    )
    assert isinstance(err, ContextExceeded) and err.window_tokens == window and not err.retryable


def test_other_bad_requests_are_not_context_exceeded() -> None:
    err = provider_error_for_status(
        provider="p", service="S", status=400, message="Invalid 'messages': empty array."
    )
    assert not isinstance(err, ContextExceeded) and err.reason == "bad_request"


def test_tool_outputs_are_capped_by_pessimistic_tokens() -> None:
    cjk_hex = ("数据记录 " + "0123456789abcdef" * 4 + " 值\n") * 400  # ~32 KiB
    assert dense_tokens("abc") == 1 and dense_tokens("123") == 3 and dense_tokens("数据") == 2
    cap = tool_output_bytes(cjk_hex, 16384)
    assert 0 < cap < len(cjk_hex.encode("utf-8")) // 4  # 18k dense tokens into 4k
    assert tool_output_bytes("short text\n" * 100, 16384) == 0  # within a quarter: no cap
    assert output_reserve(8192, 4096) == 1024 and output_reserve(1024, 200_000) == 1024


def test_fit_cut_keeps_the_last_round_when_it_is_small() -> None:
    def msg(role: str, text: str) -> dict:
        return {"role": role, "content": [{"type": "text", "text": text}]}

    use = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "read_file", "input": {}}],
    }

    def result(n: int) -> dict:
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x" * n}]}

    small = [msg("user", "go"), use, result(100)]
    assert fit_cut(small, 4096) == 1  # the round [tool_use, tool_result] is kept
    assert (
        fit_cut([msg("user", "go"), use, result(40_000)], 4096) == 3
    )  # too big: the summary replaces it all
    assert fit_cut([msg("user", "only the prompt")], 4096) == 1
    assert fit_cut([], 4096) is None


@pytest.mark.parametrize("show", [{}, {"error": "not found"}, {"detail": "Not Found"}, {"object": "list"}])
def test_a_200_from_a_server_that_is_not_ollama_says_nothing_about_the_window(show: dict[str, str]) -> None:
    """issue 17 (break17): any JSON object from `POST /api/show` (a gateway that answers every path with 200)
    set the window to Ollama's default of 4096 tokens, so a 128k model behind it was compressed all the time."""
    assert from_ollama(show, {"models": []}, "q") is None
