"""Tool calls a chat model wrote as text: recovered when unambiguous, answered with an error when not (issue 17).

Owns: `recover_calls(text, tools)` -> `Recovered | None`, the shapes accepted, the error texts the model gets,
`hold_point(text)` (where streamed text may start a call, so the accumulator holds it back) and
`malformed_rounds(messages)` (the bound on retries). Imports only the standard library; must not import an SDK,
the core or an adapter. Used by `agentd.providers.openai_compat` (the only provider whose servers do this).

Small local models (Qwen-Coder under llama.cpp, Ollama, LM Studio) often answer a tool call as content instead of
`tool_calls`. Accepted, anywhere in the reply (prose around is kept as the reply's text, in order):
- a JSON object `{"name": <tool>, "arguments"|"parameters"|"input"|"args": {...}}`, also
  `{"tool": <tool>, ...}` and the OpenAI form `{"type": "function", "function": {"name", "arguments"}}`;
- a JSON list of such objects (several calls);
- the API's wrappers: `{"tool_calls": [...]}`, `{"function_call": {...}}`;
- each inside a fenced block (```json, ```tool_call or bare ```), inside `<tool_call>...</tool_call>` tags (Qwen's
  own format; a fenced block inside the tags too), or bare in the text (a string argument may hold ``` or
  `</tool_call>`: the JSON decides where the block ends); several blocks or objects in one reply
  are several calls, in order.
Arguments: an object; a JSON string holding an object (also encoded twice or three times); `null` or missing (= `{}`); a list of exactly one object;
a bare string or a one-element list when the tool has exactly one required property (that property gets it);
written flat beside the name (`{"name": "read_file", "path": "a.py"}`) when every such key is one of the tool's
parameters. Other keys beside an arguments key (`"reason"`, `"thought"`) are ignored.

A candidate that names an offered tool but cannot be executed (arguments of another shape, JSON that does not
parse) becomes a call with an `error`: the loop answers it with that text as an `is_error` result instead of
running it, so the model can correct itself. A candidate naming a tool that is not offered stays text (JSON data
or an example, not a call), unless it is in `<tool_call>` tags or a ```tool_call fence, or in a list of calls
(each with an arguments key) beside calls of offered tools: then it is a call the loop answers "unknown tool".
JSON inside a fence of another language (```python: code) stays text, also when the fence is never closed.
Degenerate replies (nesting deeper than the stack, many `{` that do not parse) are text, found in time linear in
the reply for all but adversarial inputs (a failing start is decoded on a short slice first).
After `MAX_MALFORMED_ROUNDS` consecutive rounds answered only with these errors, a reply is left as text, so a
model that cannot produce a call ends its turn instead of looping.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

MALFORMED_PREFIX = "malformed tool call"
MAX_MALFORMED_ROUNDS = 3
MAX_STRING_LEVELS = 3  # arguments encoded as a JSON string at most this many times are decoded
ARG_KEYS = ("arguments", "parameters", "input", "args")
_SHAPE_KEYS = {"name", "tool", "type", "id", "function", *ARG_KEYS}
_TAG = re.compile(r"<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>|\Z)", re.S)
_FENCE = re.compile(r"```[ \t]*(?P<lang>[A-Za-z_-]*)[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.S)
_FENCE_LANGS = {"", "json", "tool_call", "tool_code", "jsonc"}
_NAMED = re.compile(r'"(?:name|tool)"\s*:\s*"(?P<name>[^"]+)"')
_CALL_KEY = re.compile(r'"(?:name|tool|function)"\s*:')  # no such key: no bare call (a cheap first test)
_OPENER = re.compile(r"^[ \t]*```[ \t]*(?P<lang>[^\s`]*)[ \t]*$", re.M)
_CLOSER = re.compile(r"^[ \t]*```[ \t]*$", re.M)
_FIRST_SLICE = 4096
_SPACE = re.compile(r"\s*")
_CLOSING = re.compile(r"\s*(?:```|</tool_call>|\Z)")
_BARE_START = re.compile(r'\{\s*"|\[\s*\{')  # where a call object or a list of them may start
_INNER_FENCE = re.compile(r"\A```[ \t]*[A-Za-z_]*[ \t]*\n(?P<body>.*?)\n?[ \t]*```\Z", re.S)
_START = re.compile(r"```|<tool_call>|\[\s*\{|\{\s*\"|^[ \t]*\[", re.M)
_PARTIAL = ("`", "``", "<", "<t", "<to", "<too", "<tool", "<tool_", "<tool_c", "<tool_ca", "<tool_cal", "{")


_MISSING = object()


class Flat(dict[str, Any]):
    """Arguments written beside the call's name instead of under an arguments key."""


@dataclass
class TextCall:
    """One recovered call: `name`, `input` (an object; `{}` when rejected), `error` (None = run it) and
    `unparsed` (the error is JSON that does not parse)."""

    name: str
    input: dict[str, Any]
    error: str | None = None
    unparsed: bool = False  # its JSON did not parse (a cut call, when the reply hit max_tokens)


@dataclass
class Recovered:
    """The calls found in a reply, in order, and the reply's remaining prose (`text`, stripped)."""

    calls: list[TextCall]
    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)


def hold_point(text: str) -> int:
    """Characters of streamed `text` that can be shown now: everything before the first place a call may start
    (a fence, a `<tool_call>` tag, `{"`, a line opening with `[`) or a partial marker at the very end."""
    m = _START.search(text)
    if m:
        return m.start()
    for marker in _PARTIAL:
        if text.endswith(marker):
            return len(text) - len(marker)
    return len(text)


def malformed_rounds(messages: list[dict[str, Any]]) -> int:
    """How many of the last rounds in `messages` (Anthropic form) were answered only with malformed-call errors."""
    n = 0
    for m in reversed(messages):
        if m.get("role") == "assistant":
            continue
        results = [
            b for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if not results or not all(str(_result_text(b)).startswith(MALFORMED_PREFIX) for b in results):
            break
        n += 1
    return n


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
    return str(content or "")


def _schema_hint(schema: Mapping[str, Any] | None) -> str:
    props = (schema or {}).get("properties") or {}
    required = [p for p in (schema or {}).get("required") or [] if p in props] or list(props)[:2]
    parts = [f'"{p}": <{(props.get(p) or {}).get("type", "value")}>' for p in required]
    return "{" + ", ".join(parts) + "}"


def _sole_required(schema: Mapping[str, Any] | None) -> str | None:
    required = list((schema or {}).get("required") or [])
    return str(required[0]) if len(required) == 1 else None


def _bad(name: str, what: str, schema: Mapping[str, Any] | None) -> str:
    return (
        f"{MALFORMED_PREFIX}: {name} was not run: {what}. Call the tool again with the arguments as one JSON "
        f"object, e.g. {_schema_hint(schema)}."
    )


def _unknown(name: str, tools: Mapping[str, Any]) -> TextCall:
    """A call (in tags, or beside calls of offered tools) of a tool that is not offered."""
    offered = ", ".join(sorted(tools))
    return TextCall(
        name, {}, f"{MALFORMED_PREFIX}: there is no tool named {json.dumps(name)}; the tools are: {offered}."
    )


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"the string {json.dumps(shown, ensure_ascii=False)}"
    return f"{type(value).__name__} {json.dumps(value)}"


def _arguments(name: str, raw: Any, schema: Mapping[str, Any] | None) -> TextCall:
    """Normalise one call's arguments (see the module docstring for what is unambiguous)."""
    if raw is None:
        return TextCall(name, {})
    if isinstance(raw, Flat):
        props = (schema or {}).get("properties")
        unknown = [k for k in raw if isinstance(props, Mapping) and k not in props]
        if not unknown:
            return TextCall(name, dict(raw))
        keys = ", ".join(json.dumps(k, ensure_ascii=False) for k in unknown)
        verb = "is" if len(unknown) == 1 else "are"
        what = f'it has no "arguments" object and {keys} {verb} not among its parameters'
        return TextCall(name, {}, _bad(name, what, schema))
    for _ in range(MAX_STRING_LEVELS):  # a JSON string of an object, or of such a string (encoded twice)
        if not isinstance(raw, str):
            break
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            sole = _sole_required(schema)
            if sole is not None:
                return TextCall(name, {sole: raw})
            return TextCall(
                name, {}, _bad(name, f"its arguments are {_describe(raw)}, not a JSON object", schema)
            )
        if isinstance(decoded, dict):
            return TextCall(name, decoded)
        raw = decoded
    if isinstance(raw, dict):
        return TextCall(name, raw)
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], dict):
        return TextCall(name, raw[0])
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str) and _sole_required(schema):
        return TextCall(name, {str(_sole_required(schema)): raw[0]})
    return TextCall(name, {}, _bad(name, f"its arguments are {_describe(raw)}, not a JSON object", schema))


def _call_name(obj: Any) -> str | None:
    """The tool name of a call-shaped object, else None. Keys beside the call's own (`name`, `arguments`, ...)
    are arguments written flat (`{"name": "read_file", "path": "a.py"}`) or, beside an arguments key, ignored;
    a name that is not an offered tool keeps such an object data (`recover_calls`)."""
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return str(fn["name"])
    for key in ("name", "tool"):
        if isinstance(obj.get(key), str) and (fn is None or isinstance(fn, str)):
            return str(obj[key])
    if isinstance(fn, str) and any(k in obj for k in ARG_KEYS):
        return fn
    return None


def _raw_args(obj: dict[str, Any]) -> Any:
    """The arguments of a call object: under an arguments key (of `function` in the OpenAI form), else the keys
    beside the call's own as a `Flat` object, else None (no arguments)."""
    fn = obj.get("function")
    source = fn if isinstance(fn, dict) else obj
    found = next((source[k] for k in ARG_KEYS if k in source), _MISSING)
    if found is not _MISSING:
        return found
    flat = {k: v for k, v in obj.items() if k not in _SHAPE_KEYS}
    return Flat(flat) if flat else None


def _calls_of(value: Any) -> list[tuple[str, Any]] | None:
    """(name, raw arguments) of a call object or a list of them, also wrapped as the API writes them
    (`{"tool_calls": [...]}`, `{"function_call": {...}}`); None when `value` is not call-shaped."""
    if isinstance(value, dict) and len(value) == 1 and _call_name(value) is None:
        wrapped = value.get("tool_calls", value.get("function_call"))
        if isinstance(wrapped, (list, dict)):
            return _calls_of(wrapped)
    items = value if isinstance(value, list) and value else [value]
    out = []
    for item in items:
        name = _call_name(item)
        if name is None:
            return None
        out.append((name, _raw_args(item)))
    return out


@dataclass
class _Candidate:
    start: int
    end: int
    calls: list[tuple[str, Any]] | None  # None: the JSON did not parse
    body: str
    error: str = ""
    tagged: bool = True  # in `<tool_call>` tags or a call fence: a call even when it names no offered tool


def _decode(body: str) -> tuple[Any, str]:
    try:
        return json.loads(body), ""
    except ValueError as exc:
        return None, str(exc)
    except RecursionError:  # nesting deeper than the interpreter's stack (a degenerate reply)
        return None, "nested too deeply"


def _wrapped(text: str) -> list[_Candidate]:
    """Candidates inside `<tool_call>` tags and fenced blocks (fences of another language are code, skipped)."""
    out: list[_Candidate] = []
    for m in itertools.chain(_TAG.finditer(text), _fences(text, out)):  # lazily: _fences reads `out`
        lang = m.groupdict().get("lang")
        lang = lang.lower().replace("-", "_") if lang is not None else None
        if lang is not None and lang not in _FENCE_LANGS:
            continue
        if any(c.start <= m.start() < c.end for c in out):
            continue  # a fence inside a tag (or the reverse) is one candidate
        body, end = m.group("body").strip(), m.end()
        inner = _INNER_FENCE.match(body) if lang is None else None  # a fenced block inside the tags
        body = inner.group("body").strip() if inner else body
        value, error = _decode(body)
        longer = _past_marker(text, m.start("body")) if error and not inner else None
        if longer is not None:
            (value, end), error = longer, ""
            body = text[m.start("body") : end]
        tagged = lang is None or lang in ("tool_call", "tool_code")
        out.append(_Candidate(m.start(), end, _calls_of(value) if not error else None, body, error, tagged))
    return sorted(out, key=lambda c: c.start)


def _fences(text: str, taken: list[_Candidate]) -> Iterator[re.Match[str]]:
    """The fenced blocks of `text`, each searched from where the previous candidate ended (a call that ran past
    its first closing marker moves the pairing of the fences after it)."""
    m = _FENCE.search(text)
    while m is not None:
        yield m
        end = max([m.end(), *(c.end for c in taken if c.start <= m.start())])
        m = _FENCE.search(text, end)


def _past_marker(text: str, at: int) -> tuple[Any, int] | None:
    """A JSON value starting at `text[at]` (after whitespace) that runs past the block's first closing marker
    (a string argument holding ``` or `</tool_call>`: a Markdown file written with a fenced call), and the end
    of the closing marker that follows it; None when there is no such value."""
    start = _SPACE.match(text, at)
    try:
        value, end = json.JSONDecoder().raw_decode(text, start.end() if start else at)
    except (ValueError, RecursionError):
        return None
    close = _CLOSING.match(text, end)
    return (value, close.end()) if close else None


def _code(text: str) -> list[_Candidate]:
    """Fenced blocks (JSON in code is code) and a fence of another language left open: code to the end."""
    out = [_Candidate(m.start(), m.end(), None, "") for m in _FENCE.finditer(text)]
    for m in _OPENER.finditer(text):
        inside = any(c.start <= m.start() < c.end for c in out)
        if inside or m.group("lang").lower().replace("-", "_") in _FENCE_LANGS:
            continue
        close = _CLOSER.search(text, m.end())
        out.append(_Candidate(m.start(), close.end() if close else len(text), None, ""))
    return out


def _decode_at(decoder: json.JSONDecoder, text: str, i: int) -> tuple[Any, int]:
    """The JSON value starting at `text[i]` and where it ends, else (None, i + 1). Tried on a short slice
    first: a failed decode's error states its line, counted from the start of the text it was given, so
    decoding each failing start against the whole reply would be quadratic in the reply."""
    piece = text[i : i + _FIRST_SLICE]
    try:
        value, end = decoder.raw_decode(piece)
        return value, i + end
    except RecursionError:
        return None, i + 1
    except json.JSONDecodeError as exc:
        cut = exc.pos >= len(piece) - 1 or exc.msg.startswith("Unterminated string")
        if len(piece) < _FIRST_SLICE or not cut:
            return None, i + 1  # it failed inside the slice, not for want of text: so does the whole text
    try:
        return decoder.raw_decode(text, i)
    except (ValueError, RecursionError):
        return None, i + 1


def _bare(text: str, taken: list[_Candidate]) -> list[_Candidate]:
    """Call-shaped JSON objects or lists in the prose outside `taken`."""
    decoder = json.JSONDecoder()
    out: list[_Candidate] = []
    if not _CALL_KEY.search(text):
        return out  # every call shape has one of these keys: skip the decoding (linear in the reply)
    m = _BARE_START.search(text)
    while m is not None:
        i = m.start()
        if any(c.start <= i < c.end for c in taken):
            m = _BARE_START.search(text, i + 1)
            continue
        value, end = _decode_at(decoder, text, i)
        calls = _calls_of(value)
        if calls is None:
            m = _BARE_START.search(text, i + 1)
            continue
        out.append(_Candidate(i, end, calls, text[i:end], tagged=False))
        m = _BARE_START.search(text, end)
    return out


def _attempted(calls: list[tuple[str, Any]], tools: Mapping[str, Any]) -> bool:
    """Whether bare call-shaped JSON is an attempted call: every name is an offered tool, or some are and every
    item has an arguments key (a list of calls with a wrong name among them, not data that names a tool)."""
    offered = [name in tools for name, _ in calls]
    return all(offered) or (
        any(offered) and all(raw is not None and not isinstance(raw, Flat) for _, raw in calls)
    )


def _prose(text: str, spans: list[tuple[int, int]]) -> str:
    kept, at = [], 0
    for start, end in spans:
        kept.append(text[at:start])
        at = end
    kept.append(text[at:])
    return re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()


def recover_calls(text: str, tools: Mapping[str, Mapping[str, Any] | None]) -> Recovered | None:
    """The tool calls written in `text`, or None when it holds no attempted call of an offered tool.

    `tools`: offered tool name -> its input JSON schema (used for error hints and single-argument shapes).
    """
    candidates = _wrapped(text)
    candidates = sorted([*candidates, *_bare(text, [*candidates, *_code(text)])], key=lambda c: c.start)
    calls: list[TextCall] = []
    spans: list[tuple[int, int]] = []
    for c in candidates:
        if c.calls is None:  # unparsable JSON: a call only when it names an offered tool
            named = _NAMED.search(c.body)
            if named and named.group("name") in tools:
                name = named.group("name")
                what = f"its JSON does not parse ({c.error})"
                calls.append(TextCall(name, {}, _bad(name, what, tools.get(name)), unparsed=True))
                spans.append((c.start, c.end))
            continue
        if not c.tagged and not _attempted(c.calls, tools):
            continue  # JSON naming a tool that is not offered: data or an example, left as text
        calls += [
            _arguments(name, raw, tools.get(name)) if name in tools else _unknown(name, tools)
            for name, raw in c.calls
        ]
        spans.append((c.start, c.end))
    if not calls:
        return None
    return Recovered(calls, _prose(text, spans), spans)
