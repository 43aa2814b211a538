"""Generate a realistic session through the real store (TESTING.md §5.2).

`generate(data_dir, messages=N, seed=S)` writes one session with exactly N `message` records: turns of a
prompt, 0-6 tool rounds of 1-3 paired tool calls (reads, listings, commands, edits, writes and a
`todo_write` every few rounds, with its `todos` snapshot), and a closing assistant text; no compaction, so a
resume reads everything. Records are written with `SessionStore.create` and `append`/`append_many` in the
shapes `core/loop.py` and `core/session.py` write (prompt + user message in one append, title, usage,
assistant message, tool_started, tool_result message, tool_call, todos), then meta.json is updated as at
the end of each turn. Deterministic for a seed: ids and timestamps come from the seed, not the clock.

Appends are not fsynced one by one (one fsync at the end): the file is the same, only faster to make.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentd.persistence.paths import DataDir
from agentd.persistence.store import SessionStore

MODEL = "claude-sonnet-4-6"
WORDS = (
    "the parser config module test fixture handler request response cache token index session store replay "
    "update client server render widget value error path file line column buffer editor plan step check"
).split()
FILES = [
    f"src/{a}_{b}.py" for a in ("core", "util", "api", "cli", "db") for b in ("main", "io", "model", "views")
]
COMMANDS = ["pytest -q", "ruff check .", "git status --short", "python -m build", "ls -la src", "make test"]


def session_id_for(messages: int, seed: int) -> str:
    """The id `gen-session` gives a session of `messages` messages made from `seed`."""
    return f"sess_bench_m{messages}_s{seed}"


@dataclass
class _Ids:
    rng: random.Random
    n: int = 0

    def message(self) -> str:
        self.n += 1
        return f"msg_{self.n:010d}{self.rng.getrandbits(64):016x}"


class _Clock:
    """A deterministic wall clock: 2026-01-05T09:00:00Z, then 1-40 s per append."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.now = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=self.rng.randint(1, 40))
        return self.now


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def _text_of(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        line = "    " * rng.randint(0, 3) + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        out.append(line)
        n += len(line) + 1
    return "\n".join(out)


def _tool(rng: random.Random, tid: str, round_no: int, todos: list[dict[str, str]]) -> tuple[dict, str, dict]:
    """(tool_use block, result text, tool_call payload) of one realistic call."""
    kind = (
        "todo"
        if round_no % 4 == 0
        else rng.choice(["read", "read", "read", "list", "run", "run", "edit", "write"])
    )
    path = rng.choice(FILES)
    if kind == "todo":
        for t in todos:
            if t["status"] == "in_progress":
                t["status"] = "done"
                break
        for t in todos:
            if t["status"] == "pending":
                t["status"] = "in_progress"
                break
        if all(t["status"] == "done" for t in todos):  # the plan is finished: the next one replaces it
            todos[:] = [
                {"content": _sentence(rng, 3, 7), "status": "pending"} for _ in range(rng.randint(3, 8))
            ]
            todos[0]["status"] = "in_progress"
        inp: dict[str, Any] = {"todos": [dict(t) for t in todos]}
        snapshot = (
            '{"todos":['
            + ",".join(f'{{"content":"{t["content"]}","status":"{t["status"]}"}}' for t in todos)
            + "]}"
        )
        raw = {"items": len(todos)}
        return _use(tid, "todo_write", inp), snapshot, _call(tid, "Update the TODO list", "other", inp, raw)
    if kind == "read":
        body = _text_of(rng, rng.randint(500, 4000))
        lines = body.split("\n")
        text = "\n".join(f"{i:>6}\t{ln}" for i, ln in enumerate(lines, 1))
        inp = {"path": path}
        raw = {"lines": len(lines), "bytes": len(body), "source": "disk"}
        return _use(tid, "read_file", inp), text, _call(tid, f"Read {path}", "read", inp, raw, path=path)
    if kind == "list":
        names = sorted({rng.choice(FILES).split("/")[1] for _ in range(rng.randint(3, 15))})
        inp = {"path": "src"}
        raw = {"entries": len(names), "truncated": False}
        return (
            _use(tid, "list_dir", inp),
            "\n".join(names),
            _call(tid, "List src/", "search", inp, raw, path="src"),
        )
    if kind == "run":
        cmd = rng.choice(COMMANDS)
        out = _text_of(rng, rng.randint(200, 3000)) + "\n[exit code 0]"
        inp = {"command": cmd}
        raw = {"exitCode": 0, "bytes": len(out), "timedOut": False, "truncated": False}
        return _use(tid, "run_command", inp), out, _call(tid, f"Run `{cmd}`", "execute", inp, raw)
    old, new = _sentence(rng, 2, 6), _sentence(rng, 2, 6)
    if kind == "edit":
        inp = {"path": path, "old_string": old, "new_string": new}
        diff = {"path": f"/work/{path}", "oldText": old, "newText": new}
        raw = {"bytes": rng.randint(200, 5000), "appliedVia": "disk"}
        return (
            _use(tid, "edit_file", inp),
            f"Edited {path}.",
            _call(tid, f"Edit {path}", "edit", inp, raw, path, diff),
        )
    content = _text_of(rng, rng.randint(200, 2000))
    inp = {"path": path, "content": content}
    diff = {"path": f"/work/{path}", "oldText": None, "newText": content}
    raw = {"bytes": len(content), "appliedVia": "disk"}
    return (
        _use(tid, "write_file", inp),
        f"Wrote {path}.",
        _call(tid, f"Write {path}", "edit", inp, raw, path, diff),
    )


def _use(tid: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def _call(
    tid: str, title: str, kind: str, inp: dict, raw: dict, path: str | None = None, diff: dict | None = None
) -> dict[str, Any]:
    locations = [{"path": f"/work/{path}", "line": 1}] if path else []
    return {"toolCallId": tid, "status": "completed", "title": title, "toolKind": kind, "rawInput": inp,
            "rawOutput": raw, "diff": diff, "locations": locations, "decidedBy": "rule"}  # fmt: skip


def _usage(rng: random.Random, context: int) -> dict[str, Any]:
    out = rng.randint(20, 600)
    write = rng.randint(50, 3000)
    return {
        "usage": {
            "inputTokens": 0,
            "outputTokens": out,
            "cacheCreationInputTokens": write,
            "cacheReadInputTokens": context,
        },
        "model": MODEL,
    }


def _turns(
    rng: random.Random, ids: _Ids, budget: int, tool_prefix: str = "toolu_gen_"
) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Batches of records, one batch per append call of the loop; exactly `budget` message records."""
    todos: list[dict[str, str]] = [{"content": _sentence(rng, 3, 7), "status": "pending"} for _ in range(4)]
    left, turn, tool_n, round_no, context = budget, 0, 0, 0, 3000
    while left > 0:
        turn += 1
        prompt = [{"type": "text", "text": _sentence(rng, 6, 30)}]
        mid = ids.message()
        yield [("prompt", {"messageId": mid, "content": prompt}),
               ("message", {"messageId": mid, "message": {"role": "user", "content": prompt}})]  # fmt: skip
        left -= 1
        if turn == 1:
            yield [("title", {"title": prompt[0]["text"][:80]})]
        if left == 0:
            return
        for _ in range(rng.randint(0, 6)):
            k = min(rng.randint(1, 3), left - 2)  # keep one message for the closing reply
            if k < 1:
                break
            round_no += 1
            calls = []
            for _ in range(k):
                tool_n += 1
                calls.append(_tool(rng, f"{tool_prefix}{tool_n:06d}", round_no, todos))
            yield [("usage", _usage(rng, context))]
            content = [{"type": "text", "text": _sentence(rng, 5, 25)}] + [c[0] for c in calls]
            yield [
                (
                    "message",
                    {"messageId": ids.message(), "message": {"role": "assistant", "content": content}},
                )
            ]
            left -= 1
            for use, result, call in calls:
                yield [("tool_started", {"toolCallId": use["id"]})]
                block = {"type": "tool_result", "tool_use_id": use["id"], "content": result}
                yield [
                    ("message", {"messageId": ids.message(), "message": {"role": "user", "content": [block]}})
                ]
                yield [("tool_call", call)]
                if use["name"] == "todo_write":
                    yield [("todos", {"todos": use["input"]["todos"]})]
                left -= 1
                context += len(result) // 4
        yield [("usage", _usage(rng, context))]
        reply = [{"type": "text", "text": " ".join(_sentence(rng, 5, 20) for _ in range(rng.randint(1, 4)))}]
        yield [("message", {"messageId": ids.message(), "message": {"role": "assistant", "content": reply}})]
        left -= 1


def generate(data_dir: Path | str, *, messages: int, seed: int, session_id: str | None = None) -> str:
    """Write the session and return its id (`session_id_for(messages, seed)` unless given)."""
    rng = random.Random(seed)
    sid = session_id or session_id_for(messages, seed)
    dd = DataDir(data_dir)
    meta = {
        "cwd": str(Path(data_dir) / "workspace"),
        "provider": "anthropic",
        "model": MODEL,
        "directories": [],
    }
    (Path(data_dir) / "workspace").mkdir(parents=True, exist_ok=True)
    store = SessionStore.create(dd, sid, meta, clock=_Clock(rng))
    try:
        turns, title = 0, None
        for batch in _turns(rng, _Ids(rng), messages):
            store.append_many(batch, fsync=False)
            turns += batch[0][0] == "prompt"
            title = batch[0][1]["title"] if batch[0][0] == "title" else title
        store.sync()
        store.update_meta(turns=turns, title=title, model=MODEL)
    finally:
        store.close()
    return sid


def generate_compacted(data_dir: Path | str, *, mib: float, live_kib: float, seed: int) -> str:
    """A long session for the resume benchmark (issue 16): about `mib` MiB of turns, then a `compaction`
    record replacing all of them (the shape `core/compaction.py` writes: a summary, its ack, no kept message,
    the todo round counter), then about
    `live_kib` KiB of turns after it. Returns the session id (`sess_bench_big_<mib>_<seed>`)."""
    rng = random.Random(seed)
    sid = f"sess_bench_big_{int(mib)}_{seed}"
    dd = DataDir(data_dir)
    meta = {
        "cwd": str(Path(data_dir) / "workspace"),
        "provider": "anthropic",
        "model": MODEL,
        "directories": [],
    }
    (Path(data_dir) / "workspace").mkdir(parents=True, exist_ok=True)
    store = SessionStore.create(dd, sid, meta, clock=_Clock(rng))
    try:
        ids, turns, runs, last_role = _Ids(rng), 0, 0, ""
        for part, (budget_bytes, prefix) in enumerate(
            ((mib * 2**20, "toolu_old_"), (live_kib * 2**10, "toolu_new_"))
        ):
            if part == 1:  # everything so far replaced by a summary (counted in active messages: role runs)
                summary = {"role": "user", "content": [{"type": "text", "text": "[Summary of earlier conversation]\n"
                           + _text_of(rng, 4000)}]}  # fmt: skip
                ack = {"role": "assistant", "content": [{"type": "text", "text": "Understood."}]}
                store.append("compaction", {"replaced": runs, "summary": summary, "ack": ack, "kept": [],
                                            "stale": 0})  # fmt: skip
                last_role = "assistant"
            written, chunk = 0, 0
            while written < budget_bytes:
                chunk += 1
                for batch in _turns(rng, ids, 200, f"{prefix}{chunk:05d}_"):
                    records = store.append_many(batch, fsync=False)
                    written += sum(len(json.dumps(r)) + 1 for r in records)
                    turns += batch[0][0] == "prompt"
                    for kind, payload in batch:
                        role = payload["message"]["role"] if kind == "message" else None
                        if role and role != last_role:
                            runs, last_role = runs + 1, role
        store.sync()
        store.update_meta(turns=turns, title="A long session", model=MODEL)
    finally:
        store.close()
    return sid


def generate_paged(data_dir: Path | str, *, compactions: int, kib_between: float, seed: int) -> str:
    """A session with `compactions` `compaction` records (break16 F4: paging back through history), about
    `kib_between` KiB of turns before each and after the last; each compaction ends the turn it follows
    (written after its last message, the shape `generate_compacted` writes). Returns the session id
    (`sess_bench_paged_<compactions>_<seed>`); its cwd is `<data_dir>/workspace`."""
    rng = random.Random(seed)
    sid = f"sess_bench_paged_{compactions}_{seed}"
    meta = {
        "cwd": str(Path(data_dir) / "workspace"),
        "provider": "anthropic",
        "model": MODEL,
        "directories": [],
    }
    (Path(data_dir) / "workspace").mkdir(parents=True, exist_ok=True)
    store = SessionStore.create(DataDir(data_dir), sid, meta, clock=_Clock(rng))
    try:
        ids, turns = _Ids(rng), 0
        for part in range(compactions + 1):
            if part:
                summary = {"role": "user", "content": [{"type": "text", "text": f"[Summary {part}]\n"
                           + _text_of(rng, 2000)}]}  # fmt: skip
                ack = {"role": "assistant", "content": [{"type": "text", "text": "Understood."}]}
                store.append(
                    "compaction", {"replaced": 2, "summary": summary, "ack": ack, "kept": [], "stale": 0}
                )
            written, chunk = 0, 0
            while written < kib_between * 2**10:
                chunk += 1
                for batch in _turns(rng, ids, 12, f"toolu_p{part:03d}_{chunk:04d}_"):
                    records = store.append_many(batch, fsync=False)
                    written += sum(len(json.dumps(r)) + 1 for r in records)
                    turns += batch[0][0] == "prompt"
        store.sync()
        store.update_meta(turns=turns, title="A paged session", model=MODEL)
    finally:
        store.close()
    return sid
