"""`kill -9` during a checkpoint and during a rewind, at each step (issue 13 acceptance; docs/checkpoints.md
"Crash safety"; agentd/failpoints.py): the workspace ends either fully before or fully after, never in
between, and the session stays resumable. Real `agentd` subprocesses with the scripted provider."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_checkpoints import BINARY, state

TURN = {
    "answers": [
        {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "new.py", "content": "NEW = 1\n"}}}]},
        {"reply": [{"tool_use": {"name": "edit_file", "input": {
            "path": "src/app.py", "old_string": "sum(xs)", "new_string": "sum(xs) + 1"}}}]},
        {"reply": [{"tool_use": {"name": "run_command", "input": {"command":
            "sed -i s/keep/changed/ notes.txt && rm -rf old && printf '\\001\\002' > logo.bin && "
            "chmod 600 run.sh && mkdir -p gen/deep && echo g > gen/deep/g.txt"}}}]},
        {"reply": [{"text": "done"}]},
    ]
}  # fmt: skip
AGAIN = {"answers": [{"reply": [{"text": "resumed"}]}]}


class Cli:
    """`python -m agentd` in a fresh data dir, home and workspace."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ws = tmp / "ws"
        home = tmp / "home"
        home.mkdir()
        self.env = {**os.environ, "AGENTD_DATA_DIR": str(tmp / "data"), "HOME": str(home),
                    "XDG_CONFIG_HOME": str(home / ".config")}  # fmt: skip
        self.env.pop("AGENTD_FAILPOINTS", None)

    def __call__(self, *args: str, failpoints: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if failpoints:
            env["AGENTD_FAILPOINTS"] = failpoints
        return subprocess.run([sys.executable, "-m", "agentd", *args], env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip

    def run(self, prompt: str, scenario: dict[str, Any], *extra: str, failpoints: str | None = None) -> Any:
        path = self.tmp / f"scenario-{len(list(self.tmp.glob('scenario-*')))}.json"
        path.write_text(json.dumps(scenario))
        return self("run", "--provider", "scripted", "--scenario", str(path), "--yes", "--workspace",
                    str(self.ws), "--prompt", prompt, *extra, failpoints=failpoints)  # fmt: skip

    def session(self) -> str:
        return self("sessions", "list").stdout.splitlines()[1].split()[0]

    def records(self, sid: str) -> list[dict[str, Any]]:
        out = self("sessions", "export", sid, "--format", "jsonl")
        return [json.loads(line) for line in out.stdout.splitlines()]


def make_tree(ws: Path) -> None:
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("def total(xs):\n    return sum(xs)\n")
    (ws / "notes.txt").write_text("keep me\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(ws / "run.sh", 0o755)
    (ws / "logo.bin").write_bytes(BINARY)
    (ws / "old" / "deep").mkdir(parents=True)
    (ws / "old" / "a.txt").write_text("a\n")
    (ws / "old" / "deep" / "b.txt").write_text("b\n")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    make_tree(c.ws)
    return c


# The rewind's steps in order; the state the workspace must end in once the session opens again.
REWIND_KILLS = [
    ("checkpoint.pack_written=kill@1", "before"),  # the `rK` walk's objects, before their pack is durable
    ("checkpoint.before_record=kill@1", "before"),  # `rK` walked, its record not written: no intent yet
    ("rewind.intent_written=kill", "after"),
    ("rewind.apply=kill@1", "after"),
    ("rewind.apply=kill@4", "after"),
    ("rewind.applied=kill", "after"),
    ("checkpoint.before_record=kill@2", "after"),  # `rK.end`
    ("rewind.recorded=kill", "after"),
]


@pytest.mark.parametrize(("failpoint", "ends"), REWIND_KILLS, ids=[f for f, _ in REWIND_KILLS])
def test_kill_during_a_rewind(cli: Cli, failpoint: str, ends: str) -> None:
    """Acceptance: a kill at each step of `sessions rewind` leaves the workspace fully before (the intent
    file was not yet written) or, once the session opens again, fully after (the plan runs again); the
    file the user added after the turn is kept either way; the rewind is recorded exactly once, and the
    session takes a prompt."""
    before = state(cli.ws)
    assert cli.run("change everything", TURN).returncode == 0
    sid = cli.session()
    (cli.ws / "user.txt").write_text(
        "the user's\n"
    )  # new bytes: the `rK` walk writes a pack; kept throughout
    changed = state(cli.ws)
    assert changed != before
    before = {**before, "user.txt": changed["user.txt"]}
    killed = cli("sessions", "rewind", sid, "--to", "1", failpoints=failpoint)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    pending = json.loads(cli("sessions", "checkpoints", sid, "--json").stdout)["pendingRewind"]
    assert pending == (ends == "after")
    if not pending:
        assert state(cli.ws) == changed  # nothing was touched before the intent file existed
    resumed = cli.run("go on", AGAIN, "--resume", sid)  # opening the session finishes the rewind
    assert resumed.returncode == 0, resumed.stderr
    assert state(cli.ws) == (before if ends == "after" else changed)
    rewinds = [r for r in cli.records(sid) if r["kind"] == "rewind"]
    assert len(rewinds) == (1 if ends == "after" else 0)
    if ends == "after":
        assert "finished" in resumed.stderr and "[User · abandoned] change everything" in cli(
            "sessions", "show", sid).stdout  # fmt: skip
    again = cli("sessions", "rewind", sid, "--to", "1", "--files-only")  # and it still rewinds
    assert again.returncode == 0, again.stderr
    assert state(cli.ws) == before


CHECKPOINT_KILLS = [
    "checkpoint.pack_written=kill@1",  # the prompt's checkpoint, objects not yet durable
    "checkpoint.before_record=kill@1",  # the prompt's checkpoint walked, not recorded
    "checkpoint.pack_written=kill@2",  # the first run_command's checkpoint
    "checkpoint.before_record=kill@2",
    "store.append.mid=kill-mid-write@1",  # the prompt checkpoint's record torn
]


@pytest.mark.parametrize("failpoint", CHECKPOINT_KILLS)
def test_kill_during_a_checkpoint(cli: Cli, failpoint: str) -> None:
    """Acceptance: a kill while a checkpoint is taken never changes the workspace, and the session resumes
    and can still be rewound to its first prompt byte for byte."""
    before = state(cli.ws)
    assert cli.run("first", {"answers": [{"reply": [{"text": "ok"}]}]}).returncode == 0
    sid = cli.session()
    assert state(cli.ws) == before
    killed = cli.run("change everything", TURN, "--resume", sid, failpoints=failpoint)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = cli.run("go on", AGAIN, "--resume", sid)
    assert resumed.returncode == 0, resumed.stderr
    done = cli("sessions", "rewind", sid, "--to", "1", "--files-only")
    assert done.returncode == 0, done.stderr
    assert state(cli.ws) == before
    packs = cli.tmp / "data" / "sessions" / sid / "checkpoints" / "packs"
    assert not [p for p in os.listdir(packs) if not p.endswith(".pack")]  # a dead walk's temp pack is gone
