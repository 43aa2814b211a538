"""Renders the Neovim plugin's screenshots for docs/neovim.md (run from the repository root):

    .venv/bin/python editor-clients/nvim/scripts/screenshot.py [--out docs/images]

A real Neovim runs in a private tmux server (140x36) with the plugin, against the Messages-API emulator
playing a short scenario; tmux `capture-pane` gives the rendered screen as text at two moments (the
approval, the end of the turn), saved as .txt and, when ImageMagick's `convert` is installed, as .png.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentd.testing.emulator import Emulator

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "editor-clients" / "nvim"
SOCKET = f"agentd-shot-{os.getpid()}"
PLAN_1 = [
    {"content": "Read CHANGELOG.md", "status": "in_progress"},
    {"content": "Add the entry under Unreleased", "status": "pending"},
    {"content": "Run the parser tests", "status": "pending"},
]
PLAN_2 = [
    {"content": "Read CHANGELOG.md", "status": "done"},
    {"content": "Add the entry under Unreleased", "status": "in_progress"},
    {"content": "Run the parser tests", "status": "pending"},
]
EDIT = {
    "path": "CHANGELOG.md",
    "old_string": "## 0.3.0",
    "new_string": "## Unreleased\n- Fix the parser crash on empty input.\n\n## 0.3.0",
}
SCENARIO = {
    "answers": [
        {"reply": [{"text": "I'll plan this first."}, {"tool_use": {"name": "todo_write", "input": {"todos": PLAN_1}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "CHANGELOG.md"}}}], "stop_reason": "tool_use"},
        {"reply": [{"text": "The entry goes under a new Unreleased heading."},
                   {"tool_use": {"name": "todo_write", "input": {"todos": PLAN_2}}}], "stop_reason": "tool_use"},
        {"reply": [{"tool_use": {"name": "edit_file", "input": EDIT}}], "stop_reason": "tool_use"},
        {"reply": [{"text": "Added \"Fix the parser crash on empty input\" under ## Unreleased. Next I'll run the "
                            "parser tests."}], "stop_reason": "end_turn"},
    ]
}  # fmt: skip
INIT = """
vim.opt.rtp:prepend(%r)
vim.cmd.runtime('plugin/agentd.lua')
vim.o.termguicolors = true
vim.o.laststatus = 2
vim.o.number = true
require('agentd').setup({ cmd = { %r, '-m', 'agentd' }, chat = { size = 0.45 } })
vim.lsp.enable('agentd')
"""


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True).stdout


def wait_for(text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", "shot")
        if text in screen:
            return screen
        time.sleep(0.1)
    raise SystemExit(f"screenshot: {text!r} did not appear within {timeout}s:\n{screen}")


def save(screen: str, out: Path, name: str, tmp: str) -> None:
    screen = screen.replace(tmp, "/home/me/src")  # only in the message area, which has no right pane
    txt = out / f"{name}.txt"
    txt.write_text(screen.rstrip("\n") + "\n", encoding="utf-8")
    if shutil.which("convert"):
        subprocess.run(  # an optional PNG; a failing or stand-in `convert` leaves the .txt only
            ["convert", "-background", "#1e1e2e", "-fill", "#cdd6f4", "-font", "DejaVu-Sans-Mono",
             "-pointsize", "14", "-border", "12", "-bordercolor", "#1e1e2e", f"text:{txt}", "-trim",
             "+repage", "-bordercolor", "#1e1e2e", "-border", "12", str(out / f"{name}.png")],
            check=False,
            capture_output=True,
        )  # fmt: skip
    print(f"wrote {txt}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs" / "images"))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    nvim = shutil.which("nvim", path=str(Path(sys.executable).parent)) or "nvim"
    with tempfile.TemporaryDirectory() as tmp, Emulator(api="anthropic", scenario=SCENARIO) as emu:
        ws = Path(tmp) / "shop"
        (ws / "src").mkdir(parents=True)
        (ws / ".git").mkdir()
        (ws / "CHANGELOG.md").write_text("# Changelog\n\n## 0.3.0\n- First release.\n")
        (ws / "src" / "parser.py").write_text("def parse(src):\n    if not src:\n        return []\n")
        init = Path(tmp) / "init.lua"
        init.write_text(INIT % (str(PLUGIN), sys.executable))
        home = Path(tmp) / "home"
        env = {
            "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_STATE_HOME": str(home / ".local/state"), "AGENTD_DATA_DIR": str(Path(tmp) / "data"),
            "ANTHROPIC_BASE_URL": emu.url, "ANTHROPIC_API_KEY": "sk-ant-emu-screenshot", "TERM": "xterm-256color",
        }  # fmt: skip
        cmd = " ".join(f"{k}={v!r}" for k, v in env.items()) + f" {nvim} -i NONE -u {init} CHANGELOG.md"
        tmux("new-session", "-d", "-s", "shot", "-x", "140", "-y", "36", "-c", str(ws), cmd)
        try:
            wait_for("CHANGELOG.md")
            tmux("send-keys", "-t", "shot", ":Agentd Add a CHANGELOG entry for the parser fix.", "Enter")
            save(wait_for("Type number and <Enter>"), out, "neovim-approval", tmp)
            tmux("send-keys", "-t", "shot", "1", "Enter")
            save(wait_for("end_turn"), out, "neovim-chat-plan", tmp)
        finally:  # quit Neovim (which stops the daemon), then the private tmux server
            subprocess.run(["tmux", "-L", SOCKET, "send-keys", "-t", "shot", "Escape", ":qa!", "Enter"])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if subprocess.run(["tmux", "-L", SOCKET, "has-session"], capture_output=True).returncode != 0:
                    break
                time.sleep(0.1)
            subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)


if __name__ == "__main__":
    main()
