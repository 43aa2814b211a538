"""The input line of the terminal client (docs/terminal.md), on prompt_toolkit.

Owns `Entry`: one `PromptSession` for the client's life, with the history file (`prompt-history` in the data
dir, 0600, shared by every workspace), multi-line input (Enter sends; Alt-Enter, Ctrl-J or a trailing `\\`
start a new line; a paste keeps its newlines), completion of slash commands (and their arguments: session
ids, modes) and of `@path` mentions relative to the workspace, and the status line as the bottom toolbar.
`Entry.read()` returns the text, or raises KeyboardInterrupt (Ctrl-C on an empty line; on a typed one it
only clears it) or EOFError (Ctrl-D on an empty line). No prompt_toolkit application of the client handles
SIGINT itself: the client holds SIGINT for its whole life (agentd.adapters.tui.chat) and forwards one that
comes while an application reads keys with `send_interrupt()` (new-user H: Ctrl-C after an approval).
Imports prompt_toolkit; never rich, pygls, lsprotocol or acp.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app, get_app_or_none
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style

from agentd.adapters.tui.mentions import mention_at

HISTORY_FILE = "prompt-history"
STYLE = Style.from_dict({"bottom-toolbar": "noreverse #8a8a8a", "prompt": "bold #5fafff"})

# (name, help) of the slash commands; `args(name)` gives (value, meta) pairs for an argument
Commands = Callable[[], Iterable[tuple[str, str]]]
Arguments = Callable[[str], Iterable[tuple[str, str]]]


class ChatCompleter(Completer):
    """Slash commands (at the start of the input), their arguments, and `@path` mentions."""

    def __init__(self, commands: Commands, arguments: Arguments, root: Callable[[], Path]) -> None:
        self.commands = commands
        self.arguments = arguments
        self.paths = PathCompleter(get_paths=lambda: [str(root())], expanduser=True)

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and "\n" not in text:
            name, space, arg = text.partition(" ")
            if not space:
                for cmd, help_text in self.commands():
                    if cmd.startswith(name):
                        yield Completion(cmd, -len(name), display_meta=help_text)
                return
            for value, meta in self.arguments(name):
                if value.startswith(arg.strip()):
                    yield Completion(value, -len(arg.lstrip()), display_meta=meta)
            return
        fragment = mention_at(text)
        if fragment is not None:
            yield from self.paths.get_completions(Document(fragment, len(fragment)), event)


def ignore_mouse_sequences(kb: KeyBindings) -> KeyBindings:
    """Mouse reporting is never turned on, so a "mouse event" is a typed or pasted escape sequence
    (`ESC [ 31 m`) that prompt_toolkit's own handler fails to parse, with a traceback over the screen and
    the client stuck at "Press ENTER" (break14): it is dropped."""
    kb.add(Keys.Vt100MouseEvent)(lambda event: None)
    return kb


def _bindings() -> KeyBindings:
    kb = ignore_mouse_sequences(KeyBindings())

    @kb.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buf = event.current_buffer
        state = buf.complete_state
        if state is not None and state.current_completion is not None:
            buf.apply_completion(state.current_completion)
        elif buf.document.text_before_cursor.endswith("\\") and buf.document.is_cursor_at_the_end:
            buf.delete_before_cursor(1)
            buf.insert_text("\n")
        else:
            buf.validate_and_handle()

    @kb.add("c-c")
    def _interrupt(
        event: KeyPressEvent,
    ) -> None:  # a typed line is cleared; at an empty one, the caller decides
        buf = event.current_buffer
        if buf.text:
            buf.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    @kb.add("escape", "enter")
    @kb.add("c-j")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return kb


def _columns() -> int:
    """The terminal's width in columns (80 when it cannot be read)."""
    try:
        return get_app().output.get_size().columns
    except Exception:
        return 80


def history_at(data_root: Path | None) -> FileHistory | InMemoryHistory:
    """The prompt history file in the data dir, created 0600; in memory when it cannot be written."""
    if data_root is None:
        return InMemoryHistory()
    path = data_root / HISTORY_FILE
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600))
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


class Entry:
    """The input line (see the module docstring). `toolbar(width)` gives the status line's text."""

    def __init__(
        self, completer: ChatCompleter, toolbar: Callable[[int], str], data_root: Path | None
    ) -> None:
        self.toolbar = toolbar
        self.prompts: PromptSession[str] = PromptSession(
            history=history_at(data_root),
            completer=completer,
            complete_while_typing=Condition(lambda: self._completing()),
            multiline=True,
            key_bindings=_bindings(),
            prompt_continuation="  ",
            bottom_toolbar=lambda: FormattedText([("", " " + self.toolbar(_columns() - 2))]),
            style=STYLE,
            reserve_space_for_menu=6,
            enable_suspend=True,  # Ctrl-Z stops the client (job control), as in any terminal program
        )

    def _completing(self) -> bool:
        text = self.prompts.default_buffer.document.text_before_cursor
        return text.startswith("/") or mention_at(text) is not None

    async def read(self, default: str = "") -> str:
        """The next input, starting with `default` (editable); anything printed meanwhile (a log record)
        appears above the input line."""
        with patch_stdout(raw=True):
            return await self.prompts.prompt_async(
                FormattedText([("class:prompt", "❯ ")]), default=default, handle_sigint=False
            )  # SIGINT is the client's: `send_interrupt`


def send_interrupt() -> bool:
    """A SIGINT while a prompt_toolkit application reads keys (the input line, a question, a picker) is given
    to it as its `<sigint>` key, as prompt_toolkit's own handler would, in the application's context (from
    the signal handler's own, the application renders nothing); False when none is running."""
    app = get_app_or_none()
    if app is None or not app.is_running or app.future is None or app.future.done():
        return False  # none, or one already closing (its answer given)
    (app.context or contextvars.copy_context()).copy().run(app.key_processor.send_sigint)
    return True
