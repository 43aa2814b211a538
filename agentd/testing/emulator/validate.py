"""Request validation of the Messages API emulator: the same 400s as the service (TESTING.md §3.5).

Owns `ApiError` and `validate_request`. Checks run in the fixed order of the §3.5 table and the first
violation is reported, so a test can build a request with exactly one. agentd's own validator
(`agentd/core/validate.py`, CONTRACTS.md §8) implements the same rules separately: this module imports no
agentd code and agentd's production code must not import it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .content import check_images, check_tools
from .tokens import as_blocks, count_tokens

__all__ = ["ApiError", "breakpoints_in_order", "validate_request"]

STRICT_VERSION = "2026-10-21"  # anthropic 2.x sends it; TESTING.md §3.2 (rejects sampling parameters)
_TTLS = ("5m", "1h")
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")


@dataclass(eq=True)
class ApiError(Exception):
    """An API error: HTTP `status`, error `type` (e.g. `invalid_request_error`) and exact `message`."""

    status: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        return f"{self.status} {self.type}: {self.message}"


Path = str  # a dotted location such as `messages.0.content.4`, `system.1`, `tools.3`


def _blocks(msg: Any) -> list[Any]:
    return as_blocks(msg.get("content")) if isinstance(msg, dict) else []


def _typed(msg: Any, kind: str) -> list[dict[str, Any]]:
    return [b for b in _blocks(msg) if isinstance(b, dict) and b.get("type") == kind]


def _cache_blocks(body: dict[str, Any]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every block that may carry `cache_control`, in processing order tools -> system -> messages."""
    for k, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, dict):
            yield f"tools.{k}", tool
    system = body.get("system")
    if isinstance(system, list):
        for k, b in enumerate(system):
            if isinstance(b, dict):
                yield f"system.{k}", b
    for i, msg in enumerate(body.get("messages") or []):
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
            continue
        for j, b in enumerate(msg["content"]):
            if not isinstance(b, dict):
                continue
            yield f"messages.{i}.content.{j}", b
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                for k, inner in enumerate(b["content"]):
                    if isinstance(inner, dict):
                        yield f"messages.{i}.content.{j}.content.{k}", inner


def _ttl(cc: Any) -> str:
    return str(cc.get("ttl", "5m")) if isinstance(cc, dict) else "5m"


def _eligible(block: dict[str, Any]) -> bool:
    """Can automatic caching put its breakpoint here? Not on thinking or empty text blocks."""
    if block.get("type") in ("thinking", "redacted_thinking"):
        return False
    return not (block.get("type") == "text" and block.get("text") == "")


def _auto_target(body: dict[str, Any]) -> tuple[Path, dict[str, Any]] | None:
    """Where a top-level `cache_control` lands: the last eligible top-level block (TESTING.md §3.7 item 2)."""
    top = [(p, b) for p, b in _cache_blocks(body) if p.count(".content.") <= 1]  # not inside a tool_result
    for path, block in reversed(top):
        if _eligible(block):
            return path, block
    return None


def breakpoints_in_order(body: dict[str, Any]) -> list[tuple[Path, str]]:
    """`(path, ttl)` of every breakpoint in processing order, the top-level automatic one included."""
    out = [(p, _ttl(b["cache_control"])) for p, b in _cache_blocks(body) if "cache_control" in b]
    auto = body.get("cache_control")
    target = _auto_target(body) if auto is not None else None
    if target is not None and "cache_control" not in target[1]:
        out.append((target[0], _ttl(auto)))
    return out


# --- schema (pydantic-style texts; the service's texts for these are of the form `<loc>: <problem>`) ---


def _check_schema(body: Any, version: str | None) -> str | None:
    if not isinstance(body, dict):
        return "body: Input should be a valid dictionary"
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    # TESTING.md §3.2: under anthropic-version 2026-10-21 the sampling parameters are extra inputs.
    if version is not None and version >= STRICT_VERSION:
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                return f"{name}: Extra inputs are not permitted"
    if not isinstance(body["model"], str):
        return "model: Input should be a valid string"
    if not isinstance(body["max_tokens"], int) or isinstance(body["max_tokens"], bool):
        return "max_tokens: Input should be a valid integer"
    if body["max_tokens"] < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    if not isinstance(body["messages"], list):
        return "messages: Input should be a valid list"
    if not body["messages"]:
        return "messages: at least one message is required"  # approximated text (emulator)
    return _check_message_shapes(body) or _check_cache_control_shapes(body)


def _check_message_shapes(body: dict[str, Any]) -> str | None:
    for i, msg in enumerate(body["messages"]):
        if not isinstance(msg, dict):
            return f"messages.{i}: Input should be a valid dictionary"
        if msg.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = msg.get("content")
        if not isinstance(content, (str, list)):
            return f"messages.{i}.content: Input should be a valid string or list"
        for j, b in enumerate(content if isinstance(content, list) else []):
            if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                return f"messages.{i}.content.{j}.type: Field required"
            for key in {"tool_use": ("id", "name", "input"), "tool_result": ("tool_use_id",)}.get(
                b["type"], ()
            ):
                if key not in b:
                    return f"messages.{i}.content.{j}.{key}: Field required"
            problem = _tool_block_fields(b)
            if problem is not None:
                return f"messages.{i}.content.{j}.{b['type']}.{problem}"
    return None


def _tool_block_fields(b: dict[str, Any]) -> str | None:
    """The field types and id pattern of a tool_use / tool_result block (pydantic-style texts of the
    service: a tool_use id outside `^[a-zA-Z0-9_-]+$`, e.g. from another provider's `functions.f:0`)."""
    ids = {"tool_use": "id", "tool_result": "tool_use_id"}.get(b["type"])
    if ids is None:
        return None
    if not isinstance(b[ids], str) or not _TOOL_ID.fullmatch(b[ids]):
        return f"{ids}: String should match pattern '^[a-zA-Z0-9_-]+$'"
    if b["type"] == "tool_use" and not isinstance(b["name"], str):
        return "name: Input should be a valid string"
    if b["type"] == "tool_use" and not isinstance(b["input"], dict):
        return "input: Input should be a valid dictionary"
    return None


def _check_cache_control_shapes(body: dict[str, Any]) -> str | None:
    located = [("", body)] if "cache_control" in body else []
    located += [(p, b) for p, b in _cache_blocks(body) if "cache_control" in b]
    for path, b in located:
        cc = b.get("cache_control")
        prefix = f"{path}." if path else ""
        if not isinstance(cc, dict) or cc.get("type") != "ephemeral":
            return f"{prefix}cache_control.type: Input should be 'ephemeral'"
        if cc.get("ttl", "5m") not in _TTLS:
            return f"{prefix}cache_control.ttl: Input should be '5m' or '1h'"
    return None


# --- the §3.5 table, in order ---


def _tool_use_answered(msgs: list[Any]) -> str | None:
    # claude-code #5060, #3512; kilocode #5163
    for i, msg in enumerate(msgs):
        if msg["role"] != "assistant":
            continue
        ids = [b.get("id") for b in _typed(msg, "tool_use")]
        nxt = msgs[i + 1] if i + 1 < len(msgs) and msgs[i + 1]["role"] == "user" else None
        answered = {b.get("tool_use_id") for b in _typed(nxt, "tool_result")}
        missing = [str(x) for x in ids if x not in answered]
        if missing:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                "in the next message."
            )
    return None


def _tool_result_has_use(msgs: list[Any]) -> str | None:
    # claude-code #13460
    for i, msg in enumerate(msgs):
        prev = msgs[i - 1] if i > 0 and msgs[i - 1]["role"] == "assistant" else None
        offered = {b.get("id") for b in _typed(prev, "tool_use")}
        for j, b in enumerate(_blocks(msg)):
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") not in offered:
                return (
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                    "block in the previous message."
                )
    return None


def _unique_tool_use_ids(msgs: list[Any]) -> str | None:
    # claude-code #21317, #28515 (messages.43.content.2: across the whole request, not one message)
    seen: set[str] = set()
    for i, msg in enumerate(msgs):
        for j, b in enumerate(_blocks(msg)):
            if isinstance(b, dict) and b.get("type") == "tool_use":
                key = repr(b.get("id"))
                if key in seen:
                    return f"messages.{i}.content.{j}: `tool_use` ids must be unique"
                seen.add(key)
    return None


def _single_result(msgs: list[Any]) -> str | None:
    # goose, forkwright/aletheia #57: "each tool_use must have a single result"
    for i, msg in enumerate(msgs):
        answered: set[str] = set()
        for j, b in enumerate(_blocks(msg)):
            if isinstance(b, dict) and b.get("type") == "tool_result":
                key = repr(b.get("tool_use_id"))
                if key in answered:
                    return (
                        f"messages.{i}.content.{j}: each tool_use must have a single result. Found multiple "
                        f"`tool_result` blocks with id: {b.get('tool_use_id')}"
                    )
                answered.add(key)
    return None


def _tool_results_first(msgs: list[Any]) -> str | None:
    # claude-code #37; apify/tester-mcp-client #12; rule: handle-tool-calls docs
    for i in range(1, len(msgs)):
        if msgs[i]["role"] != "user" or msgs[i - 1]["role"] != "assistant":
            continue
        n = len(_typed(msgs[i - 1], "tool_use"))
        lead = 0
        for b in _blocks(msgs[i]):
            if not (isinstance(b, dict) and b.get("type") == "tool_result"):
                break
            lead += 1
        if n and lead < n:
            return (
                f"messages.{i}: Did not find {n} `tool_result` block(s) at the beginning of this message. "
                "Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks."
            )
    return None


def _non_empty_messages(msgs: list[Any]) -> str | None:
    # claude-code #6774; ellmer #709
    for i, msg in enumerate(msgs):
        final_assistant = i == len(msgs) - 1 and msg["role"] == "assistant"
        if msg.get("content") in ("", []) and not final_assistant:
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
    return None


def _non_empty_text(body: dict[str, Any]) -> str | None:
    # claude-code #59812. An empty text block that carries cache_control gets the more specific text of the
    # next-but-one rule instead, as the service answered in hermes-agent #1216.
    for path, b in _cache_blocks(body):
        if b.get("type") == "text" and b.get("text") == "" and "cache_control" not in b:
            return f"{path.split('.')[0]}: text content blocks must be non-empty"
    for path, b in _cache_blocks(body):
        # anthropics/claude-code#23440, nick1udwig/kibitz#78: "text content blocks must contain
        # non-whitespace text" (the service's wording, observed)
        text = b.get("text")
        if b.get("type") == "text" and isinstance(text, str) and text and not text.strip():
            return f"{path.split('.')[0]}: text content blocks must contain non-whitespace text"
    return None


def _max_breakpoints(body: dict[str, Any]) -> str | None:
    # Anthropic.SDK #50; sub2api #176 (top-level automatic caching takes a slot: prompt-caching docs)
    n = sum(1 for _, b in _cache_blocks(body) if "cache_control" in b) + ("cache_control" in body)
    return f"A maximum of 4 blocks with cache_control may be provided. Found {n}." if n > 4 else None


def _no_cache_control_on_empty_text(body: dict[str, Any]) -> str | None:
    # claude-code #50082; hermes-agent #1216
    for path, b in _cache_blocks(body):
        if b.get("type") == "text" and b.get("text") == "" and "cache_control" in b:
            return f"{path}.text: cache_control cannot be set for empty text blocks"
    return None


def _no_cache_control_on_thinking(body: dict[str, Any]) -> str | None:
    # prompt-caching docs: thinking blocks cannot be cached directly. Documented without a text: ours.
    for path, b in _cache_blocks(body):
        if b.get("type") in ("thinking", "redacted_thinking") and "cache_control" in b:
            return f"{path}.cache_control: cache_control cannot be set on thinking blocks (emulator text)"
    return None


def _auto_ttl_conflict(body: dict[str, Any]) -> str | None:
    # prompt-caching docs (automatic caching): a top-level TTL that conflicts with an explicit one on the
    # last block is a 400 documented without a text; the text is the emulator's.
    target = _auto_target(body) if "cache_control" in body else None
    if target is None or "cache_control" not in target[1]:
        return None
    top, explicit = _ttl(body["cache_control"]), _ttl(target[1]["cache_control"])
    if top != explicit:
        return (
            f"cache_control: the top-level ttl='{top}' conflicts with ttl='{explicit}' set on "
            f"{target[0]} (emulator text)"
        )
    return None


def _ttl_order(body: dict[str, Any]) -> str | None:
    # headroom #2939; claude-code-cache-fix #44
    seen_5m = False
    for path, ttl in breakpoints_in_order(body):
        if ttl == "1h" and seen_5m:
            return (
                f"{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: `tools`, "
                "`system`, `messages`."
            )
        seen_5m = seen_5m or ttl == "5m"
    return None


def _first_is_user(msgs: list[Any]) -> str | None:
    # Bedrock; historical first-party API (strict mode)
    return None if msgs[0]["role"] == "user" else 'messages: first message must use the "user" role'


def _alternation(msgs: list[Any]) -> str | None:
    # historical first-party API (strict mode); agentd merges same-role messages before sending
    for prev, msg in itertools.pairwise(msgs):
        if prev["role"] == msg["role"]:
            return (
                'messages: roles must alternate between "user" and "assistant", but found multiple '
                f'"{msg["role"]}" roles in a row'
            )
    return None


_MODEL_VERSION = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-|$)")


def supports_prefill(model: str) -> bool:
    """Claude 4.6 and later reject assistant prefill (api/errors docs); other names accept it."""
    m = _MODEL_VERSION.search(model)
    if m is None:
        return True
    return (int(m.group(1)), int(m.group(2) or 0)) < (4, 6)


def validate_request(
    body: Any,
    *,
    strict: bool = True,
    anthropic_version: str | None = None,
    context_window: int = 200_000,
    prefill: bool | None = None,
) -> ApiError | None:
    """Validate a Messages API request body; return the first violation as a 400 `ApiError`, else None.

    `strict` enables the first-message and alternation rules (TESTING.md §3.5: the emulator is stricter
    than today's first-party API). `anthropic_version` (the header) enables the 2026-10-21 sampling rule;
    `context_window` is the model's window in EMU-TOK-1 tokens; `prefill` overrides the model-name rule.
    """
    problem = _check_schema(body, anthropic_version)
    if problem is None:
        msgs = body["messages"]
        allow_prefill = supports_prefill(body["model"]) if prefill is None else prefill
        checks: list[Callable[[], str | None]] = [
            lambda: _tool_use_answered(msgs),
            lambda: _tool_result_has_use(msgs),
            lambda: _unique_tool_use_ids(msgs),
            lambda: _single_result(msgs),
            lambda: _tool_results_first(msgs),
            lambda: _non_empty_messages(msgs),
            lambda: _non_empty_text(body),
            lambda: _max_breakpoints(body),
            lambda: _no_cache_control_on_empty_text(body),
            lambda: _no_cache_control_on_thinking(body),
            lambda: _auto_ttl_conflict(body),
            lambda: _ttl_order(body),
            lambda: _first_is_user(msgs) if strict else None,
            lambda: _alternation(msgs) if strict else None,
            lambda: _prompt_fits(body, context_window),
            lambda: check_tools(body),  # break11: what the service refuses in tools and images
            lambda: check_images(body),
            # api/errors docs: no assistant prefill on 4.6+ models
            lambda: (
                None
                if allow_prefill or msgs[-1]["role"] != "assistant"
                else "This model does not support assistant message prefill. The conversation must end with a user message."
            ),
        ]
        for check in checks:
            problem = check()
            if problem is not None:
                break
    return None if problem is None else ApiError(400, "invalid_request_error", problem)


def _prompt_fits(body: dict[str, Any], window: int) -> str | None:
    # pi #102
    n = count_tokens(body)
    return f"prompt is too long: {n} tokens > {window} maximum" if n > window else None
