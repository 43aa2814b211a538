"""What the terminal client prints (docs/terminal.md): the transcript and, during a turn, the live region.

Owns `View`, the session-update sink of the client (PROTOCOL.md §7): the assistant's text streamed as
Markdown (each finished block printed once, the unfinished one shown live), one line per tool call with its
result (a failure with its reason, `agentd.log.failure_reason`), the plan as a checklist when it changes,
retries (`overloaded · retrying in 4 s`), mode and title changes; and the live region of a turn (the
unfinished text, the running tool calls, a spinner and the status line of `status.status_text`).
Every text that came from the model or a tool passes through `agentd.text.visible` before it is shown: the
streamed text, a title, a command, a reason, a command's output (H20). Imports rich; never prompt_toolkit, pygls, lsprotocol or acp.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text

from agentd.adapters.tui.results import output_lines, output_tail, result_summary, result_text
from agentd.log import failure_reason
from agentd.text import visible

MARKS = {"completed": "[x]", "done": "[x]", "in_progress": "[~]", "pending": "[ ]"}
MARK_STYLES = {"completed": "green", "done": "green", "in_progress": "yellow", "pending": "dim"}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
OUTPUT_LINES = 4  # a command's last output lines shown under its tool line
# the core's lines the client shows otherwise (status line, tool lines, /rewind's report)
HIDDEN_LINES = ("[turn ·", "[Tool] ", "[rewind ")
# lines the client shows another way: an allowed call (its tool line), the user's own answer (the approval
# line), the core's in-process hooks (the plan reminder); a user hook's line (`-> allow`, `-> deny`) stays
_SHOWN_OTHERWISE = re.compile(
    r"^\[Permission\] .* -> (allow \(|deny \(user\))|^\[Hook\] (before_model|before_tool|after_tool|on_turn_end) \S+: "
)


def stable_end(text: str, start: int = 0) -> int:
    """The offset in `text` (from `start`) up to which the Markdown blocks are finished: the end of the last
    blank line outside a code fence. A block ends at a blank line; a fenced block at its closing fence."""
    end = start
    fence: str | None = None
    pos = start
    for line in text[start:].splitlines(keepends=True):
        pos += len(line)
        if not line.endswith("\n"):
            break  # the last line is still being written
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
        elif fence is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
            end = pos
        elif fence is None and not line.strip():
            end = pos
    return end


def markdown(text: str) -> Markdown:
    return Markdown(text, code_theme="monokai", hyperlinks=False)


class Block:
    """Markdown source rendered without the blank lines rich puts around some blocks (a list starts with
    one), so finished blocks are separated by exactly one blank line; `height`: keep only the last lines
    (the unfinished block in the live region must fit the screen). The source is the model's: escape
    sequences, other control characters and bidi controls are shown escaped (`visible`, H20), never sent to
    the terminal (rich keeps ESC in text)."""

    def __init__(self, text: str, height: int | None = None) -> None:
        self.text = visible(text)
        self.height = height

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(markdown(self.text), options, pad=False)
        blank = [not "".join(seg.text for seg in line).strip() for line in lines]
        first = blank.index(False) if False in blank else len(lines)
        last = len(lines) - blank[::-1].index(False) if False in blank else first
        kept = lines[first:last]
        for line in kept[-self.height :] if self.height else kept:
            yield from line
            yield Segment.line()


@dataclass
class _Call:
    title: str
    kind: str
    status: str
    started: float


class View:
    """The transcript and the live region. `status(width)` gives the status line's text (status.status_text).

    Calls come from the event loop's thread only; the live region is redrawn by `tick()` (the client's
    ticker, about ten times a second) and whenever something is printed above it."""

    def __init__(self, console: Console, status: Callable[[int | None], str]) -> None:
        self.console = console
        self.status = status
        self.usage: dict[str, Any] | None = None  # the last usage_update
        self.title: str | None = None
        self.mode: str | None = None
        self._text = ""  # the assistant message being streamed (Markdown source)
        self._printed = 0  # how much of it is printed
        self._thought = ""
        self._message_id: str | None = None
        self._user_id: str | None = None  # the replayed prompt whose blocks are being shown
        self._prompts = 0  # replayed prompts shown
        self._calls: dict[str, _Call] = {}
        self._plan: list[tuple[str, str]] | None = None
        self._live: Live | None = None
        self._turn_started = 0.0
        self.activity = "working"
        self.version = 0  # counts the updates seen (the status line is computed again after one)
        self._blank = True  # the last line printed is blank

    # ---- the transcript ------------------------------------------------------------------------------
    def print(self, renderable: RenderableType = "", **kw: Any) -> None:
        self.console.print(renderable, **kw)
        self._blank = isinstance(renderable, str) and renderable == ""

    def reset_usage(self) -> None:
        """Forget the last usage_update (the context changed without a request: a rewind)."""
        self.usage = None
        self.version += 1

    def gap(self) -> None:
        """One blank line, unless the last line printed is one (between a turn, a command's output or a
        replayed prompt and what follows)."""
        self.flush()
        if not self._blank:
            self.print()

    def reset(self) -> None:
        """Forget what was shown of the session held before (its plan, calls, usage): another one opens."""
        self._discard()
        self._calls.clear()
        self._plan = None
        self._user_id, self._prompts = None, 0
        self.usage, self.title, self.mode = None, None, None

    def note(self, text: str, style: str = "dim") -> None:
        """An operator line (`[Permission] …`, `[Hook] …`, warnings), shown escaped."""
        self.flush()
        self.print(Text(visible(text), style=style))

    def core_line(self, text: str) -> None:
        """The core's line writer: the lines the client does not show another way."""
        if not text.startswith(HIDDEN_LINES) and not _SHOWN_OTHERWISE.match(text):
            self.note(text)

    def error(self, text: str) -> None:
        self.note(text, style="bold red")

    def user(self, text: str) -> None:
        """A prompt of the session's history (a replay)."""
        self.flush()
        lines = visible(text.rstrip("\n")).split("\n")
        self.print(Text("\n".join(["> " + lines[0], *("  " + x for x in lines[1:])]), style="bold cyan"))

    # ---- updates (PROTOCOL.md §7) -------------------------------------------------------------------
    def update(self, u: dict[str, Any]) -> None:
        """The session's update sink."""
        self.version += 1
        kind = u.get("sessionUpdate")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(u)

    def _on_agent_message_chunk(self, u: dict[str, Any]) -> None:
        meta = (u.get("_meta") or {}).get("agentd") or {}
        if meta.get("retracts"):
            self._discard()
            self.note("[retry · the partial reply above was discarded]")
        elif u.get("messageId") != self._message_id:
            self.flush()
        self._message_id = u.get("messageId")
        self._text += str((u.get("content") or {}).get("text") or "")
        end = stable_end(self._text, self._printed)
        if end > self._printed:
            self._print_markdown(self._text[self._printed : end])
            self._printed = end

    def _on_agent_thought_chunk(self, u: dict[str, Any]) -> None:
        self._thought += str((u.get("content") or {}).get("text") or "")

    def _on_user_message_chunk(self, u: dict[str, Any]) -> None:
        """A replayed prompt block: the first of a prompt is what was typed; the others were attached (a
        file, a selection), shown by their first line."""
        content = u.get("content") or {}
        text = str(content.get("text") or f"[{content.get('type', 'content')}]")
        if u.get("messageId") is not None and u.get("messageId") == self._user_id:
            self.print(Text("  + " + visible(text.split("\n", 1)[0], one_line=True), style="cyan"))
            return
        if self._prompts:
            self.gap()  # a blank line between two replayed turns
        self._user_id = u.get("messageId")
        self._prompts += 1
        self.user(text)

    def _on_tool_call(self, u: dict[str, Any]) -> None:
        self.flush()
        call = _Call(visible(str(u.get("title") or ""), one_line=True), str(u.get("kind") or "other"),
                     str(u.get("status") or "pending"), time.monotonic())  # fmt: skip
        if call.status in ("completed", "failed"):  # a replayed call: its final state at once
            self._tool_line(call, u)
        else:
            self._calls[str(u.get("toolCallId"))] = call

    def _on_tool_call_update(self, u: dict[str, Any]) -> None:
        call = self._calls.get(str(u.get("toolCallId")))
        if call is None:
            return
        if u.get("title"):
            call.title = visible(str(u["title"]), one_line=True)
        call.status = str(u.get("status") or call.status)
        if call.status in ("completed", "failed"):
            del self._calls[str(u.get("toolCallId"))]
            self._tool_line(call, u)

    def _on_plan(self, u: dict[str, Any]) -> None:
        entries = [(str(e.get("status", "")), str(e.get("content", ""))) for e in u.get("entries") or []]
        if entries == self._plan:
            return
        self._plan = entries
        self.show_plan(entries)

    def _on_usage_update(self, u: dict[str, Any]) -> None:
        self.usage = u

    def _on_session_info_update(self, u: dict[str, Any]) -> None:
        self.title = u.get("title") or self.title

    def _on_current_mode_update(self, u: dict[str, Any]) -> None:
        if self.mode is not None and u.get("currentModeId") != self.mode:
            self.note(f"[mode · {u.get('currentModeId')}]")
        self.mode = u.get("currentModeId")

    def _on_retry(self, u: dict[str, Any]) -> None:
        reason = visible(str(u.get("message") or "the request failed"), one_line=True)
        self.note(f"[{reason} · retrying in {float(u.get('delayS') or 0):g} s · attempt {u.get('attempt')}]",
                  style="yellow")  # fmt: skip

    # ---- pieces ------------------------------------------------------------------------------------
    def show_plan(self, entries: list[tuple[str, str]], title: str = "Plan") -> None:
        self.flush()
        out = Text()
        out.append(title + "\n", style="bold")
        for status, content in entries:
            out.append(f"  {MARKS.get(status, '[ ]')} ", style=MARK_STYLES.get(status, ""))
            out.append(
                visible(content, one_line=True) + "\n", style="strike dim" if status == "completed" else ""
            )
        self.print(out, end="")

    def _tool_line(self, call: _Call, u: dict[str, Any]) -> None:
        """`● title · exit 0 · 3 lines of output` (a failure: `· failed: reason`), then a command's last
        output lines, dimmed and cut to the width."""
        line = Text()
        output = output_lines(u)
        if call.status == "completed":
            line.append("● ", style="green")
            line.append(call.title)
            summary = result_summary(u.get("rawOutput"), output)
            if summary:
                line.append(" · " + summary, style="dim")
        else:
            line.append("● ", style="red")
            line.append(call.title)
            line.append(" · failed: ", style="red")
            line.append(self._reason(u), style="red")
        self.print(line)
        hidden, tail = output_tail(output, OUTPUT_LINES)
        raw = u.get("rawOutput")
        if (
            hidden and isinstance(raw, dict) and raw.get("truncated")
        ):  # the count would be of what was kept, not of the output
            self.print(Text("  │ … (earlier output)", style="dim"))
        elif hidden:
            self.print(Text(f"  │ … {hidden} more line{'s' if hidden != 1 else ''}", style="dim"))
        for row in tail:
            self.print(
                Text("  │ " + visible(row, one_line=True), style="dim", no_wrap=True, overflow="ellipsis")
            )

    @staticmethod
    def _reason(u: dict[str, Any]) -> str:
        meta = (u.get("_meta") or {}).get("agentd") or {}
        if meta.get("cancelled"):
            return "cancelled"
        raw = u.get("rawOutput") if isinstance(u.get("rawOutput"), dict) else None
        return visible(failure_reason(result_text(u), raw), one_line=True)

    def _print_markdown(self, src: str) -> None:
        if src.strip():
            if self._printed:  # the blank line between two blocks of one message
                self.print()
            self.print(Block(src))

    def flush(self) -> None:
        """End the message being streamed: print what is left of it (and a thought, dimmed)."""
        if self._thought.strip():
            self.print(Text(visible(self._thought.strip()), style="dim italic"))
        self._thought = ""
        self._print_markdown(self._text[self._printed :])
        self._text, self._printed, self._message_id = "", 0, None

    def _discard(self) -> None:
        self._text, self._printed, self._message_id, self._thought = "", 0, None, ""

    # ---- the live region of a turn ----------------------------------------------------------------
    def begin_turn(self, activity: str = "working") -> None:
        self.activity = activity
        self._turn_started = time.monotonic()
        self._start_live()

    def end_turn(self) -> None:
        self._stop_live()
        self._turn_started = 0.0
        self.flush()
        for call in self._calls.values():  # calls that never got a final update (a cancel)
            self.print(Text(f"● {call.title} · stopped", style="dim"))
        self._calls.clear()

    def pause(self) -> None:
        """Stop drawing the live region (an approval question takes the screen)."""
        self._stop_live()

    def resume(self) -> None:
        """Draw the live region again, below what was printed meanwhile: a new region, since a restarted
        one would first move up over the height of its old drawing and erase printed lines."""
        if self._turn_started:
            self._start_live()

    def _start_live(self) -> None:
        self._live = Live(get_renderable=self._live_renderable, console=self.console, auto_refresh=False,
                          transient=True, redirect_stdout=True, redirect_stderr=True)  # fmt: skip
        self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def tick(self) -> None:
        if self._live is not None and self._live.is_started:
            self._live.refresh()

    def _live_renderable(self) -> RenderableType:
        parts: list[RenderableType] = []
        tail = self._text[self._printed :]
        if tail.strip():
            parts.append(Block(tail, max(3, self.console.size.height - 6 - len(self._calls))))
        now = time.monotonic()
        for call in self._calls.values():
            parts.append(Text(f"○ {call.title} · {call.status.replace('_', ' ')} {now - call.started:.0f} s",
                              style="dim", no_wrap=True, overflow="ellipsis"))  # fmt: skip
        elapsed = f"{self.activity} {now - self._turn_started:.0f} s · Ctrl-C cancels"
        room = self.console.width - len(elapsed) - 6  # the spinner, its space, ` · ` and a spare column
        status = self.status(room) if room >= 12 else ""
        line = f"{elapsed} · {status}" if status else elapsed
        parts.append(Spinner("dots", Text(line[: max(1, self.console.width - 3)], style="dim")))
        return Group(*parts)
