"""Shared helpers of the reliability tier: real `agentd run` subprocesses against the Messages-API emulator.

- `canary`: a fresh fake API key per test (`sk-ant-emu-<32 hex>`, TESTING.md §4.6).
- `agentd`: an `Agentd` bound to the test's workspace, data dir, config dir, the `emulator` fixture (which
  checks the emulator at teardown) and the canary. `start()` spawns `python -m agentd run ...` with
  umask 022 in a new session; `run()` waits for it; `cli()` runs any other `agentd` command. Every process
  has a deadline and is killed at teardown.
- Log readers: `log_records`, `messages_of`, `strip_cc`, and `group_members` for process-group checks.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator

RUN_TIMEOUT_S = 30.0  # an `agentd run` against the emulator takes about 2 s; this only bounds a hang
WAIT_S = 15.0  # waits for something a running process is about to do
_TICK = threading.Event()  # never set: its wait() is the poll interval of `wait_file`
SESSION_LINE = re.compile(r"^\[session (sess_[0-9a-z]+)\]$", re.M)


class Proc:
    """One agentd subprocess with its stdout and stderr collected by reader threads."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.argv = argv
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            umask=0o022,
            start_new_session=True,  # no controlling terminal: approvals are denied, signals are ours
        )
        self.pid = self.popen.pid
        self._out = bytearray()
        self._err = bytearray()
        self._cond = threading.Condition()
        self._threads = [
            threading.Thread(target=self._pump, args=(self.popen.stdout, self._out), daemon=True),
            threading.Thread(target=self._pump, args=(self.popen.stderr, self._err), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _pump(self, stream: Any, buf: bytearray) -> None:
        while chunk := stream.read1(65536):
            with self._cond:
                buf += chunk
                self._cond.notify_all()

    @property
    def stdout(self) -> str:
        with self._cond:
            return self._out.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        with self._cond:
            return self._err.decode("utf-8", "replace")

    @property
    def output_bytes(self) -> bytes:
        with self._cond:
            return bytes(self._out) + bytes(self._err)

    def wait_output(self, pred: Callable[[str, str], bool], what: str, timeout: float = WAIT_S) -> None:
        """Wait until `pred(stdout, stderr)` holds; fail naming `what` (and showing stderr) otherwise."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self._out.decode("utf-8", "replace"), self._err.decode("utf-8", "replace")):
                left = deadline - time.monotonic()
                if left <= 0 or (
                    self.popen.poll() is not None and not any(t.is_alive() for t in self._threads)
                ):
                    pytest.fail(
                        f"timed out waiting for {what}; rc={self.popen.poll()} stderr:\n"
                        + self._err.decode("utf-8", "replace")
                    )
                self._cond.wait(min(left, 0.05))

    def session_id(self) -> str:
        """The id printed on stderr as `[session <id>]` (waits for it)."""
        self.wait_output(lambda _o, e: SESSION_LINE.search(e) is not None, "the [session ID] line")
        m = SESSION_LINE.search(self.stderr)
        assert m is not None
        return m.group(1)

    def wait(self, timeout: float = RUN_TIMEOUT_S) -> int:
        """Wait for the exit (killing the process on timeout) and for its output to be read; the code."""
        try:
            rc = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"agentd did not exit within {timeout} s: {self.argv}\nstderr:\n{self.stderr}")
        for t in self._threads:
            t.join(timeout=WAIT_S)
        return rc

    def sigkill(self) -> int:
        """SIGKILL (a real `kill -9`) and reap; returns the exit code (-9)."""
        os.kill(self.pid, signal.SIGKILL)
        return self.wait(WAIT_S)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=WAIT_S)


@dataclass
class Agentd:
    """Runs agentd as a real subprocess on one workspace and data dir against one emulator."""

    tmp: Path
    emu: Emulator
    key: str

    def __post_init__(self) -> None:
        self.ws = self.tmp / "ws"
        self.ws.mkdir()
        self.data = self.tmp / "data"  # created by agentd itself (so its modes are agentd's)
        self.config_dir = self.tmp / "config"
        self.config_dir.mkdir()
        self.procs: list[Proc] = []
        self.env_extra: dict[str, str] = {}  # more variables for every process this runner starts

    def env(self, failpoints: str | None = None) -> dict[str, str]:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": self.emu.url,
            "ANTHROPIC_API_KEY": self.key,
            "AGENTD_DATA_DIR": str(self.data),
            "AGENTD_CONFIG_DIR": str(self.config_dir),
            **self.env_extra,
        }
        env.pop("AGENTD_FAILPOINTS", None)
        if failpoints:
            env["AGENTD_FAILPOINTS"] = failpoints
        return env

    def start(
        self,
        prompt: str,
        *,
        resume: str | None = None,
        args: tuple[str, ...] = (),
        pre: tuple[str, ...] = (),
        failpoints: str | None = None,
    ) -> Proc:
        """Spawn `agentd [pre] run --workspace WS --prompt PROMPT --provider anthropic [--resume ID] [args]`."""
        argv = [sys.executable, "-m", "agentd", *pre, "run", "--workspace", str(self.ws), "--prompt", prompt]
        argv += ["--provider", "anthropic", *(["--resume", resume] if resume else []), *args]
        proc = Proc(argv, self.env(failpoints), self.tmp)
        self.procs.append(proc)
        return proc

    def run(self, prompt: str, **kw: Any) -> Proc:
        """`start()` and wait for the exit."""
        proc = self.start(prompt, **kw)
        proc.wait()
        return proc

    def cli(self, *args: str) -> Proc:
        """Run `agentd ARGS...` (e.g. `sessions show ID`) to completion."""
        proc = Proc([sys.executable, "-m", "agentd", *args], self.env(), self.tmp)
        self.procs.append(proc)
        proc.wait()
        return proc

    def session_dir(self, sid: str) -> Path:
        return self.data / "sessions" / sid

    def log_bytes(self, sid: str) -> bytes:
        return (self.session_dir(sid) / "log.jsonl").read_bytes()

    def records(self, sid: str) -> list[dict[str, Any]]:
        return log_records(self.session_dir(sid) / "log.jsonl")

    def kill_all(self) -> None:
        for proc in self.procs:
            proc.kill()


@pytest.fixture
def canary() -> str:
    """A fake Anthropic key unique to the test: `sk-ant-emu-` + 32 hex digits."""
    return "sk-ant-emu-" + secrets.token_hex(16)


@pytest.fixture
def agentd(tmp_path: Path, emulator: Emulator, canary: str) -> Iterator[Agentd]:
    runner = Agentd(tmp_path, emulator, canary)
    try:
        yield runner
    finally:
        runner.kill_all()


def log_records(path: Path) -> list[dict[str, Any]]:
    """Every line of a complete log, decoded (each line must parse)."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def messages_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API messages of the `message` records, in log order (one record per tool_result)."""
    return [r["message"] for r in records if r["kind"] == "message"]


def strip_cc(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without `cache_control` on their blocks (breakpoints move between requests)."""
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
        for m in messages
    ]


def user(*blocks: dict[str, Any] | str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks],
    }


def assistant(*blocks: dict[str, Any] | str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks],
    }


def tool_use_block(tid: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def result_block(tid: str, content: str, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tid, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def accepted(entry: dict[str, Any]) -> tuple[int | None, str | None]:
    """(status, validation_error) of a journal entry: `(200, None)` when the emulator accepted it."""
    return entry["status"], entry["validation_error"]


def warnings_of(stderr: str) -> list[str]:
    """The texts of the logged WARNING lines on stderr, with a lock holder's `since` replaced by `<ts>`."""
    texts = [ln.split(": ", 1)[1] for ln in stderr.splitlines() if re.match(r"^\S+ \S+ WARNING ", ln)]
    return [re.sub(r"\(since [^)]*\)", "(since <ts>)", t) for t in texts]


def takeover(sid: str, pid: int) -> str:
    """The warning of a `--resume` that takes over the lock record of a killed holder."""
    return (
        f"session {sid}: taking over the lock left by pid {pid} on {socket.gethostname()} (since <ts>); "
        "that process is gone"
    )


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`, from /proc."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(name))
    return out


def wait_file(path: Path, what: str, timeout: float = WAIT_S) -> str:
    """Poll (with a deadline) until `path` holds a complete line; return its text."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
        except FileNotFoundError:
            text = ""
        if text.endswith("\n"):
            return text
        _TICK.wait(0.01)  # a readiness poll with a deadline, not synchronisation by sleeping
    pytest.fail(f"timed out waiting for {what} ({path})")
