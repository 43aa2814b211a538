"""A terminal for tests: a real pseudo-terminal (pexpect) whose output is drawn by a terminal emulator
(pyte), so a test reads the screen a person would see (TESTING.md §1: the terminal tier).

Owns `Terminal`: start a command on a pty of a given size, `wait_for(text)` on the screen, `type`/`key`/`paste`, `resize`,
`screen()` (the visible rows as text), `transcript()` (the rows scrolled off plus the visible ones),
`garbage()` (escape-code debris or a traceback on screen) and `exit_code()`. The emulator answers the
cursor-position requests prompt_toolkit sends, as a real terminal does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pexpect
import pyte

KEYS = {
    "enter": "\r", "ctrl-c": "\x03", "ctrl-d": "\x04", "escape": "\x1b", "tab": "\t", "up": "\x1b[A",
    "down": "\x1b[B", "alt-enter": "\x1b\r", "backspace": "\x7f",
}  # fmt: skip
# what a screen must never show: an escape sequence drawn as text, a caret-escape, a Python traceback
GARBAGE = re.compile(r"\x1b|\^\[|\[\d+(;\d+)*[mHJK]|\[\?\d+[hl]|Traceback \(most recent call last\)|\ufffd")


class _Screen(pyte.HistoryScreen):
    """pyte's screen with scrollback, answering device-status requests through `reply`."""

    def __init__(self, cols: int, rows: int, reply: Callable[[str], None]) -> None:
        super().__init__(cols, rows, history=20000, ratio=0.5)
        self.reply = reply

    def write_process_input(self, data: str) -> None:
        self.reply(data)


class Terminal:
    """`argv` on a pty of `cols` x `rows` with `env` in `cwd` (see the module docstring)."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: str, cols: int = 110, rows: int = 40
    ) -> None:
        self.child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=cwd, dimensions=(rows, cols),
                                   encoding=None)  # fmt: skip
        self.scr = _Screen(cols, rows, lambda data: self.child.send(data.encode()))
        self.stream = pyte.ByteStream(self.scr)
        self.raw = bytearray()

    # ---- reading ------------------------------------------------------------------------------------
    def pump(self, timeout: float = 0.05) -> bool:
        """Feed what the program wrote to the emulator; False once it has exited and nothing is left."""
        try:
            data = self.child.read_nonblocking(65536, timeout=timeout)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        self.raw += data
        self.stream.feed(data)
        return True

    def screen(self) -> str:
        return "\n".join(line.rstrip() for line in self.scr.display)

    def transcript(self) -> str:
        """Every row that scrolled off, then the screen."""
        cols = self.scr.columns
        old = ["".join(row[x].data for x in range(cols)).rstrip() for row in self.scr.history.top]
        return "\n".join([*old, self.screen()])

    def wait_for(self, text: str | re.Pattern[str], timeout: float = 60.0, where: str = "screen") -> str:
        """Pump until `text` is on the screen (or in the transcript); return that text. Fails with the
        screen when it does not appear within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.transcript() if where == "transcript" else self.screen()
            found = text.search(shown) if isinstance(text, re.Pattern) else text in shown
            if found:
                return shown
            alive = self.pump()
            if time.monotonic() > deadline or (not alive and not self.child.isalive()):
                raise AssertionError(
                    f"{text!r} did not appear within {timeout} s; the screen:\n{self.screen()}"
                )

    def settle(self, quiet_s: float = 0.3, timeout: float = 10.0) -> str:
        """Pump until nothing was written for `quiet_s` seconds (the screen stopped changing)."""
        deadline = time.monotonic() + timeout
        last = len(self.raw)
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            self.pump(0.05)
            if len(self.raw) != last:
                last, quiet_since = len(self.raw), time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                break
        return self.screen()

    def garbage(self) -> list[str]:
        """Rows of the transcript showing escape-code debris or a traceback."""
        return [row for row in self.transcript().splitlines() if GARBAGE.search(row)]

    # ---- typing -------------------------------------------------------------------------------------
    def type(self, text: str) -> None:
        self.child.send(text.encode())

    def key(self, name: str) -> None:
        self.child.send(KEYS[name].encode())

    def paste(self, text: str) -> None:
        """`text` pasted, as a terminal sends it in bracketed-paste mode (its newlines do not send it)."""
        self.child.send(b"\x1b[200~" + text.encode() + b"\x1b[201~")

    def resize(self, cols: int, rows: int) -> None:
        """The window resized: the program gets SIGWINCH, the emulator's screen the new size."""
        self.scr.resize(rows, cols)
        self.child.setwinsize(rows, cols)

    def line(self, text: str) -> None:
        """Type `text` and Enter."""
        self.type(text)
        self.pump(0.1)
        self.key("enter")

    # ---- the end ------------------------------------------------------------------------------------
    def exit_code(self, timeout: float = 30.0) -> int | None:
        """Wait for the program to exit (pumping its last output); its exit status."""
        deadline = time.monotonic() + timeout
        while self.pump() and time.monotonic() < deadline:
            pass
        self.child.close()
        return self.child.exitstatus

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
