"""Harness of the VS Code UI tier (TESTING.md §1.6): code-server 4.100.3 (a real VS Code 1.100.3 workbench)
with the agentd extension installed from the built VSIX, driven by Playwright's sync API in Debian's
Chromium.

- Throwaway dirs: HOME, code-server's `--config`, `--user-data-dir` and `--extensions-dir` live under the
  test's tmp dir; nothing touches the real home.
- Inputs through the environment of the code-server process, which reaches the extension host and agentd:
  `AGENTD_CMD`, `AGENTD_DATA_DIR`, `ANTHROPIC_BASE_URL` (the emulator), `ANTHROPIC_API_KEY`, `AGENTD_E2E_LOG`.
- Readiness: `GET /` answers 200 (30 s deadline); the extension host starts when the browser connects.
- Cleanup: code-server runs in its own process group; teardown sends SIGTERM to the group, waits 10 s,
  then SIGKILLs it, and `agentd_pids_gone()` checks that every agentd the extension started is gone.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXT_DIR = ROOT / "editor-clients" / "vscode"
VSIX = EXT_DIR / "agentd.vsix"
CODE_SERVER = EXT_DIR / "e2e" / "node_modules" / ".bin" / "code-server"
REAL_PROJECT = ROOT / ".cache" / "real-project" / "idna-3.10.tar.gz"
SCREENSHOTS = Path(os.environ.get("AGENTD_E2E_SCREENSHOTS") or ROOT / "docs" / "images")
BROWSER_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--no-proxy-server",
]
USER_SETTINGS = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "workbench.colorTheme": "Default Dark Modern",
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "extensions.ignoreRecommendations": True,
    "chat.commandCenter.enabled": False,
    "editor.minimap.enabled": False,
    "git.enabled": False,
    "files.autoSave": "off",
    "agentd.trace.server": "messages",  # the JSON-RPC trace lands in the agentd log, attached on failure
}


def require(ok: bool, what: str) -> None:
    """A missing prerequisite skips, or fails under AGENTD_TEST_STRICT=1 (TESTING.md §1.1)."""
    if ok:
        return
    msg = f"{what}; run `bash .ci/setup-vscode.sh`"
    if os.environ.get("AGENTD_TEST_STRICT") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def poll(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """A readiness poll with a deadline (TESTING.md §6 item 3): returns pred()'s first truthy value."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        pause.wait(interval)


def unpack_real_project(dest: Path) -> Path:
    """idna 3.10 from the cache of `.ci/fetch-real-project.sh` (TESTING.md §1.8), unpacked into dest."""
    require(
        REAL_PROJECT.is_file(), f"{REAL_PROJECT.relative_to(ROOT)} is missing (.ci/fetch-real-project.sh)"
    )
    with tarfile.open(REAL_PROJECT) as tar:
        tar.extractall(dest, filter="data")
    return dest / "idna-3.10"


@dataclass
class E2ELog:
    """The JSON lines the extension appends when AGENTD_E2E_LOG is set."""

    path: Path

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = [
            json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        return [e for e in out if kind is None or e["event"] == kind]

    def server_pids(self) -> list[int]:
        return [int(e["pid"]) for e in self.events("server")]

    def updates(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            e["params"]["update"]
            for e in self.events("update")
            if e["params"]["sessionId"] == session_id
            and (kind is None or e["params"]["update"].get("sessionUpdate") == kind)
        ]


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (zombies under PID 1 are harmless)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class CodeServer:
    """One code-server with throwaway dirs under `tmp`, serving `workspace`."""

    tmp: Path
    workspace: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def dirs(self) -> dict[str, Path]:
        return {n: self.tmp / n for n in ("home", "ud", "ext")}

    def _base_args(self) -> list[str]:
        d = self.dirs
        return [str(CODE_SERVER), "--config", str(self.tmp / "cs-config.yaml"), "--user-data-dir", str(d["ud"]),
                "--extensions-dir", str(d["ext"])]  # fmt: skip

    def prepare(self) -> None:
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        (self.tmp / "cs-config.yaml").write_text("auth: none\ncert: false\n", encoding="utf-8")
        user = self.dirs["ud"] / "User"
        user.mkdir(parents=True, exist_ok=True)
        (user / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=2), encoding="utf-8")
        self.env["HOME"] = str(self.dirs["home"])

    def install(self, vsix: Path = VSIX) -> None:
        t0 = time.monotonic()
        out = subprocess.run([*self._base_args(), "--install-extension", str(vsix)], env=self.env,
                             capture_output=True, text=True, timeout=120, start_new_session=True)  # fmt: skip
        self.timings["install_s"] = time.monotonic() - t0
        assert out.returncode == 0 and "was successfully installed" in out.stdout, out.stdout + out.stderr

    def start(self) -> None:
        log = (self.tmp / "code-server.log").open("wb")
        args = [*self._base_args(), "--bind-addr", f"127.0.0.1:{self.port}", "--auth", "none",
                "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
                "--disable-getting-started-override", str(self.workspace)]  # fmt: skip
        t0 = time.monotonic()
        self.proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # fmt: skip
        poll(self._ready, 30, f"code-server to answer GET / on port {self.port}")
        self.timings["start_s"] = time.monotonic() - t0

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"code-server exited: {self.log_tail()}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{self.port}/", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?folder={self.workspace}"

    def stop(self) -> None:
        """SIGTERM the process group, wait 10 s, then SIGKILL it (TESTING.md §1.6)."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def client_log(self, pattern: str = "") -> str:
        """The extension's `agentd` output channel (agentd's stderr, and the JSON-RPC trace that
        USER_SETTINGS turns on), lines matching `pattern`: the evidence when an assertion fails."""
        logs = sorted((self.dirs["ud"] / "logs").glob("*/exthost*/agentd.agentd/agentd.log"))
        text = "\n".join(p.read_text(errors="replace") for p in logs)
        return "\n".join(line for line in text.splitlines() if re.search(pattern, line))

    def log_tail(self, n: int = 40) -> str:
        p = self.tmp / "code-server.log"
        return "\n".join(p.read_text(errors="replace").splitlines()[-n:]) if p.exists() else ""


LOGIN_SHELL = """#!/bin/sh
# A login shell for the tests: like a ~/.profile, -l puts {bin} first on PATH; then it runs -c.
PATH="{bin}:$PATH"; export PATH
while [ $# -gt 0 ]; do case "$1" in -c) exec /bin/sh -c "$2";; *) shift;; esac; done
"""


def login_shell(tmp: Path) -> tuple[Path, Path]:
    """A fake login shell (for SHELL) whose start-up adds a bin dir that only it knows, holding `python`
    (the editor's own PATH has no `python`: Debian has only python3, as inside code-server)."""
    bin_dir = tmp / "login-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    shell = tmp / "login-shell"
    shell.write_text(LOGIN_SHELL.format(bin=bin_dir), encoding="utf-8")
    shell.chmod(0o755)
    return shell, bin_dir


def editor_env(tmp: Path, emulator_url: str, data_dir: Path, log: Path) -> dict[str, str]:
    """The environment of code-server, which the extension host and agentd inherit. SHELL is a fake login
    shell (`login_shell`) whose PATH the extension passes to agentd."""
    venv_bin = str(Path(sys.executable).parent)
    shell, _ = login_shell(tmp)
    env = dict(os.environ)
    env.update({
        "AGENTD_CMD": json.dumps([sys.executable, "-m", "agentd"]),
        "AGENTD_DATA_DIR": str(data_dir),
        "ANTHROPIC_BASE_URL": emulator_url,
        "ANTHROPIC_API_KEY": "sk-ant-emu-" + secrets.token_hex(16),
        "AGENTD_E2E_LOG": str(log),
        "SHELL": str(shell),
        "PATH": venv_bin + os.pathsep + env.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "XDG_CONFIG_HOME": str(tmp / "home" / ".config"),
        "XDG_DATA_HOME": str(tmp / "home" / ".local" / "share"),
        "XDG_CACHE_HOME": str(tmp / "home" / ".cache"),
        "XDG_STATE_HOME": str(tmp / "home" / ".local" / "state"),
    })  # fmt: skip
    for var in ("VSCODE_IPC_HOOK_CLI", "VSCODE_PID", "ELECTRON_RUN_AS_NODE"):
        env.pop(var, None)
    return env


@contextmanager
def browser_page(url: str, viewport: tuple[int, int] = (1360, 820)) -> Iterator[Any]:
    """A fresh Chromium profile on `url` (no browser download: Debian's chromium)."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    require(chromium is not None, "Debian's chromium is not installed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.goto(url)
            yield page
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    """Save a PNG under docs/images/ (or AGENTD_E2E_SCREENSHOTS) and return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class Workbench:
    """The VS Code workbench in the page, reached the way a user reaches it: roles and names, never CSS
    classes for what a user clicks (webviews and the editor text need frame and view locators)."""

    def __init__(self, page: Any) -> None:
        from playwright.sync_api import expect

        self.page = page
        self.expect = expect

    def wait_loaded(self, timeout: float = 30_000) -> None:
        self.expect(self.page.get_by_role("tab", name="Agent")).to_be_visible(timeout=timeout)

    def open_agent_view(self) -> None:
        self.page.get_by_role("tab", name="Agent").click()
        self.expect(self.prompt_box()).to_be_visible(timeout=20_000)

    @property
    def chat(self) -> Any:
        return self.page.frame_locator("iframe.webview").frame_locator("#active-frame")

    def prompt_box(self) -> Any:
        return self.chat.get_by_role("textbox", name="Prompt")

    def send_prompt(self, text: str) -> None:
        self.prompt_box().fill(text)
        self.chat.get_by_role("button", name="Send").click()

    def todo(self, content: str, status: str) -> Any:
        """A row of the TODO tree; its accessible name is `<content>, <pending|in progress|done>`."""
        return self.page.get_by_role("treeitem", name=f"{content}, {status}", exact=True)

    def approval(self, question: str) -> Any:
        """The pending approval in the chat panel (a region above the prompt box), by its question."""
        return self.chat.get_by_role("region", name="Approval").filter(has_text=question)

    def answer(self, question: str, button: str) -> None:
        """Click an answer of the approval asking `question` (the option's name as agentd sent it)."""
        card = self.approval(question)
        self.expect(card).to_be_visible(timeout=20_000)
        card.get_by_role("button", name=button, exact=True).click()
        self.expect(card).to_be_hidden(timeout=10_000)

    def modal_dialogs(self) -> Any:
        return self.page.get_by_role("dialog")

    def run_command(self, title: str) -> None:
        """Run a command from the command palette (F1)."""
        self.page.keyboard.press("F1")
        self.expect(self.quick_input()).to_be_visible(timeout=10_000)
        self.page.keyboard.type(title)
        option = self.page.get_by_role("option", name=re.compile(re.escape(title)))
        self.expect(option.first).to_be_visible(timeout=10_000)
        self.page.keyboard.press("Enter")

    def quick_open(self, file_name: str) -> None:
        self.page.keyboard.press("Control+P")
        self.expect(self.quick_input()).to_be_visible(timeout=10_000)
        self.page.keyboard.type(file_name)
        self.expect(
            self.page.get_by_role("option", name=re.compile(re.escape(file_name))).first
        ).to_be_visible(timeout=10_000)
        self.page.keyboard.press("Enter")
        self.expect(self.page.get_by_role("tab", name=re.compile("^" + re.escape(file_name)))).to_be_visible(
            timeout=10_000
        )

    def quick_input(self) -> Any:
        """The quick input (command palette, Quick Open, QuickPick): a list box under a text box."""
        return self.page.get_by_role("listbox").filter(visible=True).first

    def status_item(self, pattern: str) -> Any:
        return self.page.get_by_role("button", name=re.compile(pattern))

    def editor_text(self) -> Any:
        """The visible lines of the active text editor."""
        return self.page.locator(".editor-group-container.active .monaco-editor .view-lines").first

    def widen_sidebar(self, width: int = 520) -> None:
        """Drag the side bar's sash so screenshots show the chat comfortably."""
        sidebar = self.page.locator("#workbench\\.parts\\.sidebar")
        box = sidebar.bounding_box()
        if not box:
            return
        x, y = box["x"] + box["width"], box["y"] + box["height"] / 2
        self.page.mouse.move(x - 1, y)
        self.page.mouse.down()
        self.page.mouse.move(box["x"] + width, y, steps=5)
        self.page.mouse.up()
