"""The Messages API emulator: `POST /v1/messages` (JSON or SSE) and `/v1/messages/count_tokens`.

Owns request handling for the Anthropic API (TESTING.md §3.2-§3.5): auth, validation, answer selection,
faults, the SSE event sequence and the non-streamed message. Turns one `Request` into a `Plan` for the
HTTP layer. Imports only the standard library and sibling emulator modules, never agentd (and never the
`anthropic` SDK: the emulator must judge the SDK, not share code with it).

Sources: Anthropic docs pages on streaming (event grammar, ping, cumulative `message_delta.usage`),
errors (envelope, `request-id`, 429/500/529 types, "Overloaded"), tool use and prompt caching.
"""

from __future__ import annotations

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
from .content import MAX_BODY_BYTES
from .scenario import SUMMARY_TEXT, Reply, build_reply, check_expect, history_tokens, is_compaction
from .tokens import count_tokens
from .validate import ApiError, validate_request

__all__ = ["handle", "message_json", "sse_events"]

MESSAGES, COUNT = "/v1/messages", "/v1/messages/count_tokens"

# errors docs: HTTP status -> error type and a default message (503 is not in the docs table: approximated)
HTTP_FAULTS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request (scripted fault)"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    503: ("api_error", "Service unavailable"),
    504: ("timeout_error", "Request timeout"),
    529: ("overloaded_error", "Overloaded"),
}


def envelope(err: ApiError, seq: int) -> dict[str, Any]:
    """The error body of the errors docs, with `request_id`."""
    return {
        "type": "error",
        "error": {"type": err.type, "message": err.message},
        "request_id": f"req_emu_{seq}",
    }


def _fail(core: Core, entry: dict[str, Any], err: ApiError) -> Plan:
    return error_plan(core, entry, err, envelope(err, entry["seq"]))


def handle(core: Core, req: Request) -> tuple[Plan, dict[str, Any]]:
    """Answer one request to the Anthropic emulator; the entry is already in the journal."""
    entry = new_entry(req, "anthropic")
    core.add_entry(entry)
    if req.method != "POST" or req.path not in (MESSAGES, COUNT):
        return _fail(
            core, entry, ApiError(404, "not_found_error", f"Not found: {req.method} {req.path}")
        ), entry
    if len(req.raw) > MAX_BODY_BYTES:  # break11: the API's 32 MB request limit
        return _fail(core, entry, ApiError(413, *HTTP_FAULTS[413])), entry
    body, problem = parse_body(req.raw)
    auth = auth_of(req.headers)
    core.update_entry(
        entry, auth=auth, body=body, stream=isinstance(body, dict) and body.get("stream") is True
    )
    if auth is None:  # §3.2: neither x-api-key nor Authorization: Bearer
        return _fail(
            core, entry, ApiError(401, "authentication_error", "x-api-key header is required")
        ), entry
    if problem is not None:
        return _fail(core, entry, ApiError(400, "invalid_request_error", problem)), entry
    cfg = core.model_config(body.get("model") if isinstance(body, dict) else None)
    if req.path == COUNT and isinstance(body, dict):  # count_tokens takes no max_tokens (token-counting docs)
        body = {"max_tokens": 1, **body}
    err = validate_request(
        body,
        strict=core.strict,
        anthropic_version=req.headers.get("anthropic-version"),
        context_window=int(cfg["context_window"]),
        prefill=cfg.get("prefill"),
    )
    if err is not None:
        core.validation_failed(entry, err)
        return _fail(core, entry, err), entry
    if req.path == COUNT:  # same validation, no cache logic
        core.update_entry(entry, status=200)
        return Plan(
            200, {"content-type": "application/json"}, body=dumps({"input_tokens": count_tokens(body)})
        ), entry
    return _answer(core, req, entry, body, cfg), entry


def _answer(
    core: Core, req: Request, entry: dict[str, Any], body: dict[str, Any], cfg: dict[str, Any]
) -> Plan:
    if is_compaction(body, core.scenario.get("compaction_marker")):  # §3.3: consumes no answer
        answer: dict[str, Any] = {
            "reply": [{"type": "text", "text": SUMMARY_TEXT}],
            "stop_reason": "end_turn",
        }
        index = 0
        core.update_entry(entry, compaction=True)
        if core.scenario.get("compaction_gate"):  # hold the summary's stream at that gate (crash tests)
            answer.update(hold_after_events=0, gate=str(core.scenario["compaction_gate"]))
    else:
        taken = core.take_answer(body.get("messages"))
        if taken is None:
            core.problem(f"request #{req.seq} came after the scenario ran out")
            return _fail(core, entry, ApiError(500, "api_error", "emulator: scenario exhausted"))
        index, answer = taken
        core.update_entry(entry, answer=index)
        for p in check_expect(answer.get("expect"), body):
            core.problem(f"answer {index} (request #{req.seq}): {p}")
        if "http" in answer:
            return _http_fault(core, entry, answer)
    reply = build_reply(
        answer,
        index,
        id_prefix="toolu_emu",
        max_tokens=body["max_tokens"],
        cost=lambda blocks: sum(history_tokens(b) for b in blocks),
    )
    result = core.cache.begin(
        body, now=req.clock_start, min_cacheable_tokens=int(cfg["min_cacheable_tokens"])
    )
    usage = {**result.usage, "output_tokens": sum(history_tokens(b) for b in reply.blocks)}
    message = message_json(f"msg_emu_{req.seq}", str(body["model"]), reply, usage)
    core.update_entry(entry, usage=usage, hit_position=result.hit_position, status=200)

    def publish() -> None:
        core.cache.publish(result, now=core.clock.now())

    if not body.get("stream"):
        plan = Plan(200, {"content-type": "application/json"}, body=dumps(message), on_headers=publish)
        if "gate" in answer:
            plan.hold_after, plan.gate = 0, str(answer["gate"])
        return connection_faults(plan, answer, b"")
    events = [sse_frame(data, name) for name, data in sse_events(message, reply, answer, chunk=core.chunk)]
    plan = Plan(200, {"content-type": "text/event-stream", "cache-control": "no-cache"}, events=events)
    plan.on_headers = publish
    _stream_faults(plan, answer)
    return plan


def _http_fault(core: Core, entry: dict[str, Any], answer: dict[str, Any]) -> Plan:
    status = int(answer["http"])
    kind, text = HTTP_FAULTS.get(status, ("api_error", f"Error {status}"))
    err = ApiError(status, str(answer.get("type", kind)), str(answer.get("message", text)))
    err.headers = {str(k).lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
    return _fail(core, entry, err)


def _stream_faults(plan: Plan, answer: dict[str, Any]) -> None:
    assert plan.events is not None
    if "drop_after_events" in answer:  # shut the socket after n events, no message_stop
        plan.events, plan.drop = plan.events[: int(answer["drop_after_events"])], True
    elif "stream_error_after_events" in answer:  # errors docs: an error event inside a 200 stream
        kind, text = str(answer.get("type", "overloaded_error")), str(answer.get("message", "Overloaded"))
        error = {"type": "error", "error": {"type": kind, "message": text}}
        plan.events = [*plan.events[: int(answer["stream_error_after_events"])], sse_frame(error, "error")]
        plan.close = True
    if "hold_after_events" in answer:
        plan.hold_after, plan.gate = int(answer["hold_after_events"]), str(answer["gate"])
    connection_faults(plan, answer, sse_frame({"type": "ping"}, "ping"))


def _block_json(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "text", "text": block["text"]}
    # A tool_use cut by max_tokens: the non-streamed form carries {} (approximation of the emulator)
    return {
        "type": "tool_use",
        "id": block["id"],
        "name": block["name"],
        "input": block["input"] if block["complete"] else {},
    }


def message_json(msg_id: str, model: str, reply: Reply, usage: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed response: the accumulated message with the same usage as the stream."""
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_block_json(b) for b in reply.blocks],
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "stop_details": reply.stop_details,
        "usage": usage,
    }


def _chunks(s: str, size: int) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), size)] or [""]


def sse_events(
    message: dict[str, Any], reply: Reply, answer: dict[str, Any], *, chunk: int = 16
) -> list[tuple[str, dict[str, Any]]]:
    """The §3.4 event sequence as (event name, data) pairs, before faults cut it.

    message_start (content [], stop_reason null, usage with the input fields and output_tokens 1); per
    block start / deltas of `chunk` characters / stop; a ping after the first block start; message_delta
    with the cumulative usage; message_stop. `unknown_event` adds an unseen event after message_start.
    """
    usage = message["usage"]
    start_usage = {**{k: v for k, v in usage.items() if k != "output_tokens"}, "output_tokens": 1}
    start = {**message, "content": [], "stop_reason": None, "stop_details": None, "usage": start_usage}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    if answer.get("unknown_event"):
        name = str(answer["unknown_event"])
        events.append((name, {"type": name}))
    ping = ("ping", {"type": "ping"})
    if not reply.blocks:
        events.append(ping)
    for i, b in enumerate(reply.blocks):
        if b["type"] == "text":
            head: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(b["text"], chunk)]
        else:
            head = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(b["json"], chunk)]
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": i, "content_block": head})
        )
        if i == 0:
            events.append(ping)
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta: dict[str, Any] = {"stop_reason": reply.stop_reason, "stop_sequence": None}
    if reply.stop_details is not None:
        delta["stop_details"] = reply.stop_details
    delta_usage: dict[str, Any] = {"output_tokens": usage["output_tokens"]}
    if answer.get("repeat_input_usage_in_delta"):  # cumulative input fields repeated (overwrite, never add)
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        delta_usage = {**{k: usage[k] for k in keys}, **delta_usage}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": delta_usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events
