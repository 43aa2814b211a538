"""Issue 16 ("cost per request independent of history length"): the Context keeps what a request needs as the
history grows and shares the stored messages with the request instead of deep-copying them. These tests prove
that nothing changed in what is sent, and that sending never changes the stored history.

- The request bodies of a scripted session (tools, two replies with several calls, an image prompt, a
  compaction by hand and one to fit the threshold, a conversation rewind, a resume and a fork) are byte for
  byte those of the request path before issue 16 (`OldContext` below: a deep copy of the history per request,
  breakpoints put on the copy, the whole history re-estimated), and so are the token estimates the session
  reports (usage updates) and calibrates with (CONTRACTS.md §6).
- Through the real SDKs to the emulators (Anthropic, OpenAI-compatible), the stored history, the system
  prompt, the tool definitions and the request itself are unchanged after each send.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.config import load_settings
from agentd.core import factory
from agentd.core.breakpoints import cache_control
from agentd.core.context import Context, _eligible
from agentd.core.factory import create_session, open_session
from agentd.core.session import Session
from agentd.core.tokens import estimate_request
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.base import ModelRequest, Provider
from agentd.providers.openai_compat import OpenAICompatProvider
from agentd.providers.scripted import ScriptedProvider
from agentd.testing.emulator import Emulator

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII="


class OldContext(Context):
    """The request path before issue 16, kept here as the oracle: every request deep-copies the history,
    rebuilds the flat view of its blocks, marks the copy and re-estimates the whole history."""

    def _old_flat(self) -> list[tuple[int, int]]:
        return [(i, j) for i, m in enumerate(self._messages) for j in range(len(m["content"]))]

    def estimated_tokens(self) -> int:
        flat = self._old_flat()
        if self._known_tokens is not None and self._known_upto <= len(flat):
            later = [self._messages[i]["content"][j] for i, j in flat[self._known_upto :]]
            return self._known_tokens + self.estimator.messages([{"content": later}])
        return self._static_tokens + self.estimator.messages(self._messages)

    def to_request(
        self, *, model: str, system: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> ModelRequest:
        sys_blocks, tool_defs = copy.deepcopy(system), copy.deepcopy(tools)
        messages = copy.deepcopy(self._messages)
        for m in messages:
            m["content"] = list(m["content"])
        self._static_tokens = estimate_request({"tools": tools, "system": system})
        if self.prompt_caching:
            flat = self._old_flat()

            def last_eligible(upto: int) -> int | None:
                for k in range(min(upto, len(flat) - 1), -1, -1):
                    i, j = flat[k]
                    if _eligible(self._messages[i]["content"][j]):
                        return k
                return None

            plan = self.planner.plan(len(flat), last_eligible, self.estimated_tokens(), self._static_tokens)
            stable = sys_blocks or tool_defs
            if stable:
                stable[-1]["cache_control"] = cache_control(plan.stable)
            for k, ttl in plan.points:
                i, j = flat[k]
                messages[i]["content"][j]["cache_control"] = cache_control(ttl)
        request = ModelRequest(
            model=model, system=sys_blocks, tools=tool_defs, messages=messages, max_tokens=max_tokens
        )
        self._last_estimate = estimate_request(request.body())
        return request


def _prompt(t: str, image: bool = False) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t}]
    if image:
        blocks.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}})
    return blocks


def _call(name: str, **inp: Any) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": inp}}


def _todo(*items: tuple[str, str]) -> dict[str, Any]:
    return _call("todo_write", todos=[{"content": c, "status": s} for c, s in items])


def _say(t: str) -> dict[str, Any]:
    return {"reply": [{"text": t}]}


MAIN = [  # answers of the first session's provider, in order
    {"reply": [_todo(("read the files", "in_progress"), ("write notes", "pending"))]},
    {"reply": [_call("read_file", path="a.txt"), _call("read_file", path="b.txt")]},
    {"reply": [{"text": "Both read."}, _call("list_dir", path=".")]},
    _say("Read a.txt and b.txt; the picture is a dot."),
    {"reply": [_call("write_file", path="notes.md", content="# Notes\nalpha\n")]},
    {"reply": [_call("read_file", path="notes.md"), _call("read_file", path="a.txt")]},
    _say("Notes written."),
    {"reply": [_call("read_file", path="b.txt")]},  # after the compaction by hand
    _say("b.txt again."),
    {"reply": [_call("read_file", path="a.txt")]},  # turn 4, compressed at the low threshold
    {"reply": [_call("read_file", path="b.txt")]},
    _say("Done with turn four."),
    _say("After the rewind: another way."),
]
RESUMED = [{"reply": [_call("read_file", path="a.txt")]}, _say("Resumed and read.")]
FORKED = [_say("The fork goes on.")]


def _workspace(root: Path) -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n" * 40)
    (root / "b.txt").write_text("beta gamma\n" * 30)
    return root


async def _scripted_run(workspace: Path, data: Path, context_cls: type[Context]) -> dict[str, Any]:
    """Drive the whole scripted session with `context_cls` as every session's Context; what was sent and
    what the sessions reported."""
    _workspace(workspace)
    providers: list[ScriptedProvider] = []
    updates: list[dict[str, Any]] = []
    estimates: list[int] = []

    def session(answers: list[dict[str, Any]], resume: str | None = None) -> Session:
        provider = ScriptedProvider({"answers": answers}, clock=ManualClock())
        providers.append(provider)
        settings = load_settings(workspace, cli={"provider": "scripted"})
        kwargs: dict[str, Any] = dict(settings=settings, provider=provider, data_dir=DataDir(data),
                                      approver=QueueApprover.of(*["allow_once"] * 4), sink=updates.append,
                                      clock=ManualClock(), lines=lambda _line: None)  # fmt: skip
        if resume:
            return open_session(session_id=resume, **kwargs)
        return create_session(cwd=workspace, **kwargs)

    async def turn(s: Session, text: str, image: bool = False) -> None:
        assert await s.prompt(_prompt(text, image)) == "end_turn"
        estimates.append(s.context.last_request_estimate)
        estimates.append(s.context.estimated_tokens())

    original = factory.Context
    factory.Context = context_cls  # type: ignore[misc]
    try:
        s = session(MAIN)
        await turn(s, "Read a.txt and b.txt, then look at this picture.", image=True)
        await turn(s, "Write notes.")
        assert (await s.compact())["compacted"] is True
        await turn(s, "Read b.txt once more.")
        s.p.settings.context.compress_threshold_tokens = s.context.estimated_tokens() + 200
        s.p.settings.context.keep_recent_messages = 2
        await turn(s, "Turn four: read both again.")
        assert s.context.compaction.compactions == 2  # by hand, then at the threshold inside turn four
        await s.rewind(4, files=False)  # back to before turn four's prompt
        await turn(s, "Do it another way.")
        sid = s.id
        s.close()
        s = session(RESUMED, resume=sid)
        await turn(s, "Resumed: read a.txt.")
        forked = s.fork()
        s.close()
        f = session(FORKED, resume=forked["sessionId"])
        await turn(f, "In the fork: go on.")
        f.close()
    finally:
        factory.Context = original  # type: ignore[misc]
    bodies = [json.dumps(b) for p in providers for b in p.requests]
    sizes = [u["used"] for u in updates if u.get("sessionUpdate") == "usage_update"]
    return {"bodies": bodies, "sizes": sizes, "estimates": estimates}


async def test_requests_are_byte_identical_to_the_deep_copy_path(tmp_path: Path) -> None:
    """Issue 16: the incremental Context sends the same bytes as the deep-copy path on a session with tools,
    several calls per reply, an image, two compactions, a conversation rewind, a resume and a fork; the
    sizes it reports and the estimates it calibrates with are the same too."""
    workspace = tmp_path / "ws"
    new = await _scripted_run(workspace, tmp_path / "data-new", Context)
    old = await _scripted_run(workspace, tmp_path / "data-old", OldContext)
    assert len(new["bodies"]) == len(old["bodies"]) == 18
    for k, (a, b) in enumerate(zip(new["bodies"], old["bodies"], strict=True)):
        assert a == b, f"request {k} differs"
    assert new["sizes"] == old["sizes"] and new["estimates"] == old["estimates"]
    sent = "\n".join(new["bodies"])
    assert PNG in sent and "[Summary of earlier conversation]" in sent and "Do it another way." in sent
    assert sent.count("Summarize the conversation below") == 2 and '"ttl": "1h"' in sent


def _unchanged_by_sending(s: Session, provider: Any) -> list[int]:
    """Wrap `provider.stream`: after each send, the stored history, system prompt, tool definitions and the
    request are what they were before it (compared as JSON, key order included). Returns the history
    lengths seen, one per send."""
    seen: list[int] = []
    stream = provider.stream

    async def checked(request: ModelRequest, on_event: Callable[..., None]) -> Any:
        before = [json.dumps(list(s.context.view())), json.dumps(s.system), json.dumps(s.tool_defs)]
        sent = json.dumps(request.body())
        response = await stream(request, on_event)
        after = [json.dumps(list(s.context.view())), json.dumps(s.system), json.dumps(s.tool_defs)]
        assert after == before and json.dumps(request.body()) == sent
        seen.append(len(s.context))
        return response

    provider.stream = checked
    return seen


def _emu_scenario(texts: list[str]) -> dict[str, Any]:
    read = {"type": "tool_use", "name": "read_file", "input": {"path": "a.txt"}}
    answers = [{"reply": [dict(read, id=f"call_{k}")]} for k in range(3)]
    return {"answers": answers + [{"reply": [{"type": "text", "text": t}]} for t in texts]}


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_sending_through_the_sdks_never_changes_the_stored_history(
    api: str, emulator: Emulator, openai_emulator: Emulator, workspace: Path, data_dir: Path
) -> None:
    """Issue 16: the request shares the stored messages, so whatever the SDK does with a request must not
    reach the history: after every send through the real SDK (to the emulator, which accepts each request),
    the history, system, tools and request are unchanged, and a resumed session sends the same history."""
    _workspace(workspace)
    emu = emulator if api == "anthropic" else openai_emulator
    emu.script(_emu_scenario(["Read three times.", "Second turn."]))

    def make(resume: str | None = None) -> tuple[Session, Provider]:
        provider: Provider
        if api == "anthropic":
            provider = AnthropicProvider("emu-sonnet", "sk-test", emu.url, ManualClock())
        else:
            provider = OpenAICompatProvider("emu-model", "not-needed", emu.url + "/v1", ManualClock())
        settings = load_settings(workspace, cli={"provider": api})
        kwargs: dict[str, Any] = dict(settings=settings, provider=provider, data_dir=DataDir(data_dir),
                                      approver=QueueApprover(), sink=lambda _u: None, clock=ManualClock(),
                                      lines=lambda _line: None)  # fmt: skip
        s = open_session(session_id=resume, **kwargs) if resume else create_session(cwd=workspace, **kwargs)
        return s, provider

    s, provider = make()
    seen = _unchanged_by_sending(s, provider)
    try:
        assert await s.prompt(_prompt("Read a.txt three times.", image=api == "anthropic")) == "end_turn"
        history = json.dumps(list(s.context.view()))
    finally:
        await provider.aclose()
        s.close()
    s, provider = make(resume=s.id)
    resumed = _unchanged_by_sending(s, provider)
    try:
        assert json.dumps(list(s.context.view())) == history  # what was stored is what was sent
        assert await s.prompt(_prompt("And now?")) == "end_turn"
    finally:
        await provider.aclose()
        s.close()
    assert (seen, resumed) == ([1, 3, 5, 7], [9]) and not emu.problems
    sends = [
        e["status"] for e in emu.journal if str(e.get("path")).endswith(("/messages", "/chat/completions"))
    ]
    assert sends == [200] * 5
