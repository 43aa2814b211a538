"""Renders the terminal client's screenshots for docs/terminal.md and the README (run from the repository root):

    .venv/bin/python -m tests.terminal.screenshots [--out docs/images]

The real client runs on a pseudo-terminal (100 x 30) against the Messages-API emulator playing a short
scenario, exactly as the terminal tier drives it (tests/terminal/screen.py: pexpect + the pyte terminal
emulator). At three moments the emulator's screen, colours included, is saved as plain text (.txt) and drawn
as a PNG cell by cell with Pillow and DejaVu Sans Mono: the diff approval (`terminal-approval`), the end of
the turn with the plan and the status line (`terminal-chat`), and the session resumed in a new terminal
(`terminal-resume`). Pillow is not a test dependency: `pip install Pillow` first (without it only the
.txt files are written).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.terminal.screen import Terminal

ROOT = Path(__file__).resolve().parents[2]
COLS, ROWS = 100, 30
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono{}.ttf"
BG, FG = (0x14, 0x16, 0x1B), (0xE0, 0xE2, 0xEA)
NAMED = {"black": "000000", "red": "cd3131", "green": "0dbc79", "brown": "e5e510", "yellow": "e5e510",
         "blue": "2472c8", "magenta": "bc3fbc", "cyan": "11a8cd", "white": "e5e5e5", "brightblack": "666666",
         "brightred": "f14c4c", "brightgreen": "23d18b", "brightyellow": "f5f543", "brightblue": "3b8eea",
         "brightmagenta": "d670d6", "brightcyan": "29b8db", "brightwhite": "ffffff"}  # fmt: skip
MARKER = ".agentd-screenshot"
PLAN_1 = [{"content": "Read CHANGELOG.md", "status": "in_progress"},
          {"content": "Add the entry under Unreleased", "status": "pending"},
          {"content": "Run the parser tests", "status": "pending"}]  # fmt: skip
PLAN_2 = [{"content": "Read CHANGELOG.md", "status": "done"},
          {"content": "Add the entry under Unreleased", "status": "in_progress"},
          {"content": "Run the parser tests", "status": "pending"}]  # fmt: skip
PLAN_3 = [{**PLAN_2[0]}, {"content": "Add the entry under Unreleased", "status": "done"},
          {"content": "Run the parser tests", "status": "in_progress"}]  # fmt: skip
EDIT = {"path": "CHANGELOG.md", "old_string": "## 0.3.0",
        "new_string": "## Unreleased\n- Fix the parser crash on empty input.\n\n## 0.3.0"}  # fmt: skip
SCENARIO = {"answers": [
    {"reply": [{"text": "I'll plan this first."}, {"tool_use": {"name": "todo_write", "input": {"todos": PLAN_1}}}]},
    {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "CHANGELOG.md"}}}]},
    {"reply": [{"text": "The entry goes under a new **Unreleased** heading."},
               {"tool_use": {"name": "todo_write", "input": {"todos": PLAN_2}}}]},
    {"reply": [{"tool_use": {"name": "edit_file", "input": EDIT}}]},
    {"reply": [{"tool_use": {"name": "todo_write", "input": {"todos": PLAN_3}}}]},
    {"reply": [{"text": "Added under `## Unreleased`:\n\n- Fix the parser crash on empty input.\n\n"
                        "Next I'll run the parser tests."}], "stop_reason": "end_turn"},
    {"reply": [{"text": "Yes: the entry is the first line under `## Unreleased` in CHANGELOG.md."}],
     "stop_reason": "end_turn"},
]}  # fmt: skip


def _rgb(colour: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
    if colour == "default":
        return default
    hexa = NAMED.get(colour, colour)
    try:
        return (int(hexa[0:2], 16), int(hexa[2:4], 16), int(hexa[4:6], 16))
    except ValueError:
        return default


def save_png(t: Terminal, path: Path) -> bool:
    """Draw the emulator's screen (characters, colours, bold, reverse) into `path`; False without Pillow."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        return False
    regular, bold = ImageFont.truetype(FONT.format(""), 15), ImageFont.truetype(FONT.format("-Bold"), 15)
    cw, ch, pad = 9, 19, 14
    img = Image.new("RGB", (COLS * cw + 2 * pad, ROWS * ch + 2 * pad), BG)
    draw = ImageDraw.Draw(img)
    buffer: Any = t.scr.buffer
    for y in range(ROWS):
        for x in range(COLS):
            c = buffer[y][x]
            fg, bg = _rgb(c.fg, FG), _rgb(c.bg, BG)
            if c.reverse:
                fg, bg = bg, fg
            left, top = pad + x * cw, pad + y * ch
            if bg != BG:
                draw.rectangle([left, top, left + cw - 1, top + ch - 1], fill=bg)
            if c.data.strip():
                draw.text((left, top + 1), c.data, font=bold if c.bold else regular, fill=fg)
            if c.underscore:
                draw.line([left, top + ch - 3, left + cw - 1, top + ch - 3], fill=fg)
    img.save(path)
    return True


def save(t: Terminal, out: Path, name: str) -> None:
    t.settle(0.5)
    (out / f"{name}.txt").write_text(t.screen().rstrip("\n") + "\n", encoding="utf-8")
    drawn = save_png(t, out / f"{name}.png")
    sys.stdout.write(
        f"wrote {out / name}.txt" + (" and .png\n" if drawn else " (no PNG: pip install Pillow)\n")
    )


def workspace(tmp: Path) -> Path:
    """/tmp/shop when it is free or ours (the screens show a short path), else a folder in `tmp`."""
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
    with tempfile.TemporaryDirectory() as tmp, Emulator(api="anthropic", scenario=SCENARIO) as emu:
        ws = workspace(Path(tmp))
        try:
            (ws / "src").mkdir(parents=True, exist_ok=True)
            (ws / "CHANGELOG.md").write_text("# Changelog\n\n## 0.3.0\n- First release.\n")
            (ws / "src" / "parser.py").write_text("def parse(src):\n    if not src:\n        return []\n")
            home = Path(tmp) / "home"
            env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENTD_"))},
                   "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "AGENTD_DATA_DIR": str(Path(tmp) / "data"),
                   "ANTHROPIC_BASE_URL": emu.url, "ANTHROPIC_API_KEY": "sk-ant-emu-screenshot",
                   "TERM": "xterm-256color", "COLORTERM": "truecolor", "PYTHONPATH": str(ROOT)}  # fmt: skip
            agentd = [sys.executable, "-m", "agentd"]
            t = Terminal([*agentd, "--new"], env, str(ws), cols=COLS, rows=ROWS)
            try:
                t.wait_for("❯")
                t.line("Add a CHANGELOG entry for the parser fix.")
                t.wait_for("Allow Edit CHANGELOG.md?")
                save(t, out, "terminal-approval")
                t.type("y")
                t.wait_for("Next I'll run the parser tests.")
                save(t, out, "terminal-chat")
                t.key("ctrl-d")
                t.exit_code()
            finally:
                t.close()
            sid = next(p.name for p in (Path(tmp) / "data" / "sessions").iterdir())
            t = Terminal([*agentd, "--resume", sid], env, str(ws), cols=COLS, rows=ROWS)
            try:
                t.wait_for("❯")
                t.line("Is the entry in place?")
                t.wait_for("first line under")
                save(t, out, "terminal-resume")
                t.line("/quit")
                t.exit_code()
            finally:
                t.close()
        finally:
            if (ws / MARKER).exists():
                shutil.rmtree(ws)


if __name__ == "__main__":
    main()
