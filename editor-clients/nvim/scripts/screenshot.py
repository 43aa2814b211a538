"""Renders the Neovim plugin's screenshots for docs/neovim.md (run from the repository root):

    .venv/bin/python editor-clients/nvim/scripts/screenshot.py [--out docs/images]

A real Neovim runs in a private tmux server (140x36) with the plugin, against the Messages-API emulator
playing a short scenario. tmux `capture-pane -e` gives the rendered screen, colours included, at two
moments: the diff approval window (`neovim-approval`) and the end of the turn (`neovim-chat-plan`). Each
is saved as plain text (.txt) and, when Playwright and Debian's Chromium are installed (`bash
.ci/setup-vscode.sh` installs both), as a PNG drawn from the captured colours.
"""

from __future__ import annotations

import argparse
import html
import os
import re
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
BG, FG = "#14161b", "#e0e2ea"  # Neovim 0.11's default dark Normal
MARKER = ".agentd-screenshot"  # a /tmp/shop holding this file was made by this script
PALETTE_16 = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
              "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"]  # fmt: skip


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True).stdout


def wait_for(text: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", "shot")
        if text in screen:
            return
        time.sleep(0.1)
    raise SystemExit(f"screenshot: {text!r} did not appear within {timeout}s:\n{screen}")


def xterm_256(n: int) -> str:
    if n < 16:
        return PALETTE_16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return f"#{v:02x}{v:02x}{v:02x}"


def sgr_state(params: list[int], st: dict[str, object]) -> None:
    """Apply one SGR sequence's parameters to the style `st` (fg, bg, bold, italic, underline, reverse)."""
    i = 0
    while i < len(params):
        p = params[i]
        if p == 0:
            st.clear()
        elif p in (1, 3, 4, 7):
            st[{1: "bold", 3: "italic", 4: "underline", 7: "reverse"}[p]] = True
        elif p in (22, 23, 24, 27):
            st.pop({22: "bold", 23: "italic", 24: "underline", 27: "reverse"}[p], None)
        elif 30 <= p <= 37 or 90 <= p <= 97:
            st["fg"] = PALETTE_16[p - 30 if p < 90 else p - 82]
        elif 40 <= p <= 47 or 100 <= p <= 107:
            st["bg"] = PALETTE_16[p - 40 if p < 100 else p - 92]
        elif p in (39, 49):
            st.pop("fg" if p == 39 else "bg", None)
        elif p in (38, 48) and i + 1 < len(params):
            key = "fg" if p == 38 else "bg"
            if params[i + 1] == 5 and i + 2 < len(params):
                st[key] = xterm_256(params[i + 2])
                i += 2
            elif params[i + 1] == 2 and i + 4 < len(params):
                st[key] = "#%02x%02x%02x" % tuple(params[i + 2 : i + 5])
                i += 4
        i += 1


def ansi_to_html(screen: str) -> str:
    """A `<pre>` of the captured screen with its colours (SGR: 16, 256 and 24-bit colours, bold, italic,
    underline, reverse)."""
    out: list[str] = []
    st: dict[str, object] = {}
    for part in re.split(r"(\x1b\[[0-9;:]*m)", screen):
        m = re.fullmatch(r"\x1b\[([0-9;:]*)m", part)
        if m:
            sgr_state([int(x) for x in re.split(r"[;:]", m.group(1)) if x != ""] or [0], st)
            continue
        if not part:
            continue
        fg, bg = str(st.get("fg", FG)), str(st.get("bg", BG))
        if st.get("reverse"):
            fg, bg = bg, fg
        style = f"color:{fg};background:{bg}"
        style += ";font-weight:bold" if st.get("bold") else ""
        style += ";font-style:italic" if st.get("italic") else ""
        style += ";text-decoration:underline" if st.get("underline") else ""
        out.append(f'<span style="{style}">{html.escape(part)}</span>')
    return "".join(out)


def save_png(screen: str, png: Path) -> bool:
    """Draw the coloured screen in Chromium (Playwright) and save it; False when they are not installed."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return False
    if not chromium:
        return False
    page_html = (
        f'<html><body style="margin:0;background:{BG}"><pre id="s" style="display:inline-block;margin:0;'
        f"padding:14px;font:14px/1.2 'DejaVu Sans Mono',monospace;color:{FG};background:{BG}\">"
        f"{ansi_to_html(screen)}</pre></body></html>"
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
            page.set_content(page_html)
            page.locator("#s").screenshot(path=str(png))
        finally:
            browser.close()
    return True


def save(out: Path, name: str) -> None:
    screen = tmux("capture-pane", "-e", "-p", "-t", "shot")
    plain = re.sub(r"\x1b\[[0-9;:]*m", "", screen)
    (out / f"{name}.txt").write_text("\n".join(ln.rstrip() for ln in plain.rstrip("\n").splitlines()) + "\n")
    drawn = save_png(screen.rstrip("\n"), out / f"{name}.png")
    print(f"wrote {out / name}.txt" + (" and .png" if drawn else " (no PNG: Playwright or Chromium missing)"))


def workspace(tmp: Path) -> Path:
    """The demo workspace: /tmp/shop when it is free or ours (the screens show a short path), else in tmp."""
    short = Path(tempfile.gettempdir()) / "shop"
    if short.is_dir() and (short / MARKER).exists():
        shutil.rmtree(short)
    if short.exists():
        return tmp / "shop"
    short.mkdir()
    (short / MARKER).touch()
    return short


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs" / "images"))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    nvim = shutil.which("nvim", path=str(Path(sys.executable).parent)) or "nvim"
    with tempfile.TemporaryDirectory() as tmp, Emulator(api="anthropic", scenario=SCENARIO) as emu:
        ws = workspace(Path(tmp))
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
            "COLORTERM": "truecolor",
        }  # fmt: skip
        cmd = " ".join(f"{k}={v!r}" for k, v in env.items()) + f" {nvim} -i NONE -u {init} CHANGELOG.md"
        tmux("new-session", "-d", "-s", "shot", "-x", "140", "-y", "36", "-c", str(ws), cmd)
        try:
            wait_for("CHANGELOG.md")
            tmux("send-keys", "-t", "shot", ":Agentd Add a CHANGELOG entry for the parser fix.", "Enter")
            wait_for("agentd approval")
            save(out, "neovim-approval")
            tmux("send-keys", "-t", "shot", "a")
            wait_for("end_turn")
            save(out, "neovim-chat-plan")
        finally:  # quit Neovim (which stops the daemon), then the private tmux server
            subprocess.run(["tmux", "-L", SOCKET, "send-keys", "-t", "shot", "Escape", ":qa!", "Enter"])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if subprocess.run(["tmux", "-L", SOCKET, "has-session"], capture_output=True).returncode != 0:
                    break
                time.sleep(0.1)
            subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
            if (ws / MARKER).exists():
                shutil.rmtree(ws)


if __name__ == "__main__":
    main()
