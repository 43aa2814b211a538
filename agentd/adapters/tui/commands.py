"""The slash commands of the terminal client (docs/terminal.md): `/help`, `/new`, `/sessions`, `/resume`,
`/compact`, `/rewind`, `/fork` (agentd.adapters.tui.rewind), `/cost`, `/plan`, `/mode`, `/model`, `/quit`.

Owns `COMMANDS` (name, argument, help), `is_command`, `run` (dispatch) and `arguments` (what completes after
a command: session ids, modes). Each command is a small function over the `Chat` and the Session's public
API (`compact`, `status`, `todos`, `set_mode`); session listing reads `agentd.persistence.index`.
Never imports pygls, lsprotocol or acp.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from agentd.adapters.tui.approval import CANCELLED, choose_option
from agentd.adapters.tui.rewind import fork_command, label, prompt_checkpoints, rewind_command
from agentd.adapters.tui.status import cache_share, tokens_short
from agentd.errors import UsageError
from agentd.protocol.session import MODE_IDS
from agentd.providers.models import model_label
from agentd.text import visible

if TYPE_CHECKING:
    from agentd.adapters.tui.chat import Chat

Handler = Callable[["Chat", str], Awaitable[None]]
COMMANDS: dict[str, tuple[str, str]] = {
    "/help": ("", "the commands and keys"),
    "/new": ("", "start a new session in this workspace"),
    "/sessions": ("[all]", "this workspace's sessions (all: every workspace's)"),
    "/resume": ("[ID|N]", "open another session (an id, a number from /sessions, or pick one)"),
    "/compact": ("", "summarise the history now, to free context"),
    "/rewind": ("[N] [files|conversation]", "put the files and/or the conversation back to before a prompt"),
    "/fork": ("[N]", "a new session with this one's history (before checkpoint N), opened here"),
    "/cost": ("", "tokens, prompt-cache share and cost of this session"),
    "/plan": ("", "the session's TODO plan"),
    "/mode": ("[MODE]", "show or set the permission mode: " + ", ".join(MODE_IDS)),
    "/model": ("[NAME]", "show the model, or continue this session with another one"),
    "/quit": ("", "leave (the session is kept; agentd --resume ID continues it)"),
}
PICK_HINT = "↑↓ Enter, or a number; Esc keeps this one"
ALIASES = {"/exit": "/quit", "/q": "/quit", "/?": "/help"}
KEYS = [
    ("Enter", "send"), ("Alt-Enter, Ctrl-J, \\ then Enter", "a new line"), ("Tab", "complete /commands, @paths"),
    ("↑ ↓", "history"), ("Ctrl-C", "cancel the turn; twice at an empty prompt: exit"), ("Ctrl-D", "exit"),
    ("Ctrl-Z", "suspend (fg resumes)"),
]  # fmt: skip


def names() -> Iterable[tuple[str, str]]:
    return [(name, help_text) for name, (_, help_text) in COMMANDS.items()]


def is_command(text: str) -> bool:
    """A slash command: `/name` at the start, where the first word is not a path (`/usr/bin/x is …`)."""
    first = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    return first.startswith("/") and ("/" not in first[1:] or first in COMMANDS or first in ALIASES)


def arguments(chat: Chat, name: str) -> Iterable[tuple[str, str]]:
    """Completions for a command's argument."""
    if name == "/resume":
        return [(str(m["id"]), str(m.get("title") or "")) for m in _sessions(chat, every=False)]
    if name == "/mode":
        return [(m, "") for m in MODE_IDS]
    if name == "/sessions":
        return [("all", "every workspace")]
    if name in ("/rewind", "/fork") and chat.session is not None:
        return [(str(c["id"]), label(c)) for c in prompt_checkpoints(chat.session)]
    return []


async def run(chat: Chat, text: str) -> None:
    """Run one command line. Raises UsageError for an unknown command (the line says what to do)."""
    name, _, arg = text.strip().partition(" ")
    name = ALIASES.get(name, name)
    handler = HANDLERS.get(name)
    if handler is None:
        raise UsageError(f"unknown command {visible(name, one_line=True)}; /help lists the commands")
    arg = arg.strip()
    if arg and not COMMANDS[name][0]:  # nothing typed after a command is ever ignored silently
        raise UsageError(
            f"{name} takes no argument (not '{visible(arg, one_line=True)}'); /help lists the commands"
        )
    await handler(chat, arg)


def _session(chat: Chat) -> Any:
    if chat.session is None:
        raise UsageError("no session is open; /new starts one, /resume ID opens one")
    return chat.session


async def _help(chat: Chat, arg: str) -> None:
    table = Table.grid(padding=(0, 2))
    for name, (args, help_text) in COMMANDS.items():
        table.add_row(Text(f"{name} {args}".strip(), style="bold"), help_text)
    table.add_row("", "")
    for key, what in KEYS:
        table.add_row(Text(key, style="bold"), what)
    chat.view.print(table)


async def _new(chat: Chat, arg: str) -> None:
    await chat.open(None)


def _sessions(chat: Chat, every: bool) -> list[dict[str, Any]]:
    from agentd.persistence.index import list_sessions

    return list_sessions(chat.opener.data_dir, None if every else chat.workspace)


async def _list(chat: Chat, arg: str) -> None:
    if arg not in ("", "all"):
        raise UsageError(f"/sessions takes `all` or nothing, not '{visible(arg, one_line=True)}'")
    every = arg == "all"
    found = _sessions(chat, every)
    chat.listed = [str(m["id"]) for m in found]
    if not found:
        chat.view.note("[no sessions" + ("" if every else " in this workspace") + "]")
        return
    table = Table(box=None, padding=(0, 1), header_style="dim")
    for col in ("#", "id", "updated", "turns", "title" + (" · workspace" if every else "")):
        table.add_column(col)
    current = chat.session.id if chat.session is not None else None
    for i, m in enumerate(found, 1):
        title = visible(str(m.get("title") or ""), one_line=True)[:60]
        if every:
            title += f" · {visible(str(m.get('cwd', '')), one_line=True)}"
        mark = " (this one)" if m["id"] == current else " (open elsewhere)" if m.get("lockedBy") else ""
        table.add_row(str(i), str(m["id"]), str(m.get("updatedAt") or "")[:16].replace("T", " "),
                      str(m.get("turns", 0)), title + mark)  # fmt: skip
    chat.view.print(table)


async def _resume(chat: Chat, arg: str) -> None:
    target: str | None = arg
    if arg.isdigit():
        if not 1 <= int(arg) <= len(chat.listed):
            raise UsageError(f"/resume {arg}: no such number; /sessions lists them")
        target = chat.listed[int(arg) - 1]
    if not target:
        target = await _pick(chat)
        if not target:
            return
    if chat.session is not None and target == chat.session.id:
        chat.view.note("[that is the session open now]")
        return
    await chat.open(target)


async def _pick(chat: Chat) -> str | None:
    current = chat.session.id if chat.session is not None else None
    found = [m for m in _sessions(chat, every=False) if m["id"] != current][:9]
    if not found:
        chat.view.note("[no other session in this workspace; /sessions all lists every workspace's]")
        return None
    options = [{"optionId": str(m["id"]), "name": f"{m['id']} · {visible(str(m.get('title') or ''), one_line=True)[:60]}"}
               for m in found]  # fmt: skip
    options.append({"optionId": CANCELLED, "name": "(keep this one)", "kind": "reject_once"})
    picked = await choose_option(options, "Resume which session?", hint=PICK_HINT)
    return None if picked == CANCELLED else picked


async def _compact(chat: Chat, arg: str) -> None:
    session = _session(chat)
    result = await chat.in_turn(session.compact(), activity="compacting")
    if result is None:
        chat.view.note("[compaction cancelled; the history is unchanged]", style="yellow")
    elif not result.get("compacted"):
        chat.view.note("[nothing to compact yet: the history is too short]")
    else:
        chat.view.note(
            f"[compacted · {tokens_short(result['tokensBefore'])} → {tokens_short(result['tokensAfter'])} tokens · "
            f"{result['messagesBefore']} → {result['messagesAfter']} messages]", style="green")  # fmt: skip


async def _cost(chat: Chat, arg: str) -> None:
    status = _session(chat).status()
    t = status["totals"]
    share = cache_share(t)
    lines = [
        f"requests       {t['requests']}",
        f"input          {t['inputTokens']} uncached · {t['cacheReadTokens']} cache read · "
        f"{t['cacheWriteTokens']} cache write",
        f"output         {t['outputTokens']}",
        "cache share    "
        + (f"{100 * share:.0f} % of prompt tokens read from the cache" if share is not None else "–"),
    ]
    cost = status.get("costEstimate")
    lines.append(f"cost           ${cost['amount']:.4f} (estimate)" if cost else
                 f"cost           unknown: no price for {status['model']}")  # fmt: skip
    ctx = status["context"]
    lines.append(f"context        {tokens_short(ctx['usedTokens'])} of {tokens_short(ctx['windowTokens'])} · "
                 f"compacts at {tokens_short(ctx['compressThresholdTokens'])} · {ctx['compactions']} compactions")  # fmt: skip
    chat.view.print(Text("\n".join(lines)))


async def _plan(chat: Chat, arg: str) -> None:
    todos = _session(chat).todos()["todos"]
    if not todos:
        chat.view.note("[no plan yet: the agent writes one with todo_write]")
        return
    chat.view.show_plan([(str(t["status"]), str(t["content"])) for t in todos])


async def _mode(chat: Chat, arg: str) -> None:
    session = _session(chat)
    if not arg:
        chat.view.note(f"[mode · {session.mode} · one of {', '.join(MODE_IDS)}]")
        return
    try:
        session.set_mode(arg)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


async def _model(chat: Chat, arg: str) -> None:
    session = _session(chat)
    if not arg:
        chat.view.note(
            f"[model · {model_label(session.provider_name, session.model)} · /model NAME continues with another]"
        )
        return
    if session.busy:
        raise UsageError("a turn is running; change the model when it has ended")
    if len(arg.split()) != 1 or visible(arg, one_line=True) != arg:
        raise UsageError(f"/model NAME: a model name is one word (claude-sonnet-4-6, gpt-4.1), not "
                         f"'{visible(arg, one_line=True)}'; the model is unchanged")  # fmt: skip
    chat.overrides["model"] = arg
    kept = not chat.created or session.totals.requests  # a session that never reached the model is not kept
    await chat.open(session.id if kept else None, again=True)


async def _quit(chat: Chat, arg: str) -> None:
    chat.quit = True


HANDLERS: dict[str, Handler] = {
    "/help": _help, "/new": _new, "/sessions": _list, "/resume": _resume, "/compact": _compact, "/cost": _cost,
    "/plan": _plan, "/mode": _mode, "/model": _model, "/quit": _quit, "/rewind": rewind_command,
    "/fork": fork_command,
}  # fmt: skip
