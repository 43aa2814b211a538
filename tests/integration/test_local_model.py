"""What real local models and servers do to the loop (issue 17), on the OpenAI-compatible emulator over HTTP:
the served window is learned and reported; tool calls written as text are executed or answered with an error
the model can act on, and the turn goes on; the bound on malformed rounds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.config import load_settings
from agentd.providers.openai_compat import OpenAICompatProvider
from agentd.providers.text_calls import MAX_MALFORMED_ROUNDS
from agentd.testing.emulator import Emulator
from tests.integration.conftest import Harness


@pytest.fixture
async def local(openai_emulator: Emulator) -> AsyncIterator[OpenAICompatProvider]:
    p = OpenAICompatProvider("emu-model", "not-needed", openai_emulator.url + "/v1", ManualClock())
    yield p
    await p.aclose()


def say(t: str) -> dict[str, Any]:
    return {"reply": [{"type": "text", "text": t}]}


def prompt(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def chat_bodies(emu: Emulator) -> list[dict[str, Any]]:
    return [e["body"] for e in emu.journal if e.get("path") == "/v1/chat/completions"]


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize(
    ("scenario", "configured", "window"),
    [
        ({"server": "llama.cpp", "served_window": 4096}, None, 4096),
        ({"server": "llama.cpp", "served_window": 16384}, 8192, 8192),  # a smaller configured window wins
        ({"server": "llama.cpp", "served_window": 4096}, 100_000, 4096),  # never more than the server serves
        ({"server": "vllm", "served_window": 12_000}, None, 12_000),
        ({}, 20_000, 20_000),  # the server does not say: the configured window
        ({}, None, 32_768),  # nothing known: the model table's default
    ],
)
async def test_the_served_window_is_learned_and_reported(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
    scenario: dict[str, Any],
    configured: int | None,
    window: int,
) -> None:
    """Issue 17 part 1: llama.cpp `/props`, vLLM `max_model_len`, else `context.window_tokens`, else the table."""
    openai_emulator.script({**scenario, "answers": [say("hi")]})
    cli: dict[str, Any] = {"provider": "scripted"}
    if configured:
        cli["context"] = {"window_tokens": configured}
    h = make_harness(provider=local, settings=load_settings(workspace, cli=cli))
    assert await h.session.prompt(prompt("hello")) == "end_turn"
    assert h.session.p.model_window == window
    assert h.session.p.settings.compress_threshold(h.session.p.model_window) == int(window * 0.8)


async def test_a_list_argument_is_answered_with_an_error_and_the_turn_goes_on(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """Issue 17 part 3: an unrunnable call is answered (is_error result, exact text), the model corrects itself."""
    (workspace / "a.py").write_text("print('a')\n")
    bad = '```json\n{"name": "edit_file", "arguments": ["a.py", "a", "b"]}\n```'
    good = '{"name": "read_file", "arguments": {"path": "a.py"}}'
    openai_emulator.script({"answers": [say(bad), say(good), say("Done.")]})
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("change a.py")) == "end_turn"
    bodies = chat_bodies(openai_emulator)
    assert len(bodies) == 3
    [error] = tool_messages(bodies[1])
    assert error["content"].startswith(
        "Error: malformed tool call: edit_file was not run: its arguments are a list of 3 items, not a JSON "
        "object. Call the tool again with the arguments as one JSON object, e.g. {"
    )
    results = tool_messages(bodies[2])
    assert results[-1]["content"].endswith("print('a')\n") or "print('a')" in results[-1]["content"]
    ids = [c["id"] for m in bodies[2]["messages"] for c in m.get("tool_calls") or []]
    assert len(ids) == len(set(ids)) == 2  # recovered calls keep unique ids
    assert not openai_emulator.problems


async def test_several_calls_in_one_reply_with_prose_all_run(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """Issue 17 part 3: two fenced calls with prose around: both run, the prose is the reply's text."""
    (workspace / "a.py").write_text("A\n")
    (workspace / "b.py").write_text("B\n")
    both = (
        "I'll read both files.\n"
        '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```\n'
        '```json\n{"name": "read_file", "arguments": {"path": "b.py"}}\n```\n'
        "Then I'll compare them."
    )
    openai_emulator.script({"answers": [say(both), say("They differ.")]})
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("compare a.py and b.py")) == "end_turn"
    second = chat_bodies(openai_emulator)[1]
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "I'll read both files.\n\nThen I'll compare them."
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        {"path": "a.py"},
        {"path": "b.py"},
    ]
    assert [("Error" in m["content"]) for m in tool_messages(second)] == [False, False]
    shown = "".join(
        u.get("content", {}).get("text", "")
        for u in h.updates
        if u.get("sessionUpdate") == ("agent_message_chunk")
    )
    assert "read_file" not in shown and shown.startswith("I'll read both files.")


async def test_malformed_rounds_are_bounded(
    make_harness: Callable[..., Harness], openai_emulator: Emulator, local: OpenAICompatProvider
) -> None:
    """Issue 17 part 3: after MAX_MALFORMED_ROUNDS error answers, the next malformed reply stays text and the
    turn ends (a model that cannot produce a call does not loop until max_turn_requests)."""
    bad = '{"name": "read_file", "arguments": 7}'
    openai_emulator.script({"answers": [say(bad)] * (MAX_MALFORMED_ROUNDS + 1)})
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("read something")) == "end_turn"
    assert len(chat_bodies(openai_emulator)) == MAX_MALFORMED_ROUNDS + 1
    last = h.session.p.context.messages[-1]
    assert last["role"] == "assistant" and last["content"] == [{"type": "text", "text": bad}]


async def test_the_stale_plan_reminder_is_a_system_message_at_the_tail(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """Issue 17 part 5 (CONTRACTS.md §3): for chat models the reminder is a request-only system message at the
    very end of request 4, not text in the user's message; the stored history never holds it."""
    from agentd.core.todos import REMINDER_TEXT

    (workspace / "a.py").write_text("A\n")
    read = {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.py"}}}]}
    openai_emulator.script({"answers": [read, read, read, say("done")]})
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("read a.py three times")) == "end_turn"
    bodies = chat_bodies(openai_emulator)
    assert [REMINDER_TEXT in json.dumps(b) for b in bodies] == [False, False, False, True]
    assert bodies[3]["messages"][-1] == {"role": "system", "content": REMINDER_TEXT}
    assert bodies[3]["messages"][-2]["role"] == "tool"
    assert REMINDER_TEXT not in json.dumps(h.session.p.context.messages)
    assert not openai_emulator.problems


def _data_file(workspace: Path) -> Path:
    """32 KiB of CJK and hex text: ~18k tokens for a real tokenizer (the issue's file), 8k EMU-TOK-1 tokens."""
    line = "数据记录 " + "0123456789abcdef" * 4 + " 值\n"
    path = workspace / "data.txt"
    path.write_text(line * (32768 // len(line.encode("utf-8"))))
    return path


READ_DATA = {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "data.txt"}}}]}


@pytest.mark.parametrize(
    ("scenario", "configured"),
    [
        (
            {"server": "llama.cpp", "served_window": 4096},
            None,
        ),  # the window is known: compressed before sending
        ({"served_window": 4096}, 32_768),  # agentd believes 32k: the server's refusal triggers the recovery
    ],
)
async def test_a_4k_window_and_an_18k_tool_output_the_session_recovers(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
    scenario: dict[str, Any],
    configured: int | None,
) -> None:
    """Issue 17 part 2 (acceptance): a 4k-token server, a 32 KiB CJK/hex file read: the turn ends normally and
    the next prompt succeeds; a refusal ("context exceeded") is answered once by compressing, then a retry."""
    from agentd.core.fit import dense_tokens

    assert dense_tokens(_data_file(workspace).read_text()) >= 18_000  # the 18k-token tool output
    marker = {"compaction_marker": "Summarize the conversation below"}  # summary requests get the emulator's
    openai_emulator.script(
        {**scenario, **marker, "answers": [READ_DATA, say("It holds records."), say("Yes.")]}
    )
    cli: dict[str, Any] = {"provider": "scripted", "tools": {"terse_descriptions": True}}
    if configured:
        cli["context"] = {"window_tokens": configured}
    h = make_harness(provider=local, settings=load_settings(workspace, cli=cli))
    assert await h.session.prompt(prompt("What is in data.txt?")) == "end_turn"
    assert await h.session.prompt(prompt("Is that all?")) == "end_turn"
    assert h.session.p.model_window == 4096
    statuses = [e["status"] for e in openai_emulator.journal if e.get("path") == "/v1/chat/completions"]
    refused = 1 if configured else 0
    assert statuses.count(400) == refused and statuses[-1] == 200
    assert h.session.p.context.compaction.compactions >= refused  # a known window: the token cap sufficed
    assert not [p for p in openai_emulator.problems if "exceeds" not in p and "maximum context" not in p]
    h.session.close()
    resumed = make_harness(provider=local, resume=h.session.id, settings=load_settings(workspace, cli=cli))
    assert resumed.session.p.context.messages == h.session.p.context.messages


async def test_a_failed_unanswered_turn_leaves_the_history_as_before(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """Issue 17 part 4: the next prompt is not merged with the failed one ("X\\n\\nX"), live and after a resume."""
    from agentd.errors import ProviderError

    openai_emulator.script({"answers": [say("hello"), {"http": 400}, say("ok")]})
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("first")) == "end_turn"
    before = h.session.p.context.messages
    with pytest.raises(ProviderError):
        await h.session.prompt(prompt("second"))
    assert h.session.p.context.messages == before
    h.session.close()
    again = make_harness(provider=local, resume=h.session.id)
    assert again.session.p.context.messages == before
    assert await again.session.prompt(prompt("second")) == "end_turn"
    last = chat_bodies(openai_emulator)[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["first", "second"]


async def test_a_failed_turn_answered_in_part_keeps_the_prompt_and_a_note(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """Issue 17 part 4: the model had answered (a tool ran): the prompt stays, the model is told the turn stopped."""
    from agentd.core.loop import failed_note
    from agentd.errors import ProviderError

    (workspace / "a.py").write_text("A\n")
    read = {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.py"}}}]}
    openai_emulator.script({"answers": [read, {"http": 400}, say("ok")]})
    h = make_harness(provider=local)
    with pytest.raises(ProviderError) as err:
        await h.session.prompt(prompt("read a.py"))
    last = h.session.p.context.messages[-1]
    assert last["content"][-1] == {"type": "text", "text": failed_note(err.value.message)}
    assert await h.session.prompt(prompt("try again")) == "end_turn"
    final = chat_bodies(openai_emulator)[-1]["messages"]
    users = [m["content"] for m in final if m["role"] == "user"]
    assert users[0] == "read a.py" and users[-1].endswith("try again") and "stopped before" in users[-1]
    assert not openai_emulator.problems


async def test_compress_to_fit_tries_the_usual_cut_first(
    make_harness: Callable[..., Harness], workspace: Path
) -> None:
    """Issue 17 part 2: when the reply's reserve makes a request not fit before the 80 % threshold, the usual cut
    (keep_recent_messages kept) is tried first; the short tail only when that is not enough."""
    from agentd.persistence.store import read_records

    (workspace / "a.txt").write_text("alpha beta gamma delta\n" * 60)  # ~350 tokens a read
    read = {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}]}
    scenario = {"answers": [read] * 10 + [say("done")]}
    cli = {"provider": "scripted", "context": {"window_tokens": 9000}, "max_output_tokens": 8192}
    h = make_harness(scenario, settings=load_settings(workspace, cli=cli))
    assert await h.session.prompt(prompt("read a.txt ten times")) == "end_turn"
    records, _ = read_records(h.session.p.store.data_dir, h.session.id)
    first = next(i for i, r in enumerate(records) if r.get("kind") == "compaction")
    replies = sum(
        1 for r in records[:first] if r.get("kind") == "message" and r["message"]["role"] == "assistant"
    )
    active = 1 + 2 * replies  # the prompt, then each reply and its tool result
    kept = active - records[first]["replaced"]
    assert kept >= h.session.p.settings.context.keep_recent_messages  # not only the last round (2 messages)


async def test_the_terminal_front_ends_know_the_served_window_before_the_first_prompt(
    workspace: Path, data_dir: Path, openai_emulator: Emulator, local: OpenAICompatProvider
) -> None:
    """Issue 17 part 1: every front end reports the real figure: the terminal client's status line reads
    `Session.status()` as soon as a session is opened (new or resumed), before any request."""
    from agentd.permissions.approver import QueueApprover
    from agentd.persistence.paths import DataDir
    from agentd.terminal import open_or_create

    openai_emulator.script({"server": "llama.cpp", "served_window": 4096, "answers": []})
    common: dict[str, Any] = {
        "settings": load_settings(workspace, cli={"provider": "openai"}),
        "data_dir": DataDir(data_dir),
        "workspace": workspace,
        "provider": local,
        "approver": QueueApprover(),
        "sink": lambda u: None,
        "lines": lambda line: None,
    }
    session, created = await open_or_create(session_id=None, **common)
    assert created and session.status()["context"]["windowTokens"] == 4096
    sid = session.id
    await session.aclose()
    again, created = await open_or_create(session_id=sid, **common)
    assert not created and again.status()["context"]["windowTokens"] == 4096
    await again.aclose()


class _Hostile:
    """A server on 127.0.0.1 that answers every request the way `mode` says, until `close()`."""

    def __init__(self, mode: str) -> None:
        import socket
        import threading

        self.mode, self.stop = mode, threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        import threading

        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: Any) -> None:
        with conn:
            try:
                conn.recv(65536)
                if self.mode == "trickle_body":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                elif self.mode == "trickle_headers":
                    conn.sendall(b"HTTP/1.1 200 OK\r\n")
                elif self.mode in ("deep", "huge"):
                    body = b"[" * (500_000 if self.mode == "deep" else 3_000_000)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                    return
                while not self.stop.wait(0.1):  # silent, or one byte at a time
                    if self.mode != "silent":
                        conn.sendall(b"x" if self.mode == "trickle_headers" else b" ")
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)
        self.sock.close()


@pytest.mark.parametrize("mode", ["trickle_body", "trickle_headers", "silent", "deep", "huge"])
async def test_window_endpoints_that_hang_or_answer_garbage_never_hold_the_caller(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """issue 17 (break17): the probes' timeout was per socket operation, so a server sending its answer a byte
    at a time held `learn_window` (an editor's session open, the first prompt) forever, and a silent one for 5 s
    per probe; an answer nested deeper than the stack raised out of the probes. All probes now share one
    deadline, the caller never waits past it, and garbage is no answer."""
    import time

    from agentd.providers import served_window as sw

    monkeypatch.setattr(sw, "PROBE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(sw, "PROBE_TOTAL_S", 1.5)
    server = _Hostile(mode)
    try:
        started = time.monotonic()
        p = OpenAICompatProvider("emu-model", "not-needed", server.url, ManualClock())
        assert await p.served_window() is None
        assert time.monotonic() - started < 10  # 2.5 s at most, generous for a loaded machine
        await p.aclose()
    finally:
        server.close()


@pytest.mark.parametrize(
    "server", ["llama.cpp", None]
)  # the window learned from /props, or only from the 400
async def test_a_window_smaller_than_the_system_prompt_and_tools_ends_each_turn_with_one_clear_error(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
    server: str | None,
) -> None:
    """issue 17 (break17): a 300-token window (below the ~2,500 tokens of system prompt and tools) ended every
    turn with the server's "reduce the length of the messages" after a one-word prompt; each turn now ends, after
    a bounded number of requests, with an error that states both figures and what to change, and the failed
    prompt leaves no trace in the history."""
    from agentd.errors import ContextExceeded

    scenario: dict[str, Any] = {"served_window": 300, "answers": [say("never sent")]}
    if server:
        scenario["server"] = server
    openai_emulator.script(scenario)
    cli = {"provider": "scripted", "context": {"window_tokens": 32_000}}
    h = make_harness(provider=local, settings=load_settings(workspace, cli=cli))
    for n in (1, 2):
        with pytest.raises(ContextExceeded) as err:
            await h.session.prompt(prompt("hi"))
        assert "system prompt and tool definitions alone" in err.value.message
        assert "context window is 300 tokens" in err.value.message and "llama-server -c" in err.value.message
        assert len(chat_bodies(openai_emulator)) <= 3 * n  # request, summary, retry at most: never a loop
        assert h.session.p.context.messages == []
    openai_emulator.check(allow_unused=True)
    openai_emulator.script({"answers": []})  # the fixture's own check: nothing left to use


async def test_a_failed_turn_whose_prompt_was_compressed_to_fit_leaves_a_note(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """issue 17 (break17): a prompt too large for a 4k window is compressed into the summary before its request;
    when that request failed, the turn was treated as unanswered but the prompt could not be withdrawn (it was
    no longer the tail), so the history silently kept the summary of a prompt the model never answered. It now
    gets the failed-turn note, live and after a resume."""
    from agentd.core.loop import failed_note
    from agentd.errors import ProviderError

    marker = {"compaction_marker": "Summarize the conversation below"}
    openai_emulator.script(
        {"server": "llama.cpp", "served_window": 4096, **marker, "answers": [{"http": 400}, say("ok")]}
    )
    cli: dict[str, Any] = {"provider": "scripted", "tools": {"terse_descriptions": True}}
    h = make_harness(provider=local, settings=load_settings(workspace, cli=cli))
    big = "please look at this log:\n" + "error at line 42 in module foo\n" * 400
    with pytest.raises(ProviderError) as err:
        await h.session.prompt(prompt(big))
    assert any(e.get("compaction") for e in openai_emulator.journal)  # the prompt went into a summary
    note = {"type": "text", "text": failed_note(err.value.message)}
    assert h.session.p.context.messages[-1]["content"][-1] == note
    h.session.close()
    again = make_harness(provider=local, resume=h.session.id, settings=load_settings(workspace, cli=cli))
    assert again.session.p.context.messages == h.session.p.context.messages
    assert await again.session.prompt(prompt("second")) == "end_turn"
    users = [m["content"] for m in chat_bodies(openai_emulator)[-1]["messages"] if m["role"] == "user"]
    assert "stopped before it was finished" in users[-1] and users[-1].endswith("second")


async def test_a_context_exceeded_error_inside_the_stream_compresses_once_and_retracts_the_shown_text(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """issue 17 (break17): a server that reports "exceeds the available context size" as an error event inside
    a 200 stream (the headers already sent) got a plain retryable "stream failed": the same request was sent
    again with backoff, never compressed. It is a context-exceeded error like the 400 (one compression, one
    retry), and the text the refused attempt had shown is retracted by the retry's first chunk."""
    marker = {"compaction_marker": "Summarize the conversation below"}
    refused = {
        **say("Let me look at that file for you. " * 4),
        "stream_error_after_events": 3,
        "type": "exceed_context_size_error",
        "message": "the request exceeds the available context size, try increasing it",
    }
    openai_emulator.script({**marker, "answers": [refused, say("ok")]})
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("what is in data.txt?")) == "end_turn"
    kinds = [e.get("compaction") for e in openai_emulator.journal if e.get("path") == "/v1/chat/completions"]
    assert kinds == [False, True, False]  # refused, compressed once, sent again: no backoff retries
    chunks = [u for u in h.updates if u["sessionUpdate"] == "agent_message_chunk"]
    shown = {c["messageId"] for c in chunks if "ok" not in c["content"]["text"]}
    last = [c for c in chunks if c["content"]["text"] == "ok"]
    assert shown and len(last) == 1 and last[0]["_meta"]["agentd"]["retracts"] in shown
    assert not [u for u in h.updates if u["sessionUpdate"] == "retry"]


async def test_a_server_that_refuses_a_late_system_message_gets_the_reminder_in_the_user_message(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """issue 17 (break17): with the default `openai.reminder_role = "system"`, a chat template that allows a
    system message only first (Mistral's, Gemma's) refused every request carrying the stale-plan reminder with a
    400, so every prompt with a stale plan failed until the user found the setting; the request is sent again at
    once with the reminder in the user message, and later ones go that way from the start."""
    from agentd.core.todos import REMINDER_TEXT

    (workspace / "a.py").write_text("A\n")
    read = {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.py"}}}]}
    openai_emulator.script(
        {"system_first_only": True, "answers": [read, read, read, say("done"), read, say("ok")]}
    )
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("read a.py three times")) == "end_turn"
    assert await h.session.prompt(prompt("once more")) == "end_turn"
    statuses = [e["status"] for e in openai_emulator.journal if e.get("path") == "/v1/chat/completions"]
    assert statuses == [200, 200, 200, 400, 200, 200, 200]  # one refusal, never again
    bodies = [b for b in chat_bodies(openai_emulator) if REMINDER_TEXT in json.dumps(b)]
    assert bodies[-1]["messages"][-1]["role"] != "system"
    assert REMINDER_TEXT not in json.dumps(h.session.p.context.messages)


async def test_calls_of_a_tool_that_is_not_offered_are_answered_and_bounded_like_malformed_ones(
    make_harness: Callable[..., Harness], openai_emulator: Emulator, local: OpenAICompatProvider
) -> None:
    """issue 17 (break17): a call in `<tool_call>` tags of a tool that does not exist is answered (the model
    learns the tools' names) and counts as a malformed round, so a model repeating it ends its turn after
    MAX_MALFORMED_ROUNDS answers instead of looping until max_turn_requests."""
    bad = '<tool_call>\n{"name": "functions.read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
    openai_emulator.script({"answers": [say(bad)] * (MAX_MALFORMED_ROUNDS + 1)})
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("read a.py")) == "end_turn"
    bodies = chat_bodies(openai_emulator)
    assert len(bodies) == MAX_MALFORMED_ROUNDS + 1
    answer = tool_messages(bodies[1])[0]["content"]
    assert answer.startswith('Error: malformed tool call: there is no tool named "functions.read_file"')
    assert "read_file" in answer.split("the tools are:")[1]
    assert not h.session.toolbox.invalid_inputs  # nothing left behind for ids that never come back


async def test_a_text_call_cut_at_max_tokens_is_reported_as_cut_not_as_bad_json(
    make_harness: Callable[..., Harness], openai_emulator: Emulator, local: OpenAICompatProvider
) -> None:
    """issue 17 (break17): a reply that hit max_tokens in the middle of a call written as text (a long
    write_file) was answered "its JSON does not parse", so the model wrote the same long call again and was cut
    again; it is a truncated call like a cut `tool_calls` entry: never run, the turn stops at max_tokens and the
    model is told with the next prompt."""
    from agentd.core.replies import cut_note

    cut = '<tool_call>\n{"name": "write_file", "arguments": {"path": "big.txt", "content": "aaaa'
    openai_emulator.script(
        {"answers": [{**say("Writing it now. " + cut), "stop_reason": "max_tokens"}, say("smaller, then")]}
    )
    h = make_harness(provider=local)
    assert await h.session.prompt(prompt("write big.txt")) == "max_tokens"  # as for a cut tool_calls entry
    assert await h.session.prompt(prompt("go on")) == "end_turn"
    text = json.dumps(chat_bodies(openai_emulator)[-1]["messages"])
    assert cut_note(["write_file"])["text"][:40] in text.replace('\\"', '"')
    assert "does not parse" not in text and "call_text_" not in text


async def test_a_400_for_another_reason_does_not_move_the_reminder(
    make_harness: Callable[..., Harness],
    workspace: Path,
    openai_emulator: Emulator,
    local: OpenAICompatProvider,
) -> None:
    """issue 17 (break17): the late-system-message fallback sends a refused request once more with the reminder
    in the user message; when that is refused too, the role was not the cause: the error stands and the
    reminder stays a system message."""
    from agentd.errors import ProviderError

    (workspace / "a.py").write_text("A\n")
    read = {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.py"}}}]}
    openai_emulator.script({"answers": [read, read, read, {"http": 400}, {"http": 400}]})
    h = make_harness(provider=local)
    with pytest.raises(ProviderError):
        await h.session.prompt(prompt("read a.py three times"))
    assert len(chat_bodies(openai_emulator)) == 5 and local.reminder_role == "system"
