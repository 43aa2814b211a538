"""Hostile frames and params against the LSP adapter (issue 16 §6): `fuzz_frames`, `daemon_alive`; and what
tests/reliability/acpfuzz.py shares (`params()`, `prepare()`, `flood()`, `traceback_problems()`).

Hypothesis generates (derandomized, so a run is reproducible) JSON-RPC messages: every `agentd/*` method of
the table and standard LSP methods, with ids of every JSON type, params that are valid-looking, mutated or
arbitrary JSON (deep nesting, huge strings, lone surrogates, NUL, bidi controls), plus raw bodies that are
not JSON or not UTF-8. One daemon (scripted provider with no answers, so a prompt that gets through fails
cleanly) receives them all after `initialize`; every `PROBE_EVERY` frames a `agentd/session/list` request
must be answered. At the end: the daemon is alive and answers, its stdout held only well-formed frames, and
its stderr no traceback. (`shutdown` and `exit` are left out: they end the daemon by design.)
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentd.protocol.methods import BY_NAME
from tests.reliability.driver import Daemon, canary_key, isolated_env

PROBE_EVERY = 50
LSP_METHODS = ["initialize", "initialized", "$/cancelRequest", "$/setTrace", "textDocument/didOpen",
               "textDocument/didChange", "textDocument/didClose", "textDocument/didSave",
               "workspace/didChangeWorkspaceFolders", "window/workDoneProgress/cancel", "unknown/method"]  # fmt: skip
METHODS = sorted(BY_NAME) + LSP_METHODS
ODD_TEXT = st.sampled_from(
    ["", "\x00", "\udcff", "\u202e\u2066", "a" * 70_000, "../../etc/passwd", "😀" * 500]
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40), ODD_TEXT
)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=5),
                    st.dictionaries(st.text(max_size=12), inner, max_size=5)), max_leaves=25)  # fmt: skip
IDS = st.one_of(
    st.integers(min_value=10_000), st.text(max_size=10), st.none(), st.booleans(), st.floats(), st.just({})
)


def _deep(n: int) -> Any:
    out: Any = 0
    for _ in range(n):
        out = [out]
    return out


def params(**known: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Params of either protocol: an object holding some of the keys both use (`sessionId`, `cwd`, `prompt`),
    of `known` (a protocol's own keys) and `cursor`, each valid-looking or odd; arbitrary JSON; or nesting
    deeper than any parser's recursion limit."""
    keys = {"sessionId": st.one_of(st.just("sess_nope"), st.text(max_size=20), SCALARS),
            "cwd": st.one_of(st.just("/"), st.just("../.."), ODD_TEXT, SCALARS),
            "prompt": st.one_of(st.just([{"type": "text", "text": "hi"}]), JSON), **known,
            "cursor": SCALARS}  # fmt: skip
    shaped = st.fixed_dictionaries({}, optional=keys)
    return st.one_of(shaped, JSON, st.just(_deep(5000)), st.just({"a": _deep(200)}))


LSP_PARAMS = params(mode=st.one_of(st.just("readOnly"), SCALARS))


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """One frame body (bytes)."""
    kind = draw(st.integers(0, 9))
    if kind == 0:  # not JSON, or not UTF-8
        return draw(st.one_of(st.binary(max_size=200), st.just(b"\xff\xfe{}"), st.just(b"{" * 100_000)))
    method = draw(st.one_of(st.sampled_from(METHODS), st.text(max_size=30)))
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", None]))}
    if method in ("shutdown", "exit"):
        method = "agentd/session/list"
    if draw(st.booleans()):
        msg["id"] = draw(IDS)
    if kind != 1:
        msg["method"] = method
    if draw(st.integers(0, 4)):
        msg["params"] = draw(LSP_PARAMS)
    try:
        return json.dumps(msg).encode()
    except (ValueError, RecursionError):
        return b"[]"


def generate(examples: int) -> list[bytes]:
    """`examples` batches of frame bodies, derandomized. (acpfuzz.py has its own: hypothesis seeds a
    derandomized run from the source of `collect`, so one shared copy would change both sets of examples.)"""
    out: list[bytes] = []

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.lists(messages(), min_size=1, max_size=10))
    def collect(batch: list[bytes]) -> None:
        out.extend(batch)

    collect()
    return out


def prepare(base: Path) -> tuple[Path, Path]:
    """The fuzz run's folder: a workspace and a scenario with no answers (a prompt that gets through fails
    cleanly); returns both."""
    base.mkdir(parents=True, exist_ok=True)
    ws = base / "ws"
    ws.mkdir(exist_ok=True)
    scenario = base / "empty.json"
    scenario.write_text('{"answers": []}', encoding="utf-8")
    return ws, scenario


async def flood(
    bodies: list[bytes], send: Callable[[bytes], Awaitable[None]], answers: Callable[[], Awaitable[bool]],
    unit: str,
) -> tuple[int, list[str]]:  # fmt: skip
    """Send every body, asking `answers()` every `PROBE_EVERY`; (how many were sent, what went wrong). A
    probe left unanswered, or the connection breaking, stops the flood. `unit`: "frame" or "line"."""
    sent = 0
    try:
        for body in bodies:
            await send(body)
            sent += 1
            if sent % PROBE_EVERY == 0 and not await answers():
                return sent, [f"no answer to a probe after {unit} {sent}"]
    except (ConnectionError, BrokenPipeError) as exc:
        return sent, [f"the connection broke after {sent} {unit}s: {exc}"]
    return sent, []


def traceback_problems(stderr: Path) -> list[str]:
    """`["a traceback on stderr"]` when the daemon's stderr holds one, else `[]`."""
    return (
        ["a traceback on stderr"]
        if "Traceback" in stderr.read_text(encoding="utf-8", errors="replace")
        else []
    )


async def fuzz_lsp(base: Path, examples: int = 200) -> dict[str, Any]:
    """Send the generated frames; the figures of the module docstring and what went wrong."""
    bodies = generate(examples)
    ws, scenario = prepare(base)
    key = canary_key()
    daemon = await Daemon.spawn(isolated_env(base, key), stderr=base / "stderr")
    try:
        await daemon.initialize(ws, {"provider": "scripted", "scenario": str(scenario)})

        async def send(body: bytes) -> None:
            await daemon.send(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

        sent, problems = await flood(bodies, send, lambda: _answers(daemon), "frame")
        alive = not problems and daemon.alive() and await _answers(daemon)
    finally:
        await daemon.stop()
    problems += traceback_problems(base / "stderr")
    problems += [f"a malformed frame on stdout: {e!r}" for e in daemon.framing_errors]
    return {
        "fuzz_frames": sent,
        "daemon_alive": alive and not problems,
        "fuzz_problems": problems,
        "key": key,
    }


async def _answers(daemon: Daemon) -> bool:
    try:
        reply = await daemon.request("agentd/session/list", {}, 60)
    except (TimeoutError, ConnectionError):
        return False
    return "result" in reply
