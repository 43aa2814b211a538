"""The terminal front end of `agentd run` and `agentd demo` (PROTOCOL.md §3.1).

Owns: `run_terminal_turn` (one turn: open or create the session, run it, the exit code of PROTOCOL.md
§3.1), `Printer` (the session-update sink: the assistant's text on stdout, operator lines on stderr: the
plan as a checklist, a running command and its output), the approvers' front-end wrappers (`CountingApprover`,
`AutoApprover`), what every terminal front end shares with the interactive client (agentd.adapters.tui):
`provider_for`, `open_or_create` (a session with its MCP servers), `discard_session` (H11) and
`cache_summary`; `TurnReport` (what the exit code needs to know about a turn) and the texts of the turn's
last lines (`[cancelled]`, an empty reply, the no-terminal hint).
Writes only through `agentd.log.console`. Imports the core (lazily), agentd.log, agentd.errors and
agentd.permissions.approver; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.errors import ConfigError
from agentd.log import console, hide_records_shown_as_updates
from agentd.permissions.approver import (
    NO_TERMINAL,
    ApprovalOutcome,
    ApprovalRequest,
    Approver,
    render_prompt,
)
from agentd.text import visible

log = logging.getLogger("agentd.run")
WRITE_KINDS = frozenset({"edit", "delete", "move", "execute"})  # ACP tool kinds that change something
# ACP tool kinds that change nothing: every other call is an action (a write, or a tool whose effect is
# unknown, as an MCP tool without `readOnlyHint`), which exit 9 counts (PROTOCOL.md §3.1; new-user R7)
READ_ONLY_KINDS = frozenset({"read", "search", "think", "fetch"})
CANCELLED_LINE = "[cancelled]"
# Signals that cancel a running turn as Ctrl-C does; `agentd run` then exits with 128 + the number.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EMPTY_REPLY_LINE = "[the model's last reply was empty]"
_MARKS = {"completed": "[x]", "done": "[x]", "in_progress": "[~]", "pending": "[ ]"}
OUTPUT_MAX_LINES = 40
OUTPUT_MAX_COLUMNS = 400
PROGRESS_EVERY_S = 10.0  # how often `[Running] … · still running after N s` repeats while a command runs


@dataclass
class TurnReport:
    """What happened in one turn, for the exit code (PROTOCOL.md §3.1).

    `no_terminal`: tools refused because nobody could be asked, and `no_terminal_kinds` their ACP kinds;
    `actions_started`: calls that are actions (not of a READ_ONLY_KINDS kind) that started; `replied`: the
    model's last reply had text."""

    no_terminal: list[str] = field(default_factory=list)
    no_terminal_kinds: list[str] = field(default_factory=list)
    no_terminal_protected: list[str] = field(default_factory=list)  # the protected path classes among them
    actions_started: int = 0
    replied: bool = False

    @property
    def actions_all_refused_for_no_terminal(self) -> bool:
        """Every action of the turn (a write, or a call of a tool not marked read-only) was refused because
        there was no terminal to ask (exit 9); a refused read-only call alone is no such turn (new-user R7)."""
        return self.actions_refused_for_no_terminal and self.actions_started == 0

    @property
    def actions_refused_for_no_terminal(self) -> bool:
        """An action (a call of a kind not in READ_ONLY_KINDS) was refused for lack of a terminal."""
        return any(k not in READ_ONLY_KINDS for k in self.no_terminal_kinds)

    def no_terminal_hint(self) -> str:
        """The last line of a turn that had calls refused for lack of a terminal: `every write` when they were
        all writes (kind edit, delete, move, execute), `every action` when a tool not marked read-only was
        among them, else `N read-only tool calls` (the turn did not exit 9 for them)."""
        tools = ", ".join(dict.fromkeys(self.no_terminal))
        first = self.no_terminal[0]
        if not self.actions_refused_for_no_terminal:
            n = len(self.no_terminal)
            what = f"{n} read-only tool call{'s' if n > 1 else ''} of this turn {'were' if n > 1 else 'was'}"
        elif all(k in WRITE_KINDS for k in self.no_terminal_kinds if k not in READ_ONLY_KINDS):
            what = "every write of this turn was"
        else:
            what = "every action of this turn was"
        hint = f"rerun with --yes or --allow TOOL (e.g. --allow {first})"
        if self.no_terminal_protected:
            classes = ", ".join(dict.fromkeys(self.no_terminal_protected))
            hint = (f"{'' if len(self.no_terminal_protected) == len(self.no_terminal) else hint + '; '}a write to a "
                    f"protected path ({classes}) is allowed only by a person at a terminal: run on a terminal, "
                    "or change the file yourself")  # fmt: skip
        return f"agentd: {NO_TERMINAL}, so {what} refused ({tools}); {hint}"


class CountingApprover:
    """Wraps the terminal approver of `agentd run`: a refusal for lack of a terminal is counted in `report`
    and described as `no terminal to ask; use --yes or --allow <tool>` in the `[Permission]` line (H9)."""

    def __init__(self, inner: Approver, report: TurnReport) -> None:
        self.inner = inner
        self.report = report

    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        outcome = await self.inner.request(req)
        if outcome.detail != NO_TERMINAL:
            return outcome
        self.report.no_terminal.append(req.tool_name)
        self.report.no_terminal_kinds.append(req.kind)
        note = f"{NO_TERMINAL}; use --yes or --allow {req.tool_name}"
        if req.protected is not None:  # --yes and --allow never answer it (PresetApprover)
            self.report.no_terminal_protected.append(req.protected)
            note = (
                f"{NO_TERMINAL}; a protected path ({req.protected}): only a person at a terminal can allow it"
            )
        return ApprovalOutcome(
            option=outcome.option, decided_by=outcome.decided_by, detail=outcome.detail, note=note
        )


class AutoApprover:
    """The demo's approver: shows each question as the terminal would ask it, then answers "once" itself,
    and says so; audited as decided by `user` with rule `who` (CONTRACTS.md §5), shown as auto-answered."""

    def __init__(self, who: str) -> None:
        self.who = who

    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        console.line("")
        console.line(render_prompt(req) + f"o   <- auto-answered by {self.who}")
        return ApprovalOutcome(option="allow_once", rule=self.who, note=f"auto-answered by {self.who}")


class Printer:
    """The session-update sink and line writer of a terminal turn (`agentd run`, `agentd demo`).

    stdout: the assistant's text only (a retried reply is marked on stderr). stderr also shows the plan as
    a checklist (`[Plan]`), a command while it runs (`[Running] <title>`, repeated every `progress_every_s`
    seconds with the time so far) and its output when it ends (`[Output]`, the first OUTPUT_MAX_LINES
    lines; new-user R3, R7). A closed stdout or stderr (`| head`) calls `on_closed` once (the caller
    cancels the turn) and nothing more is written."""

    def __init__(
        self,
        report: TurnReport,
        on_closed: Callable[[], None] | None = None,
        progress_every_s: float = PROGRESS_EVERY_S,
    ) -> None:
        self.report = report
        self.on_closed = on_closed
        self.progress_every_s = progress_every_s
        self.closed = False
        self.message_id: str | None = None
        self.kinds: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        self.running: dict[str, asyncio.TimerHandle] = {}  # a running command's next progress line

    def update(self, update: dict[str, Any]) -> None:
        """Handle one session/update (PROTOCOL.md §7)."""
        self._guard(self._update, update)

    def line(self, text: str) -> None:
        """An operator line on stderr (never in the middle of the assistant's stdout line)."""
        self._guard(console.line, text)

    def end(self) -> None:
        for handle in self.running.values():
            handle.cancel()
        self.running.clear()
        self._guard(console.end)

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        if self.closed:
            return
        try:
            fn(*args)
        except BrokenPipeError:
            self.closed = True
            if self.on_closed is not None:
                self.on_closed()

    def _update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self._text(update)
        elif kind == "tool_call":
            self.kinds[update["toolCallId"]] = str(update.get("kind", "other"))
            self.titles[update["toolCallId"]] = visible(str(update.get("title") or ""), one_line=True)
            self.report.replied = False
        elif kind == "tool_call_update":
            self._tool_update(update)
        elif kind == "retry":  # the provider failed; agentd retries (the log record of it is not shown)
            reason = visible(str(update.get("message") or "the request failed"), one_line=True)
            delay = float(update.get("delayS") or 0)
            console.line(f"[Retry] {reason} · attempt {update.get('attempt')} failed; next in {delay:g} s")
        elif kind == "plan":
            console.line("[Plan]")
            for e in update.get("entries") or []:
                mark = _MARKS.get(e.get("status", ""), "[ ]")
                console.line(f"  {mark} {visible(str(e.get('content', '')), one_line=True)}")

    def _text(self, update: dict[str, Any]) -> None:
        meta = update.get("_meta", {}).get("agentd", {})
        if meta.get("retracts"):
            console.line("[retry · the partial reply above was discarded]")
        elif self.message_id not in (None, update.get("messageId")):
            console.end()
        self.message_id = update.get("messageId")
        text = update["content"]["text"]
        console.out(text)
        self.report.replied = self.report.replied or bool(text.strip())

    def _tool_update(self, update: dict[str, Any]) -> None:
        call_id = update["toolCallId"]
        kind = self.kinds.get(call_id, "other")
        status = update.get("status")
        if status == "in_progress" and kind not in READ_ONLY_KINDS:
            self.report.actions_started += 1
        if kind != "execute":
            return
        if status == "in_progress":
            console.line(f"[Running] {self.titles.get(call_id, '')}")
            self._next_progress(call_id, self.progress_every_s)
        elif status in ("completed", "failed"):
            handle = self.running.pop(call_id, None)
            if handle is not None:
                handle.cancel()
            for item in update.get("content") or []:
                text = (item.get("content") or {}).get("text") if item.get("type") == "content" else None
                if text:
                    _show_output(text)

    def _next_progress(self, call_id: str, after_s: float) -> None:
        """Schedule `[Running] <title> · still running after N s` on the running loop (none: no ticks)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        def tick() -> None:
            title = self.titles.get(call_id, "")
            self.line(f"[Running] {title} · still running after {after_s:g} s")
            self._next_progress(call_id, after_s + self.progress_every_s)

        self.running[call_id] = loop.call_later(self.progress_every_s, tick)


def _show_output(text: str) -> None:
    """`[Output]` and the first OUTPUT_MAX_LINES lines of a command's output (each cut at OUTPUT_MAX_COLUMNS
    characters; escape sequences and other controls shown as `\\xNN`, never sent to the terminal)."""
    lines = text.rstrip("\n").split("\n")
    shown = lines[:OUTPUT_MAX_LINES]
    console.line("[Output]")
    for row in shown:
        cut = row if len(row) <= OUTPUT_MAX_COLUMNS else row[:OUTPUT_MAX_COLUMNS] + " …"
        console.line(f"  | {visible(cut, one_line=True)}")
    if len(lines) > len(shown):
        console.line(f"  | ... ({len(lines) - len(shown)} more lines)")


def cache_summary(totals: dict[str, Any]) -> str:
    """`[usage · N requests · in=… cache_read=… (P % of prompt tokens) cache_write=… out=…]` from the
    session totals of a `usage_update` (PROTOCOL.md §7)."""
    fresh = int(totals.get("inputTokens") or 0)
    read = int(totals.get("cacheReadInputTokens") or 0)
    write = int(totals.get("cacheCreationInputTokens") or 0)
    prompt = fresh + read + write
    share = f" ({100 * read / prompt:.0f} % of prompt tokens)" if prompt else ""
    return (
        f"[usage · {totals.get('requests', 0)} requests · in={fresh} cache_read={read}{share} "
        f"cache_write={write} out={int(totals.get('outputTokens') or 0)}]"
    )


@dataclass
class TurnSetup:
    """One terminal turn: the prompt; the workspace (a real folder); the effective settings; the data dir;
    which session (`session_id` to resume, `continue_newest` for the workspace's newest, else a new one);
    who answers approvals (`yes`, `allow`, else the terminal; or `approver` itself, as the demo's);
    `provider_env` replaces the environment the
    provider reads its key from (the demo's emulator key); `reload_instructions` for a resumed session:
    read its project instructions again (`agentd.core.instructions.reload`)."""

    prompt: str
    workspace: Path
    settings: Any
    data_dir: Any
    session_id: str | None = None
    continue_newest: bool = False
    yes: bool = False
    allow: list[str] = field(default_factory=list)
    approver: Approver | None = None
    provider_env: dict[str, str] | None = None
    reload_instructions: bool = False  # a resumed session reads its AGENTS.md files again (one cache write)


@dataclass
class TurnOutcome:
    """`code`: the exit code of PROTOCOL.md §3.1; `session_id` (None when no session was kept); `totals`:
    the session's token totals after the turn (PROTOCOL.md §7 `usage_update`)."""

    code: int
    session_id: str | None
    totals: dict[str, Any]


async def run_terminal_turn(setup: TurnSetup) -> TurnOutcome:
    """Run one turn in the terminal and say how it ended (exit codes of PROTOCOL.md §3.1).

    A new session whose turn never got a reply from the model (unreachable endpoint, bad key) is deleted,
    so `--continue` cannot land on it (H11). Raises ProviderError, ConfigError, SessionNotFound, ..."""
    from agentd.core.session import clean_prompt

    blocks = [{"type": "text", "text": setup.prompt}]
    blocks = clean_prompt(blocks)  # an empty prompt is refused before any session exists
    s = setup.settings
    log.info("run: workspace %s, data dir %s, provider %s, model %s", setup.workspace, setup.data_dir.root,
             s.provider, s.model or "(the provider's default)")  # fmt: skip
    log.debug("run: effective settings %s", s.model_dump(exclude={"auth_token"}))
    provider = provider_for(s, env=setup.provider_env)
    try:
        return await _turn(setup, provider, blocks)
    finally:
        await provider.aclose()


def _approver(setup: TurnSetup, report: TurnReport) -> Approver:
    if setup.approver is not None:
        return setup.approver
    from agentd.permissions.approver import PresetApprover, TerminalApprover

    return PresetApprover(
        yes=setup.yes, allow=set(setup.allow), fallback=CountingApprover(TerminalApprover(), report)
    )


def provider_for(settings: Any, env: dict[str, str] | None = None) -> Any:
    """The model provider of the effective settings (`agentd.providers.factory.provider_for`, the one rule the
    adapters use too); `env` replaces the environment its key is read from. Raises ConfigError (no key, bad
    scenario)."""
    from agentd.providers.factory import provider_for as of_settings

    return of_settings(settings, env=env)


async def open_or_create(
    *, settings: Any, data_dir: Any, workspace: Path, session_id: str | None, provider: Any,
    approver: Approver, sink: Callable[[dict[str, Any]], None], lines: Callable[[str], None],
) -> tuple[Any, bool]:  # fmt: skip
    """The session `session_id` (None: a new one in `workspace`) and whether it was created now, with its
    MCP servers started (a server that does not start is a warning line) and the window its server serves
    learned (issue 17: the client's status line shows the real figure from the start), for the terminal front
    ends. Raises SessionNotFound, SessionLocked, StorageError, and ConfigError when the session's folder is
    gone."""
    from agentd.core.factory import create_session, open_session, session_launcher, session_mcp_specs
    from agentd.mcp.manager import start_servers

    s = settings
    common: dict[str, Any] = {"settings": s, "provider": provider, "data_dir": data_dir, "approver": approver,
                              "sink": sink, "lines": lines}  # fmt: skip
    common["mcp"] = await start_servers(
        session_mcp_specs(s, workspace),
        workspace,
        s,
        warn=lambda text: lines(f"agentd: warning: {text}"),
        secret_env=[s.api_key_env] if s.api_key_env else [],
        launcher=session_launcher(s, workspace, data_dir),
    )
    try:
        if session_id:
            session = open_session(session_id=session_id, **common)
        else:
            session = create_session(cwd=workspace, **common)
    except BaseException:
        if common["mcp"] is not None:
            await common["mcp"].aclose()
        raise
    if not session_id:
        await session.learn_window()  # never raises: a failed probe keeps the configured window
        return session, True
    if not session.cwd.is_dir():
        await session.aclose()
        raise ConfigError(
            f"session {session_id} belongs to {session.cwd}, which no longer exists; restore that folder, "
            "or start a new session with --workspace DIR"
        )
    await session.learn_window()
    return session, False


async def _open(setup: TurnSetup, provider: Any, printer: Printer, report: TurnReport) -> tuple[Any, bool]:
    """The session of the turn, and whether it was created now."""
    from agentd.persistence.index import newest_session

    session_id = setup.session_id
    if setup.continue_newest:
        session_id = newest_session(setup.data_dir, setup.workspace)
        if session_id is None:
            printer.line("agentd: no earlier session in this workspace; starting a new one")
    return await open_or_create(
        settings=setup.settings, data_dir=setup.data_dir, workspace=setup.workspace, session_id=session_id,
        provider=provider, approver=_approver(setup, report), sink=printer.update, lines=printer.line,
    )  # fmt: skip


async def _turn(setup: TurnSetup, provider: Any, blocks: list[dict[str, Any]]) -> TurnOutcome:
    from agentd.errors import ProviderError

    report = TurnReport()
    session: Any = None
    printer = Printer(report, on_closed=lambda: session.cancel() if session else None)
    hide_records_shown_as_updates()
    session, created = await _open(setup, provider, printer, report)
    printer.line(f"[session {session.id}]")
    _instructions_line(session, printer, reload=setup.reload_instructions and not created)
    loop = asyncio.get_running_loop()
    interrupted = 0  # the signal that cancelled the turn (SIGINT, SIGTERM, SIGHUP), else 0

    def on_signal(num: int) -> None:
        nonlocal interrupted
        interrupted = interrupted or num
        session.cancel()  # as Ctrl-C: the command's processes die, stand-ins go, the lock is released

    for num in STOP_SIGNALS:
        loop.add_signal_handler(num, on_signal, num)
    try:
        stop = await session.prompt(blocks)
    except ProviderError:
        if (
            created and not session.totals.requests
        ):  # the model was never reached: keep no empty session (H11)
            session.close()
            discard_session(setup.data_dir, session.id)
            printer.line(f"[session {session.id} discarded: the model was never reached]")
        raise
    finally:
        for num in STOP_SIGNALS:
            loop.remove_signal_handler(num)
        printer.end()
        await session.aclose()  # observing hooks (after_tool, turn_end) finish first; MCP servers stop
    totals = session.totals.to_json() if session.totals.requests else {}
    return TurnOutcome(_exit_code(printer, report, stop, interrupted), session.id, totals)


def _instructions_line(session: Any, printer: Printer, *, reload: bool) -> None:
    """`[instructions · AGENTS.md (1840 bytes)]` when the session has any; `reload`: read them again first
    (the user asked), which changes the system prompt and so costs one prompt-cache write."""
    if reload:
        fresh = session.reload_instructions()
        printer.line(
            f"[instructions reloaded · {fresh.summary()} · the next request writes the prompt cache once]"
        )
    elif session.instructions.files:
        printer.line(f"[instructions · {session.instructions.summary()}]")


def discard_session(data_dir: Any, session_id: str) -> None:
    """Delete a session that never reached the model (H11), so `--continue` cannot land on it; a failure is
    only logged."""
    from agentd.persistence.index import delete_session

    try:
        delete_session(data_dir, session_id)
    except Exception:  # keeping an empty session is harmless; the provider's error matters more
        import logging

        logging.getLogger("agentd").warning(
            "could not delete the empty session %s", session_id, exc_info=True
        )


def _exit_code(printer: Printer, report: TurnReport, stop: str, interrupted: int) -> int:
    """The exit code of a finished turn (PROTOCOL.md §3.1), after its last lines; `interrupted`: the
    signal that cancelled it (128 + its number: 130 for SIGINT, 143 SIGTERM, 129 SIGHUP), else 0."""
    from agentd import (
        errors as cli,
    )  # the exit codes (agentd.errors owns them; agentd.cli imports this module)

    if printer.closed:
        return cli.EXIT_PIPE  # the reader went away: stop quietly (H7)
    if interrupted or stop == "cancelled":
        printer.line(CANCELLED_LINE)
        return 128 + interrupted if interrupted else cli.EXIT_SIGINT
    printer.line(f"[stop · {stop}]")
    if stop != "end_turn":
        return cli.EXIT_STOP
    if not report.replied:
        printer.line(EMPTY_REPLY_LINE)
    if report.actions_all_refused_for_no_terminal:
        printer.line(report.no_terminal_hint())
        return cli.EXIT_NO_TERMINAL
    if report.no_terminal and not report.actions_refused_for_no_terminal:  # only read-only calls refused
        printer.line(report.no_terminal_hint())
    return cli.EXIT_OK
