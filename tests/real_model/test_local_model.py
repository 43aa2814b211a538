"""agentd on a real small model offline (issue 17 part 6; TESTING.md §1.7): Qwen2.5-Coder-1.5B-Instruct Q4_K_M
under the prebuilt llama-server, on the idna 3.10 project, through the real command line.

Three small real tasks, each its own session (plan with todo_write and read a file; a small edit and a test run
with `--yes`; a question needing two files), then the first session resumed in a new process. Asserted: protocol validity and state,
never the model's wording: every request valid (the emulator's validator, through the proxy) and answered 200,
at least one tool executed and its result sent, a plan update whenever todo_write succeeded, no turn ending on
an unexecuted tool call, the served window learned (16,384 from /props), the resume works. The run's figures go
to `.cache/real-model/figures.json` (docs/local-models.md quotes one run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.real_model.assemble import CACHE
from tests.real_model.harness import CONTEXT, ValidatingProxy, figures, session_records, tool_stats

MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
RUN_TIMEOUT_S = 2400  # one `agentd run` on a loaded 2-core machine
CONFIG = """\
max_turn_requests = 8
max_output_tokens = 512

[tools]
terse_descriptions = true

[openai]
temperature = 0.0
seed = 1
"""
# (task, prompt, how): "new" starts a session, "continue" goes on with the task's session, "resume" reopens the
# first task's session in a new process. One directive per prompt: a 1.5B model follows "Call the X tool" well,
# and narrates instead of calling when a prompt chains several steps.
TASKS = [
    (
        "plan",
        "Call the todo_write tool with two todos: 'Read README.rst' with status in_progress and 'Summarize the "
        "project' with status pending.",
        "new",
    ),
    ("plan", "Call the read_file tool on README.rst.", "continue"),
    (
        "edit",
        'Call the edit_file tool on idna/package_data.py with old_string "3.10" and new_string "3.10.1".',
        "new",
    ),
    (
        "edit",
        "Call the run_command tool with the command: python3 -m unittest discover -s tests -t .",
        "continue",
    ),
    (
        "question",
        "Does the newest release in HISTORY.rst match __version__ in idna/package_data.py? Call the read_file tool "
        "on both files to find out.",
        "new",
    ),
    ("resume", "Call the read_file tool on idna/package_data.py.", "resume"),
]


def _env(home: Path, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    cfg = home / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text(CONFIG)
    return {**env, "HOME": str(home), "AGENTD_CONFIG_DIR": str(cfg), "AGENTD_DATA_DIR": str(data_dir)}


def _run(
    ws: Path, env: dict[str, str], url: str, prompt: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "agentd", "run", "--workspace", str(ws), "--provider", "openai"]
    args += ["--base-url", url + "/v1", "--model", MODEL, "--yes", "-v", "--prompt", prompt, *extra]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def _history(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["message"] for r in records if r.get("kind") == "message"]


@pytest.mark.timeout(5400)
def test_three_real_tasks_and_a_resume(
    proxy: tuple[ValidatingProxy, str], real_project: Path, tmp_path: Path
) -> None:
    recorder, url = proxy
    ws = tmp_path / "idna"
    shutil.copytree(real_project, ws, ignore=shutil.ignore_patterns("__pycache__", ".complete"))
    data_dir = tmp_path / "data"
    env = _env(tmp_path / "home", data_dir)
    started = time.monotonic()
    runs: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    first_request: dict[str, int] = {}  # how -> index in recorder.chats of its run's first request
    sessions: dict[str, str] = {}  # task -> session id
    for task, prompt, how in TASKS:
        before = set(session_records(data_dir)) if data_dir.exists() else set()
        extra = {
            "new": (),
            "continue": ("--resume", sessions.get(task, "")),
            "resume": ("--resume", sessions.get("plan", "")),
        }
        first_request.setdefault(how, len(recorder.chats))
        run = _run(ws, env, url, prompt, *extra[how])
        runs.append((task, run))
        # 0: end_turn; 7: the model stopped at max_tokens or max_turn_requests (a small model may loop), which
        # is the model's limit, not agentd's failure; anything else is (PROTOCOL.md §3.1)
        assert run.returncode in (0, 7), f"{task}: exit {run.returncode}\n{run.stderr[-3000:]}"
        if how == "new":
            [sessions[task]] = set(session_records(data_dir)) - before
    wall = time.monotonic() - started
    records = session_records(data_dir)
    result = figures(recorder, records, wall)
    stops = [
        line.split("·", 1)[1].strip(" ]")
        for _, r in runs
        for line in r.stderr.splitlines()
        if "[stop ·" in line
    ]
    result["stop_reasons"] = {reason: stops.count(reason) for reason in sorted(set(stops))}
    result["prompts"] = len(runs)
    out = CACHE / "real-model"
    out.mkdir(parents=True, exist_ok=True)
    (out / "figures.json").write_text(json.dumps(result, indent=2) + "\n")
    shutil.rmtree(out / "data", ignore_errors=True)
    shutil.copytree(data_dir, out / "data")  # the sessions of the last run, to read
    (out / "stderr.txt").write_text("\n".join(f"== {n}\n{r.stderr}\n{r.stdout}" for n, r in runs))

    assert sorted(records) == sorted(sessions.values())  # three sessions, one of them resumed
    chats = recorder.chats
    assert chats, "no chat request reached the server"
    assert [e.problem for e in chats if e.problem] == []  # every request valid
    assert [e.status for e in chats if e.status != 200] == []
    assert any(m.get("role") == "tool" for e in chats for m in e.body["messages"]), "no tool result was sent"
    stats = tool_stats(records)
    assert stats["executed"] >= 1 and stats["unanswered"] == 0  # no turn ends on an unexecuted call
    recs = [r for session in records.values() for r in session]
    todo_ids = {
        b["id"]
        for m in _history(recs)
        for b in m.get("content") or []
        if b.get("type") == "tool_use" and b.get("name") == "todo_write"
    }
    todo_ok = [r for r in recs if r.get("kind") == "tool_call" and r.get("toolCallId") in todo_ids]
    if any(r.get("status") == "completed" for r in todo_ok):
        assert [r for r in recs if r.get("kind") == "todos"], (
            "todo_write succeeded but no plan update was recorded"
        )
    usage = [r for r in recs if r.get("kind") == "usage"]
    assert len(usage) == len([e for e in chats if e.status == 200])
    assert f"context window: {CONTEXT} tokens" in runs[0][1].stderr  # learned from llama.cpp's /props
    # resume works: the resumed process sent the session's history (its earlier prompts, or their summary)
    resumed = chats[first_request["resume"]].body["messages"]
    sent = [m.get("content") for m in resumed if m.get("role") == "user"]
    compacted = any(r.get("kind") == "compaction" for r in records[sessions["plan"]])
    assert str(sent[-1]).endswith(TASKS[-1][1])
    assert compacted or [t for t in sent if t in (TASKS[0][1], TASKS[1][1])] == [TASKS[0][1], TASKS[1][1]]
