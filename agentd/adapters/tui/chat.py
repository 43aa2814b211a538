"""The terminal client's controller (docs/terminal.md): the session it holds and the prompt/turn loop.

Owns `Chat`: opening a session (the workspace's newest, a new one, or a given id) through the terminal front
ends' shared `agentd.terminal.open_or_create`, with the workspace's settings and trust question from the
command line (`Opener`); showing a resumed session's history (`Session.replay_updates`); reading input,
running slash commands (agentd.adapters.tui.commands) and turns (`Session.prompt`); Ctrl-C (cancel the turn;
a second one while it stops leaves; at an empty prompt twice within 2 s, or Ctrl-D, exits) through the one
SIGINT handler of the client's life, which no prompt_toolkit application replaces (new-user H); switching
session (`/new`, `/resume`, `/model`); and closing: a session created here that never reached the model is
deleted (H11), any other is kept and its id printed with the command that continues it.
Uses only the Session's public API (tests/unit/test_architecture.py). Never imports pygls, lsprotocol, acp.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from agentd import __version__
from agentd.adapters.tui import commands
from agentd.adapters.tui.approval import KeyboardApprover
from agentd.adapters.tui.entry import ChatCompleter, Entry, send_interrupt
from agentd.adapters.tui.mentions import prompt_blocks
from agentd.adapters.tui.status import status_text
from agentd.adapters.tui.tty import keys_held
from agentd.adapters.tui.view import View
from agentd.errors import AgentdError, SessionLocked
from agentd.providers.models import model_label
from agentd.text import visible

log = logging.getLogger("agentd.tui")
EXIT_WINDOW_S = 2.0  # a second Ctrl-C at an empty prompt within this long exits
TICK_S = 0.1


@dataclass
class Opener:
    """What the command line gives the client: `settings(workspace, overrides)` loads the effective settings
    of a workspace (warnings printed, the trust question asked: agentd.cli); `data_dir` (a DataDir)."""

    settings: Callable[[Path, dict[str, Any]], Any]
    data_dir: Any


class _ViewLog(logging.Handler):
    """Log records as dim lines of the transcript (never raw on the terminal under the live region)."""

    def __init__(self, view: View, level: int) -> None:
        super().__init__(level)
        self.view = view

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.view.note(f"[{record.levelname.lower()} · {record.name}: {record.getMessage()}]")
        except Exception:
            self.handleError(record)


def route_logs(view: View, verbose: int) -> None:
    """Without a log file, the client shows errors (and with `-v`/`-vv` also info/debug records) in the
    transcript; warnings the client shows another way (a retry is its own line) stay out of it."""
    root = logging.getLogger("agentd")
    level = logging.ERROR if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root.handlers[:] = [_ViewLog(view, level)]


class Chat:
    """One terminal client (see the module docstring)."""

    def __init__(self, opener: Opener, workspace: Path, console: Console | None = None) -> None:
        self.opener = opener
        self.workspace = workspace
        self.console = console or Console(highlight=False)
        self.view = View(self.console, self.status_line)
        self.approver = KeyboardApprover(self.view, self.cancel_turn)
        self.overrides: dict[str, Any] = {}
        self.settings: Any = None
        self.session: Any = None
        self.provider: Any = None
        self.created = False
        self.quit = False
        self.signalled = 0  # SIGTERM or SIGHUP received: leave, exit 128 + this
        self.listed: list[str] = []  # session ids of the last /sessions listing, for `/resume N`
        self.prefill = ""  # the text the next input starts with (the prompt a /rewind took back)
        self._turn: asyncio.Task[Any] | None = None
        self._stopping = False
        self._interrupted = 0.0  # when a Ctrl-C came while nothing could take it (time.monotonic())
        self._activity = "working"
        self._status: tuple[Any, str] = (None, "")
        self._commands_run = 0
        completer = ChatCompleter(
            commands.names, lambda name: commands.arguments(self, name), lambda: self.workspace
        )
        self.entry = Entry(completer, self.status_line, getattr(opener.data_dir, "root", None))

    # ---- the status line -----------------------------------------------------------------------------
    def status_line(self, width: int | None = None) -> str:
        """The status line, at most `width` columns; computed again after an update, a session switch, a
        command or a resize."""
        if self.session is None or self.session.closed:
            return "no session"
        key = (id(self.session), self.view.version, self._commands_run, width)
        if self._status[0] != key:
            self._status = (key, status_text(self.session.status(), self.view.usage, width))
        return self._status[1]

    # ---- sessions ------------------------------------------------------------------------------------
    async def open(
        self, session_id: str | None, workspace: Path | None = None, *, again: bool = False
    ) -> None:
        """Open `session_id` (None: a new one) in `workspace` (default: the current one; a resumed
        session's own folder wins), then close the session held now (if any). `again`: the same session
        opened again with other settings (/model; closed first, for its lock): one line instead of the
        header and the history. Raises AgentdError; on failure the session held now stays open (T7), except
        after `again`."""
        from agentd.persistence.index import read_meta
        from agentd.terminal import open_or_create, provider_for

        if session_id:
            if not again:
                self._check_free(session_id)  # a clear error before anything is opened
            cwd = (read_meta(self.opener.data_dir, session_id) or {}).get("cwd")
            workspace = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else workspace
        if again:
            await self.close(quiet=True)
        ws = workspace or self.workspace
        settings = self.opener.settings(ws, self.overrides)
        provider = _provider(settings, provider_for)
        try:
            session, created = await open_or_create(
                settings=settings, data_dir=self.opener.data_dir, workspace=ws, session_id=session_id,
                provider=provider, approver=self.approver, sink=self.view.update, lines=self.view.core_line,
            )  # fmt: skip
        except BaseException:
            await provider.aclose()
            raise
        await self.close()  # the session held until now, once the next one is open (a failure kept it)
        self.session, self.provider, self.created, self.settings = session, provider, created, settings
        self.workspace = ws
        self.view.reset()
        self.view.title, self.view.mode = session.title, session.mode
        if again:
            self.view.note(
                f"[{session.id} · {model_label(session.provider_name, session.model)} from the next prompt]"
            )
            return
        self._header()
        if not created:
            self._replay()

    def _check_free(self, session_id: str) -> None:
        """Raise SessionNotFound when `session_id` is not in the data dir, SessionLocked when another
        process holds it (an editor has it open): found before the session held now is given up (T7)."""
        from agentd.persistence.index import session_not_found
        from agentd.persistence.lock import holder, locked_error
        from agentd.persistence.paths import is_valid_session_id

        dd = self.opener.data_dir
        if not is_valid_session_id(session_id) or not dd.session_dir(session_id).is_dir():
            raise session_not_found(dd, session_id)
        info = holder(dd.lock_path(session_id))
        if info is not None:
            raise locked_error(session_id, info, same_process=False)

    async def open_first(self, session_id: str | None, new: bool) -> None:
        """The session the client starts with: `session_id`, a new one, or the workspace's newest (a new
        one when it has none, or when another process holds it)."""
        from agentd.persistence.index import list_sessions

        if session_id or new:
            await self.open(session_id)
            return
        newest = next(iter(list_sessions(self.opener.data_dir, self.workspace)), None)
        if newest is not None and newest.get("lockedBy"):
            pid = newest["lockedBy"].get("pid")
            self.view.note(f"[the newest session {newest['id']} is open in process {pid}; starting a new one. "
                           f"/resume {newest['id']} once it is free]", style="yellow")  # fmt: skip
            newest = None
        await self.open(str(newest["id"]) if newest else None)

    async def close(self, quiet: bool = False) -> None:
        """Close the session held now; one created here that never reached the model is deleted (H11), any
        other is kept and (unless `quiet`) its id printed with the command that continues it."""
        from agentd.terminal import discard_session

        session, provider = self.session, self.provider
        if session is None:
            return
        self.session = self.provider = None
        try:
            await session.aclose()
        finally:
            await provider.aclose()
        if self.created and not session.totals.requests:
            discard_session(self.opener.data_dir, session.id)
        elif not quiet:
            self.view.note(f"[session {session.id} kept · continue it with: agentd --resume {session.id}]")

    def _header(self) -> None:
        s = self.session
        line = Text()
        line.append(f"agentd {__version__}", style="bold")
        line.append(
            f" · {model_label(s.provider_name, s.model)} · {visible(str(s.cwd), one_line=True)}", style="dim"
        )
        self.view.print(line)
        what = "new session" if self.created else f"resumed · {s.turns} turn{'s' if s.turns != 1 else ''}"
        title = f" · {visible(s.title, one_line=True)}" if s.title else ""
        self.view.print(Text(f"{s.id} · {what}{title}", style="dim"))
        self.view.print(Text("/help · Enter sends · Alt-Enter new line · @path attaches a file · Ctrl-C cancels "
                             "· Ctrl-D exits", style="dim"))  # fmt: skip
        self.view.print()

    def _replay(self) -> None:
        """Show the session's history: its prompts, replies and tool lines, then its plan once."""
        updates = self.session.replay_updates()
        plans = [u for u in updates if u.get("sessionUpdate") == "plan"]
        if len(updates) > 2:
            self.view.print(Text("── history ──", style="dim"))
        for u in updates:
            if u.get("sessionUpdate") != "plan":
                self.view.update(u)
        self.view.flush()
        if plans:
            self.view.update(plans[-1])
        if len(updates) > 2:
            self.view.print(Text("── now ──", style="dim"))
            self.view.print()

    # ---- the loop ------------------------------------------------------------------------------------
    async def run(self) -> int:
        """Read and run until /quit, Ctrl-D, a second Ctrl-C, SIGTERM or SIGHUP. Returns the exit code (0;
        128 + the signal's number after SIGTERM or SIGHUP). Holds SIGINT, SIGTERM and SIGHUP meanwhile."""
        last_interrupt = 0.0
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        for num in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(num, self._on_stop, num, main)
        loop.add_signal_handler(signal.SIGINT, self._on_sigint, main)
        try:
            while not self.quit:
                try:
                    default, self.prefill = self.prefill, ""
                    text = await self.entry.read(default)
                except KeyboardInterrupt:
                    now = time.monotonic()
                    if now - last_interrupt < EXIT_WINDOW_S:
                        break
                    last_interrupt = now
                    self.view.note("[Ctrl-C again to exit]")
                    continue
                except EOFError:
                    break
                await self.handle(text)
        except asyncio.CancelledError:
            if not (self.signalled or self.quit):
                raise
        finally:
            for num in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(num)
            await self.close()
        return 128 + self.signalled if self.signalled else 0

    async def handle(self, text: str) -> None:
        """One input: a slash command, or a prompt for the session."""
        if not text.strip():
            return
        self._commands_run += 1
        try:
            if commands.is_command(text):
                await commands.run(self, text)
                if not self.quit:
                    self.view.gap()
            else:
                await self.prompt(text)
        except AgentdError as err:
            self.view.error(f"agentd: {err.message}")
            if isinstance(err, SessionLocked) and self.session is None:
                self.view.note("[no session open: /new starts one, /resume ID opens another]")

    async def prompt(self, text: str) -> None:
        if self.session is None:
            await self.open(None)
        mentions = prompt_blocks(text, self.session.cwd, self.settings.tools.read_max_bytes)
        for problem in mentions.problems:
            self.view.note(f"[{problem}]", style="yellow")
        if mentions.attached:
            self.view.note(f"[attached · {', '.join(mentions.attached)}]")
        stop = await self.in_turn(self.session.prompt(mentions.blocks))
        if stop is not None and stop != "end_turn":
            self.view.note("[cancelled]" if stop == "cancelled" else f"[stop · {stop}]", style="yellow")
        self.view.gap()

    async def in_turn(self, work: Any, activity: str = "working") -> Any:
        """Run `work` (a coroutine of the session) with the live region, Ctrl-C cancelling it (`_on_sigint`:
        the terminal sends SIGINT, its keys are not read meanwhile). Returns its result, or None when it was
        cancelled outright (a compaction) or left (a second Ctrl-C)."""
        self._turn = asyncio.ensure_future(work)
        self._stopping = False
        self._activity = activity
        self.view.begin_turn(activity)
        ticker = asyncio.ensure_future(self._tick())
        try:
            with keys_held(sys.stdin.fileno()):
                return await self._turn
        except asyncio.CancelledError:
            if self.quit or self._stopping:
                return None
            raise
        finally:
            ticker.cancel()
            self.view.end_turn()
            self._turn = None

    def _on_stop(self, num: int, main: asyncio.Task[Any] | None) -> None:
        """SIGTERM or SIGHUP: cancel a running turn as Ctrl-C does (its command's processes die, its
        stand-ins go), then leave: the session is closed and its lock released; exit 128 + `num`."""
        self.quit = True
        self.signalled = self.signalled or num
        if self._turn is not None:
            self.cancel_turn()
        elif main is not None:
            main.cancel()  # waiting for input: leave now

    def _on_sigint(self, main: asyncio.Task[Any] | None) -> None:
        """SIGINT (Ctrl-C while keys are not read, or `kill -INT`), the one handler of the client's life: in a
        turn it cancels the turn (a second one while it stops leaves); at the input line, a question or a
        picker it is that application's Ctrl-C (an approval's cancels the turn); otherwise (a slash command
        at work) a second one within `EXIT_WINDOW_S` leaves."""
        if self._turn is not None and self._stopping:  # a second Ctrl-C: leave without waiting
            self.quit = True
            self._turn.cancel()
        elif send_interrupt():
            return
        elif self._turn is not None:
            self.cancel_turn()
        else:
            now = time.monotonic()
            if now - self._interrupted < EXIT_WINDOW_S and main is not None:
                self.quit = True
                main.cancel()
                return
            self._interrupted = now
            self.view.note("[Ctrl-C again to exit]")

    def cancel_turn(self) -> None:
        """Ctrl-C during a turn (or at an approval): the session cancels the turn (which then ends
        `cancelled`); other work (a compaction) is cancelled directly and leaves the history unchanged."""
        self._stopping = True
        if self._turn is None:
            return
        if self._activity == "working" and self.session is not None:
            self.session.cancel()
        else:
            self._turn.cancel()

    async def _tick(self) -> None:
        while True:
            self.view.tick()
            await asyncio.sleep(TICK_S)


def _provider(settings: Any, provider_for: Callable[[Any], Any]) -> Any:
    """The session's provider; no key is MissingCredentials with this client's remedy (the terminal's
    environment, or config.toml), since `--provider` is a flag of `agentd run` only."""
    from agentd.errors import MissingCredentials
    from agentd.providers.factory import DEFAULT_KEY_ENV

    try:
        return provider_for(settings)
    except MissingCredentials:
        variable = settings.api_key_env or DEFAULT_KEY_ENV.get(settings.provider, "the API key variable")
        raise MissingCredentials(
            f"No API key: set {variable} in this terminal's environment (export {variable}=...) and start agentd "
            "again, or choose another provider in config.toml (docs/configuration.md)",
            provider=settings.provider,
            reason="missing_credentials",
        ) from None


def run_chat(
    opener: Opener,
    workspace: Path,
    *,
    resume: str | None,
    new: bool,
    verbose: int = 0,
    log_file: bool = False,
) -> int:
    """`agentd` on a terminal: open the first session (raises AgentdError when it cannot be opened: the
    command line prints it and exits with its code), then chat until the user leaves. Returns 0."""

    async def main() -> int:
        chat = Chat(opener, workspace)
        if not log_file:
            route_logs(chat.view, verbose)
        await chat.open_first(resume, new)
        return await chat.run()

    return asyncio.run(main())
