"""Many sessions at once in one daemon (issue 16 §1): `sessions_concurrent`, `cross_talk`,
`notify_p50_ms`, `notify_p99_ms`, `idle_session_kib`.

One daemon over stdio (one editor connection, as an editor with many workspaces), one emulator process with
one conversation per session (TESTING.md §3.3 `conversations`), instant replies. Each session has its own
workspace holding an `a.txt` with a token only it knows; every session's turn is: the model calls
`read_file a.txt`, then answers `done-<i>`. All turns start together.

- notify latency (`notify_p50_ms`, `notify_p99_ms`, the issue's "a tool's completion reaches the editor"):
  from the moment the tool returned in the daemon (the `loop.after_tool_exec` failpoint's `stamp`, with the
  tool call's id) to the editor's receipt of that call's `completed` update: persisting the result and
  its `tool_call` record, the fsync that covers them (persist before notify), the frame's encoding and write,
  and whatever else the loop runs meanwhile for the other 49 turns.
- `reply_notify_p50_ms`, `reply_notify_p99_ms`: the wider span from the emulator's last byte of the reply
  carrying the tool_use to the same update (parsing the reply, persisting the assistant message, the audit
  record and `tool_started` and their fsyncs, the permission check, reading the one-line file).
- cross talk: a session whose request, updates or final text carry another session's token or miss its own.
- idle_session_kib: the daemon's RSS growth per session, sessions loaded and idle after their turn.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
from pathlib import Path
from typing import Any

from tests.reliability.driver import Daemon, EmulatorProc, canary_key, isolated_env

MODEL = "claude-sonnet-4-6"


def marker(i: int) -> str:
    return f"[conversation {i:03d}]"


def _scenario(n: int) -> dict[str, Any]:
    return {
        "conversations": {
            marker(i): [
                {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}]},
                {"reply": [{"text": f"done-{i}"}]},
            ]
            for i in range(n + 1)  # conversation n is the warm-up
        }
    }


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def concurrent_turns(
    base: Path, sessions: int = 50, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run `sessions` turns at once in one daemon (`extra_env` added to its environment); the figures of the
    module docstring."""
    key = canary_key()
    root = base / "workspaces"
    tokens = [f"token-{i}-{secrets.token_hex(6)}" for i in range(sessions + 1)]
    for i, token in enumerate(tokens):
        (root / f"ws{i:03d}").mkdir(parents=True)
        (root / f"ws{i:03d}" / "a.txt").write_text(token + "\n", encoding="utf-8")
    emu = await EmulatorProc.start(_scenario(sessions), base / "scenario.json")
    stamps = base / "stamps"
    env = isolated_env(base, key, ANTHROPIC_BASE_URL=emu.url, AGENTD_FAILPOINTS="loop.after_tool_exec=stamp",
                       AGENTD_FAILPOINT_STAMPS=str(stamps), **(extra_env or {}))  # fmt: skip
    daemon = await Daemon.spawn(env, stderr=base / "stderr")
    try:
        await daemon.initialize(root, {"model": MODEL})
        warm = await daemon.new_session(root / f"ws{sessions:03d}")  # imports and the HTTP client, once
        first = await daemon.prompt(warm, marker(sessions) + " Read a.txt.")
        assert first.get("result", {}).get("stopReason") == "end_turn", first
        rss0 = daemon.rss_kib()
        sids = [await daemon.new_session(root / f"ws{i:03d}") for i in range(sessions)]
        replies = await asyncio.gather(
            *(daemon.prompt(sid, f"{marker(i)} Read a.txt.", 300) for i, sid in enumerate(sids))
        )
        rss = daemon.rss_kib()
        journal = await emu.journal()
        stderr_ok = daemon.alive()
    finally:
        await daemon.stop()
        await emu.stop()
    ended = sum(1 for r in replies if r.get("result", {}).get("stopReason") == "end_turn")
    latencies = _notify_latencies(_tool_done(stamps), daemon, sids)
    wide = _latencies(journal, daemon, sids)
    return {
        "sessions_concurrent": ended,
        "cross_talk": _cross_talk(journal, daemon, sids, tokens),
        "notify_p50_ms": _ms(statistics.median, latencies),
        "notify_p99_ms": _ms(lambda v: percentile(v, 0.99), latencies),
        "notify_measured": len(latencies),
        "reply_notify_p50_ms": _ms(statistics.median, wide),
        "reply_notify_p99_ms": _ms(lambda v: percentile(v, 0.99), wide),
        "idle_session_kib": round((rss - rss0) / sessions),
        "daemon_alive_after_load": stderr_ok,
        "key": key,
    }


def _conversation(entry: dict[str, Any]) -> int | None:
    for m in (entry.get("body") or {}).get("messages") or []:
        if m.get("role") == "user":
            text = "".join(b.get("text", "") for b in m.get("content") or [] if isinstance(b, dict))
            for part in text.split("[conversation ")[1:]:
                return int(part[:3])
            return None
    return None


def _ms(stat: Any, values: list[float]) -> float | None:
    return round(stat(values), 1) if values else None


def _tool_done(stamps: Path) -> dict[str, float]:
    """`session/toolCallId` -> the monotonic time its tool returned in the daemon (the failpoint's stamps)."""
    out: dict[str, float] = {}
    if stamps.exists():
        for line in stamps.read_text(encoding="utf-8").splitlines():
            name, call_id, at = line.split(" ")
            if name == "loop.after_tool_exec":
                out[call_id] = float(at)
    return out


def _notify_latencies(done: dict[str, float], daemon: Daemon, sids: list[str]) -> list[float]:
    """Per session: ms from its tool's return in the daemon to the editor's receipt of its `completed`."""
    out = []
    for sid in sids:
        for u in daemon.updates.get(sid, []):
            key = f"{sid}/{u.update.get('toolCallId')}"
            if u.update.get("status") == "completed" and key in done:
                out.append((u.at - done[key]) * 1000)
    return out


def _latencies(journal: list[dict[str, Any]], daemon: Daemon, sids: list[str]) -> list[float]:
    """Per session: ms from the end of the reply carrying its tool_use to the `completed` update."""
    reply_end: dict[int, float] = {}
    for entry in journal:
        conv = _conversation(entry)
        if conv is not None and conv < len(sids) and entry.get("answer") == 1 and entry.get("last_byte_at"):
            reply_end[conv] = float(entry["last_byte_at"])
    out = []
    for i, sid in enumerate(sids):
        done = [u.at for u in daemon.updates.get(sid, [])
                if u.update.get("sessionUpdate") == "tool_call_update" and u.update.get("status") == "completed"]  # fmt: skip
        if done and i in reply_end:
            out.append((done[0] - reply_end[i]) * 1000)
    return out


def _cross_talk(journal: list[dict[str, Any]], daemon: Daemon, sids: list[str], tokens: list[str]) -> int:
    """Sessions whose second request, updates or final text show another's token or lack their own."""
    bad = 0
    seconds = {}
    for entry in journal:
        conv = _conversation(entry)
        if conv is not None and entry.get("answer") == 2:
            seconds[conv] = repr(entry.get("body"))
    for i, sid in enumerate(sids):
        updates = repr([u.update for u in daemon.updates.get(sid, [])])
        text = "".join(u.update.get("content", {}).get("text", "") for u in daemon.updates.get(sid, [])
                       if u.update.get("sessionUpdate") == "agent_message_chunk")  # fmt: skip
        others = [t for j, t in enumerate(tokens) if j != i]
        request = seconds.get(i, "")
        if (
            tokens[i] not in request
            or any(t in request or t in updates for t in others)
            or text != f"done-{i}"
        ):
            bad += 1
    return bad
