"""The OpenAI-compatible emulator: `POST /v1/chat/completions` (JSON or SSE) and `GET /v1/models`.

Owns chat-completion validation (TESTING.md §3.8 exact texts), the usage flavours (`openai`, `deepseek`,
`moonshot-legacy`, `none`), automatic prefix caching, DeepSeek thinking mode and the local-server quirks.
It shares the scenario format, journal, clock and EMU-TOK-1 with the Anthropic emulator. Imports only the
standard library and sibling emulator modules, never agentd and never the `openai` SDK.

Sources: OpenAI chat-completions and prompt-caching docs (streaming chunks, `stream_options.include_usage`,
`prompt_tokens_details.cached_tokens`, minimum 1024 in units of 128); DeepSeek docs (context caching:
`prompt_cache_hit_tokens`/`prompt_cache_miss_tokens`, unit 64; thinking mode, opencode #24722); Moonshot
(legacy top-level `cached_tokens`, unit 256); llama-cpp-python (`content` key required).
"""

from __future__ import annotations

import json
from typing import Any

from .common import (
    Core,
    Plan,
    Request,
    auth_of,
    connection_faults,
    dumps,
    error_plan,
    new_entry,
    parse_body,
    sse_frame,
)
from .scenario import SUMMARY_TEXT, Reply, build_reply, check_expect, is_compaction
from .tokens import block_tokens, canon, count_tokens
from .validate import ApiError

__all__ = ["FLAVOURS", "completion_message", "handle", "usage_for", "validate_chat_request"]

COMPLETIONS, MODELS, PROPS = "/v1/chat/completions", "/v1/models", "/props"
FLAVOURS = {"openai": 128, "deepseek": 64, "moonshot-legacy": 256, "none": 128}  # cache unit in tokens

# HTTP faults: status -> (type, code, message); approximations of OpenAI's envelopes
HTTP_FAULTS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request (scripted fault)"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (scripted fault)."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    529: ("server_error", None, "Overloaded"),
}


def envelope(err: ApiError, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: `{"error": {"message", "type", "param": null, "code": null}}`."""
    return {"error": {"message": err.message, "type": err.type, "param": None, "code": code}}


def _fail(core: Core, entry: dict[str, Any], err: ApiError, code: str | None = None) -> Plan:
    return error_plan(core, entry, err, envelope(err, code))


def _tool_call_ids(msg: dict[str, Any]) -> list[str]:
    return [str(c.get("id")) for c in msg.get("tool_calls") or [] if isinstance(c, dict)]


def validate_chat_request(body: Any, *, thinking: bool = False) -> ApiError | None:
    """Validate a chat-completions body; return the first violation as a 400 `ApiError`, else None.

    Messages are read in order: an assistant message with `tool_calls` must be followed by tool messages
    answering every id; a tool message must answer a preceding `tool_calls`. In DeepSeek thinking mode
    every earlier assistant tool-call message must carry `reasoning_content`. A tool_call id used twice in the
    request is refused too (emulator text: agentd keeps ids unique whatever the server sends; case C16).
    """
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or "model" not in body:
        return ApiError(400, "invalid_request_error", "Invalid request: 'model' and 'messages' are required.")
    if not body["messages"]:
        return ApiError(400, "invalid_request_error", "Invalid 'messages': empty array.")  # approximated
    seen: set[str] = set()
    for msg in body["messages"]:
        for call_id in _tool_call_ids(msg) if isinstance(msg, dict) else []:
            if call_id in seen:
                return ApiError(
                    400,
                    "invalid_request_error",
                    f"Invalid 'messages': tool_call id {call_id!r} is used more than once (emulator text).",
                )
            seen.add(call_id)
    waiting: list[str] | None = None  # ids of the open tool_calls turn
    answered: set[str] = set()
    for msg in [*body["messages"], {"role": "<end>"}]:
        if not isinstance(msg, dict):
            return ApiError(400, "invalid_request_error", "Invalid 'messages': expected objects.")
        if msg.get("role") == "tool":
            if waiting is None or str(msg.get("tool_call_id")) not in waiting:
                # OpenAI's text, typo included
                return ApiError(
                    400,
                    "invalid_request_error",
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                    "with 'tool_calls'.",
                )
            answered.add(str(msg.get("tool_call_id")))
            continue
        missing = [i for i in waiting or [] if i not in answered]
        if missing:
            return ApiError(
                400,
                "invalid_request_error",
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
            )
        waiting, answered = None, set()
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            waiting = _tool_call_ids(msg)
    if thinking:  # DeepSeek thinking mode (opencode #24722)
        for msg in body["messages"]:
            if msg.get("role") == "assistant" and msg.get("tool_calls") and not msg.get("reasoning_content"):
                return ApiError(
                    400,
                    "invalid_request_error",
                    "The `reasoning_content` in the thinking mode must be passed back to the API.",
                )
    return None


def completion_message(reply: Reply, *, reasoning: str | None, as_text: str | None) -> dict[str, Any]:
    """The assistant message of a reply (its history form, which EMU-TOK-1 counts as output)."""
    text = "".join(b["text"] for b in reply.blocks if b["type"] == "text")
    calls = [
        {"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": b["json"]}}
        for b in reply.blocks
        if b["type"] == "tool_use"
    ]
    if as_text and calls:  # local-server quirk: the call arrives as text content
        call = calls[0]["function"]
        try:
            bare = canon({"arguments": json.loads(call["arguments"]), "name": call["name"]})
        except ValueError:  # cut short by max_tokens: the text is cut short too
            bare = '{"arguments":' + call["arguments"]
        text, calls = (f"```json\n{bare}\n```" if as_text == "fenced" else bare), []
    msg: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = calls
    return msg


def usage_for(flavour: str, prompt: int, completion: int, cached: int) -> dict[str, Any]:
    """The `usage` object of a flavour. `prompt` includes `cached` (OpenAI semantics)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if flavour in ("openai", "deepseek"):
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if flavour == "deepseek":
        usage["prompt_cache_hit_tokens"] = cached
        usage["prompt_cache_miss_tokens"] = prompt - cached
    if flavour == "moonshot-legacy":
        usage["cached_tokens"] = cached
    return usage


def handle(core: Core, req: Request) -> tuple[Plan, dict[str, Any]]:
    """Answer one request to the OpenAI-compatible emulator; the entry is already in the journal."""
    entry = new_entry(req, "openai")
    core.add_entry(entry)
    if req.method == "GET" and req.path == MODELS:
        models = sorted((core.scenario.get("models") or {"emu-model": {}}).keys())
        entries: list[dict[str, Any]] = [
            {"id": m, "object": "model", "created": 0, "owned_by": "emulator"} for m in models
        ]
        if core.scenario.get("server") == "vllm" and core.scenario.get("served_window"):
            for m in entries:
                m["max_model_len"] = int(core.scenario["served_window"])
        data = {"object": "list", "data": entries}
        core.update_entry(entry, status=200)
        return Plan(200, {"content-type": "application/json"}, body=dumps(data)), entry
    if req.method == "GET" and req.path == PROPS and core.scenario.get("server") == "llama.cpp":
        n_ctx = int(core.scenario.get("served_window") or 4096)
        props = {"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": 1, "model_path": "emu.gguf"}
        core.update_entry(entry, status=200)
        return Plan(200, {"content-type": "application/json"}, body=dumps(props)), entry
    if req.method != "POST" or req.path != COMPLETIONS:
        return _fail(
            core,
            entry,
            ApiError(404, "invalid_request_error", f"Unknown request URL: {req.method} {req.path}"),
        ), entry
    body, problem = parse_body(req.raw)
    auth = auth_of(req.headers)
    core.update_entry(
        entry, auth=auth, body=body, stream=isinstance(body, dict) and body.get("stream") is True
    )
    if auth is None:
        return _fail(
            core,
            entry,
            ApiError(401, "invalid_request_error", "You didn't provide an API key."),
            "missing_api_key",
        ), entry
    if problem is not None:
        return _fail(core, entry, ApiError(400, "invalid_request_error", problem)), entry
    thinking = bool(core.scenario.get("thinking"))
    err = validate_chat_request(body, thinking=thinking)
    if err is not None:
        core.validation_failed(entry, err)
        return _fail(core, entry, err), entry
    too_long = _exceeds_window(core, body)
    if too_long is not None:
        core.update_entry(entry, context_exceeded=True)
        return _fail(core, entry, too_long), entry
    if core.scenario.get("system_first_only") and any(
        m.get("role") == "system" for m in body["messages"][1:]
    ):  # chat templates that refuse a late system message (Mistral's, Gemma's, some Llama ones)
        return _fail(
            core, entry, ApiError(400, "invalid_request_error", "System message must be at the beginning.")
        ), entry
    if core.scenario.get("require_content_key"):  # llama-cpp-python: KeyError 'content' -> 500
        for msg in body["messages"]:
            if msg.get("role") == "assistant" and msg.get("tool_calls") and "content" not in msg:
                return _fail(core, entry, ApiError(500, "internal_server_error", "'content'")), entry
    return _answer(core, req, entry, body, thinking), entry


def _exceeds_window(core: Core, body: dict[str, Any]) -> ApiError | None:
    """A prompt (EMU-TOK-1 tokens) plus `max_tokens` longer than the scenario's `served_window` is refused the
    way llama.cpp's server refuses it: 400 `exceed_context_size_error` (OpenAI says `context_length_exceeded`)."""
    window = core.scenario.get("served_window")
    if not window:
        return None
    n = count_tokens(body, api="openai")
    if n <= int(window):
        return None
    if core.scenario.get("server") == "llama.cpp":
        text = "the request exceeds the available context size, try increasing it"
        return ApiError(400, "exceed_context_size_error", text)
    text = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in {n} "
        "tokens. Please reduce the length of the messages."
    )
    return ApiError(400, "invalid_request_error", text)


def _answer(core: Core, req: Request, entry: dict[str, Any], body: dict[str, Any], thinking: bool) -> Plan:
    if is_compaction(body, core.scenario.get("compaction_marker")):
        answer: dict[str, Any] = {
            "reply": [{"type": "text", "text": SUMMARY_TEXT}],
            "stop_reason": "end_turn",
        }
        index = 0
        core.update_entry(entry, compaction=True)
    else:
        taken = core.take_answer(body.get("messages"))
        if taken is None:
            core.problem(f"request #{req.seq} came after the scenario ran out")
            return _fail(core, entry, ApiError(500, "server_error", "emulator: scenario exhausted"))
        index, answer = taken
        core.update_entry(entry, answer=index)
        for p in check_expect(answer.get("expect"), body, api="openai"):
            core.problem(f"answer {index} (request #{req.seq}): {p}")
        if "http" in answer:
            status = int(answer["http"])
            kind, code, text = HTTP_FAULTS.get(status, ("server_error", None, f"Error {status}"))
            err = ApiError(status, str(answer.get("type", kind)), str(answer.get("message", text)))
            err.headers = {str(k).lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
            return _fail(core, entry, err, code)
    reasoning = str(answer.get("reasoning", "Thinking it over (emulator).")) if thinking else None
    as_text = answer.get("tool_calls_as_text", core.scenario.get("tool_calls_as_text"))
    as_text = "bare" if as_text is True else (str(as_text) if as_text else None)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))

    def cost(blocks: list[dict[str, Any]]) -> int:
        return block_tokens(completion_message(Reply(blocks, ""), reasoning=reasoning, as_text=as_text))

    reply = build_reply(answer, index, id_prefix="call_emu", max_tokens=max_tokens, cost=cost)
    message = completion_message(reply, reasoning=reasoning, as_text=as_text)
    cfg = core.model_config(body.get("model"))
    flavour = core.flavour
    unit = int(core.scenario.get("cache_unit", FLAVOURS.get(flavour, 128)))
    cached, hit, result = core.prefix_cache.begin(
        body, now=req.clock_start, minimum=int(cfg["min_cacheable_tokens"]), unit=unit
    )
    usage = usage_for(flavour, count_tokens(body, api="openai"), block_tokens(message), cached)
    core.update_entry(entry, usage=usage, hit_position=hit, status=200)
    finish = (
        "length"
        if reply.stop_reason == "max_tokens"
        else ("tool_calls" if message.get("tool_calls") else "stop")
    )
    if reply.stop_reason == "refusal":
        finish = "content_filter"

    def publish() -> None:
        core.prefix_cache.publish(result, now=core.clock.now())

    cid, model = f"chatcmpl-emu-{req.seq}", str(body["model"])
    if not body.get("stream"):
        data = {
            "id": cid,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": usage,
        }
        plan = Plan(200, {"content-type": "application/json"}, body=dumps(data), on_headers=publish)
        return connection_faults(plan, answer, b"")
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    chunks = stream_chunks(cid, model, message, finish, usage if include_usage else None, chunk=core.chunk)
    plan = Plan(200, {"content-type": "text/event-stream", "cache-control": "no-cache"}, on_headers=publish)
    plan.events = [*(sse_frame(c) for c in chunks), b"data: [DONE]\n\n"]
    if "drop_after_events" in answer:
        plan.events, plan.drop = plan.events[: int(answer["drop_after_events"])], True
    elif "stream_error_after_events" in answer:
        kind, text = str(answer.get("type", "server_error")), str(answer.get("message", "Overloaded"))
        error = {"error": {"message": text, "type": kind, "param": None, "code": None}}
        plan.events, plan.close = (
            [*plan.events[: int(answer["stream_error_after_events"])], sse_frame(error)],
            True,
        )
    if "hold_after_events" in answer:
        plan.hold_after, plan.gate = int(answer["hold_after_events"]), str(answer["gate"])
    return connection_faults(plan, answer, b": keep-alive\n\n")


def _pieces(s: str, size: int) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), size)]


def stream_chunks(
    cid: str,
    model: str,
    message: dict[str, Any],
    finish: str,
    usage: dict[str, Any] | None,
    *,
    chunk: int = 16,
) -> list[dict[str, Any]]:
    """`chat.completion.chunk` objects: role, reasoning and content pieces, tool calls with partial
    arguments, the finish chunk, then (with `include_usage`) a last chunk with `choices: []` and usage."""
    base: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model}
    if usage is not None:
        base["usage"] = None

    def mk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }

    out = [mk({"role": "assistant", "content": ""})]
    out += [mk({"reasoning_content": p}) for p in _pieces(message.get("reasoning_content") or "", chunk)]
    out += [mk({"content": p}) for p in _pieces(message.get("content") or "", chunk)]
    for k, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        out.append(
            mk(
                {
                    "tool_calls": [
                        {
                            "index": k,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        out += [
            mk({"tool_calls": [{"index": k, "function": {"arguments": p}}]})
            for p in _pieces(fn["arguments"], chunk)
        ]
    out.append(mk({}, finish))
    if usage is not None:
        out.append({**base, "choices": [], "usage": usage})
    return out
