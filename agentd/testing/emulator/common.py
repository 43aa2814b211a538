"""State and plumbing shared by both emulators: the scenario cursor, journal, gates, problems, plans.

Owns `Core` (everything a request handler reads or changes, behind one lock), `Gate`, `Request` (what the
HTTP layer parsed) and `Plan` (what it must send back: a whole JSON body, or SSE frames with an optional
drop, error or hold point). Imports only the standard library and sibling emulator modules, never agentd.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .cache import CacheSim, PrefixCache
from .clock import Clock
from .scenario import first_user_text, load_scenario
from .validate import ApiError


class Headers(Protocol):
    """Case-insensitive request headers (`http.client.HTTPMessage` or a dict with lower-case keys)."""

    def get(self, name: str, default: None = None, /) -> str | None: ...


__all__ = ["Core", "Gate", "Plan", "Request", "auth_of", "dumps", "new_entry", "sse_frame"]

DEFAULT_CONTEXT_WINDOW = 200_000
DEFAULT_MIN_CACHEABLE = 1024  # prompt-caching docs table; anthropic-sdk-python #1194 observed 2048


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, as the service writes it. A scripted lone surrogate (`"\\udcff"`, a hostile
    reply) cannot be UTF-8: then the whole text is written with `\\uXXXX` escapes, which JSON allows."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def sse_frame(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: `event: <name>` (if any), `data: <json>` and a blank line."""
    head = f"event: {event}\n" if event else ""
    return head.encode() + b"data: " + (data if isinstance(data, bytes) else dumps(data)) + b"\n\n"


def auth_of(headers: Headers) -> dict[str, str] | None:
    """The auth scheme and a short sha256 of the key, never the key (TESTING.md §3.2); None if absent.

    `x-api-key` (SDK 0.x/1.x) wins over `Authorization: Bearer` (2.x) when both are sent (reported).
    """
    key, scheme = headers.get("x-api-key"), "x-api-key"
    if not key:
        value = headers.get("authorization") or ""
        key, scheme = (value[7:].strip(), "bearer") if value.lower().startswith("bearer ") else ("", "")
    if not key:
        return None
    return {"scheme": scheme, "key_hash": hashlib.sha256(key.encode()).hexdigest()[:8]}


class Gate:
    """A named point a scripted stream stops at (`hold_after_events`) until a test opens it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.opened = threading.Event()
        self.reached = threading.Event()

    def open(self) -> None:
        """Let every stream held at this gate continue."""
        self.opened.set()

    def is_open(self) -> bool:
        return self.opened.is_set()

    def wait_reached(self, timeout: float) -> bool:
        """Block up to `timeout` seconds until a stream reached the gate; True if it did."""
        return self.reached.wait(timeout)


@dataclass
class Request:
    """One HTTP request as parsed by the server. Times: `received_at` monotonic, `clock_start` emulator clock."""

    seq: int
    method: str
    path: str
    headers: Headers
    raw: bytes
    received_at: float
    clock_start: float


@dataclass
class Plan:
    """What to send. `body` (JSON bytes) or `events` (SSE frames, chunked). Stream faults:
    `drop` ends the socket after the events without a final chunk; `close` closes after a proper end;
    `hold_after`/`gate` stop before event number `hold_after` until the gate opens; `reset` sends nothing
    and resets the connection; `endless` (a keep-alive frame) is sent after the events, forever, until the
    client goes away."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    events: list[bytes] | None = None
    drop: bool = False
    close: bool = False
    hold_after: int | None = None
    gate: str | None = None
    on_headers: Callable[[], None] | None = None
    reset: bool = False
    endless: bytes | None = None


MALFORMED_FRAME = (
    b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {\n\n'
)


def connection_faults(plan: Plan, answer: dict[str, Any], keepalive: bytes) -> Plan:
    """Apply the faults both APIs share (TESTING.md §3.3): `reset_before_first_byte` (the connection is
    reset before any byte of the answer), `malformed_after_events: n` (after n events, a frame whose data is
    cut-off JSON, then a proper end), `endless_after_events: n` (after n events, `keepalive` frames until the
    client gives up: no read timeout ever fires)."""
    if answer.get("reset_before_first_byte"):
        plan.reset = True
    elif plan.events is not None and "malformed_after_events" in answer:
        n = int(answer["malformed_after_events"])
        plan.events, plan.close = [*plan.events[:n], MALFORMED_FRAME], True
    elif plan.events is not None and "endless_after_events" in answer:
        plan.events, plan.endless = plan.events[: int(answer["endless_after_events"])], keepalive
    return plan


def new_entry(req: Request, api: str) -> dict[str, Any]:
    """A journal entry for `req` with every key present (TESTING.md §3.7 lists them)."""
    return {
        "seq": req.seq,
        "request_id": f"req_emu_{req.seq}",
        "api": api,
        "method": req.method,
        "path": req.path,
        "auth": None,
        "anthropic_version": req.headers.get("anthropic-version"),
        "anthropic_beta": req.headers.get("anthropic-beta"),
        "body": None,
        "stream": False,
        "received_at": req.received_at,
        "first_byte_at": None,
        "last_byte_at": None,
        "clock": req.clock_start,
        "status": None,
        "error": None,
        "validation_error": None,
        "usage": None,
        "hit_position": None,
        "answer": None,
        "compaction": False,
        "outcome": None,
    }


class Core:
    """The emulator's mutable state. Every method is thread-safe (one re-entrant lock)."""

    def __init__(
        self, api: str, scenario: Any, clock: Clock, *, flavour: str | None, strict: bool, chunk: int
    ):
        self.api, self.clock, self.strict, self.chunk = api, clock, strict, chunk
        self.lock = threading.RLock()
        self.flavour_override = flavour
        self.cache = CacheSim()
        self.prefix_cache = PrefixCache()
        self.stopping = threading.Event()
        self.reset(scenario)

    def reset(self, scenario: Any = None, *, keep_scenario: bool = False) -> None:
        """Forget journal, problems, gates, cache, request numbers and the cursor; load `scenario` unless
        `keep_scenario`. Streams held at a gate are released."""
        with self.lock:
            for held in getattr(self, "gates", {}).values():  # release streams held at the old gates
                held.open()
            if not keep_scenario:
                self.scenario = load_scenario(scenario)
            self._seq = 0
            self.cursor = 0
            self.conversation_cursors: dict[str, int] = {}
            self.journal: list[dict[str, Any]] = []
            self.problems: list[str] = []
            self.validation_failures = 0
            self.expected_errors = 0
            self.allow_unused = False
            self.gates: dict[str, Gate] = {}
            self.cache.clear()
            self.prefix_cache.clear()
            self._apply_delay()

    def set_scenario(self, scenario: Any) -> None:
        """Replace the script; the next request consumes its first answer. Journal and cache are kept."""
        loaded = load_scenario(scenario)
        with self.lock:
            self.scenario, self.cursor = loaded, 0
            self.conversation_cursors = {}
            self._apply_delay()

    def _apply_delay(self) -> None:
        delay = float(self.scenario.get("write_visibility_delay_s", 0.0))
        self.cache.write_visibility_delay_s = delay
        self.prefix_cache.write_visibility_delay_s = delay

    @property
    def flavour(self) -> str:
        return str(self.flavour_override or self.scenario.get("flavour") or "openai")

    def next_seq(self) -> int:
        with self.lock:
            self._seq += 1
            return self._seq

    def take_answer(self, messages: Any = None) -> tuple[int, dict[str, Any]] | None:
        """The next answer and its 1-based number, or None when the script ran out. With `conversations`
        (TESTING.md §3.3), a request whose first user message contains a conversation's marker takes the
        next answer of that conversation (each has its own cursor); any other takes from `answers`."""
        with self.lock:
            conversations = self.scenario.get("conversations") or {}
            if conversations:
                text = first_user_text(messages)
                for marker, script in conversations.items():
                    if marker in text:
                        n = self.conversation_cursors.get(marker, 0)
                        if n >= len(script):
                            return None
                        self.conversation_cursors[marker] = n + 1
                        return n + 1, script[n]
            answers = self.scenario["answers"]
            if self.cursor >= len(answers):
                return None
            self.cursor += 1
            return self.cursor, answers[self.cursor - 1]

    def model_config(self, model: Any) -> dict[str, Any]:
        """The scenario's `models[model]` with defaults: `min_cacheable_tokens`, `context_window`."""
        with self.lock:
            cfg = dict((self.scenario.get("models") or {}).get(str(model)) or {})
            cfg.setdefault(
                "min_cacheable_tokens", self.scenario.get("min_cacheable_tokens", DEFAULT_MIN_CACHEABLE)
            )
            cfg.setdefault("context_window", DEFAULT_CONTEXT_WINDOW)
            return cfg

    def add_entry(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.journal.append(entry)

    def update_entry(self, entry: dict[str, Any], **fields: Any) -> None:
        with self.lock:
            entry.update(fields)

    def journal_copy(self) -> list[dict[str, Any]]:
        with self.lock:
            return copy.deepcopy(self.journal)

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def validation_failed(self, entry: dict[str, Any], err: ApiError) -> None:
        with self.lock:
            self.validation_failures += 1
            entry["validation_error"] = err.message

    def gate(self, name: str) -> Gate:
        with self.lock:
            if name not in self.gates:
                self.gates[name] = Gate(name)
            return self.gates[name]

    def open_all_gates(self) -> None:
        with self.lock:
            for g in self.gates.values():
                g.open()

    def check_problems(self, allow_unused: bool | None = None) -> list[str]:
        """Everything that should fail the test (TESTING.md §3.3, teardown)."""
        with self.lock:
            out = list(self.problems)
            if self.validation_failures != self.expected_errors:
                out.append(
                    f"{self.validation_failures} request(s) failed validation, "
                    f"expect_errors allowed {self.expected_errors}: "
                    + "; ".join(
                        f"#{e['seq']}: {e['validation_error']}" for e in self.journal if e["validation_error"]
                    )
                )
            unused = len(self.scenario["answers"]) - self.cursor
            allow = self.allow_unused if allow_unused is None else allow_unused
            if unused and not allow:
                out.append(
                    f"{unused} scripted answer(s) unused (answers {self.cursor + 1}..{self.cursor + unused})"
                )
            for marker, script in (self.scenario.get("conversations") or {}).items():
                left = len(script) - self.conversation_cursors.get(marker, 0)
                if left and not allow:
                    out.append(f"{left} answer(s) of conversation {marker!r} unused")
            return out


def error_plan(core: Core, entry: dict[str, Any], err: ApiError, envelope: dict[str, Any]) -> Plan:
    """A JSON error response; records status and error in the journal entry."""
    core.update_entry(entry, status=err.status, error={"type": err.type, "message": err.message})
    return Plan(err.status, {"content-type": "application/json", **err.headers}, body=dumps(envelope))


def parse_body(raw: bytes) -> tuple[Any, str | None]:
    """(parsed JSON, None) or (None, a problem text)."""
    try:
        return json.loads(raw.decode("utf-8") if raw else "null"), None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"There was an error parsing the body: {exc.msg if hasattr(exc, 'msg') else exc}"
