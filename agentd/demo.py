"""`agentd demo` (PROTOCOL.md §3.1): one real agentd turn, offline, shown step by step (H14).

Owns: the demo's flow and texts. A copy of the example workspace goes to a temporary folder; the bundled
Messages-API emulator (`python -m agentd.testing.emulator`, a child process on 127.0.0.1, so no agentd
module imports agentd.testing) replays `demo-scenario.json` and reports token and prompt-cache usage as the
API does; agentd talks to it through its real Anthropic provider, loop, tools, permissions and session
store. The session is stored in the usual data dir, so `agentd sessions show ID` finds it and
`agentd run --resume ID` carries it on with a real model.
"""

from __future__ import annotations

import asyncio
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from agentd.errors import AgentdError
from agentd.log import console

PROMPT = "Add a --shout flag to greet.py, test it, and keep a TODO list."
MODEL = "agentd-demo-emulated"  # not a real model's name: the transcript must not claim Claude answered
WHO = "agentd demo"
START_TIMEOUT_S = 30.0

BANNER = """\
agentd demo: one real agentd turn on a copy of an example project, offline.
The model is SCRIPTED: agentd's bundled emulator of the Anthropic Messages API replays a fixed list of
replies over 127.0.0.1 (no network, no API key) and reports token counts and prompt-cache use the way the
API does (its own token counts, not Claude's). Everything else is agentd's own: the loop, the tools, the
permission gate, the TODO plan, the session store. Approvals are answered "once" by the demo itself, and
shown as auto-answered.
"""


class DemoError(AgentdError):
    """The demo could not start its emulator (exit 1)."""

    exit_code = 1


def run_demo(data_dir_flag: str | None) -> int:
    """Run the demo; returns the exit code of its turn (PROTOCOL.md §3.1). `data_dir_flag`: `--data-dir`."""
    from agentd.config import load_settings
    from agentd.persistence.paths import open_data_dir
    from agentd.terminal import AutoApprover, TurnSetup, cache_summary, run_terminal_turn

    dd = open_data_dir(data_dir_flag)
    for var in ("NO_PROXY", "no_proxy"):  # the emulator is on loopback: never through an HTTP proxy
        os.environ[var] = ",".join(filter(None, ["127.0.0.1", os.environ.get(var)]))
    tmp = Path(tempfile.mkdtemp(prefix="agentd-demo-"))
    workspace, scenario = _copy_assets(tmp)
    with _Emulator(scenario) as url:
        settings = load_settings(None, cli={"provider": "anthropic", "model": MODEL, "base_url": url})
        console.line(BANNER)
        console.line(f"[workspace {workspace}]")
        console.line(f"[prompt] {PROMPT}")
        setup = TurnSetup(
            prompt=PROMPT,
            workspace=workspace,
            settings=settings,
            data_dir=dd,
            approver=AutoApprover(WHO),
            provider_env={"ANTHROPIC_API_KEY": "demo-key-for-the-local-emulator"},
        )
        outcome = asyncio.run(run_terminal_turn(setup))
    console.line(cache_summary(outcome.totals) + " (emulated token counts)")
    console.line(_finished(outcome.session_id, dd.root, data_dir_flag, tmp))
    return outcome.code


def _finished(sid: str | None, root: Path, data_dir_flag: str | None, tmp: Path) -> str:
    """The closing lines: where the session is and the commands to see, continue and remove it. The session
    works in the edited copy, so continuing needs the copy and the clean-up removes both (new-user nit: it
    said to delete the copy, after which `--resume` was refused)."""
    if sid is None:  # the turn ended before its session was stored
        return f"[demo finished · no session was stored · delete {tmp} when done]"
    me = _program()
    where = f" --data-dir {shlex.quote(str(root))}" if data_dir_flag else ""
    copy = tmp / "workspace"
    return "\n".join([
        f"[demo finished · session {sid} is stored in {root}]",
        f"  see it:          {me} sessions show {sid}{where}",
        f"  continue it:     {me} run --resume {sid}{where} --prompt '...'   (it works in the edited copy, "
        "with your configured model and its API key)",
        f"  the edited copy: {copy}",
        f"  when done:       {me} sessions rm {sid}{where} && rm -rf {shlex.quote(str(tmp))}   (the session "
        "and its copy go together)",
    ])  # fmt: skip


def _program() -> str:
    """How to call agentd in a hint: `agentd` when that name on PATH is this program, else the path it was
    started by (`.venv/bin/agentd`, as the README runs it)."""
    started = sys.argv[0] if sys.argv else ""
    if Path(started).name != "agentd":
        return "agentd"  # `python -m agentd`: the installed command's name
    on_path = shutil.which("agentd")
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(started):
        return "agentd"
    return shlex.quote(started)


def _copy_assets(tmp: Path) -> tuple[Path, Path]:
    base = resources.files("agentd") / "examples"
    workspace = tmp / "workspace"
    with resources.as_file(base / "demo-workspace") as src:
        shutil.copytree(src, workspace)
    scenario = tmp / "scenario.json"
    with resources.as_file(base / "demo-scenario.json") as src:
        shutil.copyfile(src, scenario)
    return workspace, scenario


class _Emulator:
    """The emulator as a child process: `with _Emulator(scenario) as url:`; stopped (and reaped) on exit."""

    def __init__(self, scenario: Path) -> None:
        self.scenario = scenario
        self.errors = scenario.with_name("emulator.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        cmd = [sys.executable, "-m", "agentd.testing.emulator", "--api", "anthropic", "--port", "0"]
        with self.errors.open("wb") as errors:
            self.proc = subprocess.Popen(
                [*cmd, "--scenario", str(self.scenario)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        try:
            return self._url()
        except BaseException:
            self.__exit__()
            raise

    def _url(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.proc.stdout.fileno(), 256) if ready else b""
            if ready and not chunk:
                break
            line += chunk
        url = line.decode("utf-8", "replace").strip()
        if not url.startswith("http://127.0.0.1:"):
            raise DemoError(
                f"the demo's model emulator did not start (no URL printed; see {self.errors}); please report it"
            )
        return url

    def __exit__(self, *exc: object) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
