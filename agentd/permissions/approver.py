"""Approvers: who answers an "ask" of the permission gate (CONTRACTS.md §5; PROTOCOL.md §3.1, §6.10).

Owns: `ApprovalRequest`, `ApprovalOutcome`, the `Approver` protocol and three approvers:
- `PresetApprover`: `agentd run --yes` / `--allow TOOL` answer in advance (decided_by `user`, rule `--yes`
  or `--allow <tool>`, shown as `auto-answered by --yes`), anything else goes to a fallback approver.
- `TerminalApprover`: asks on the controlling terminal (`/dev/tty`); no terminal -> deny (`timeout`,
  "no terminal to ask"). Blocking tty IO runs in a thread and stops at the request's timeout.
- `QueueApprover`: a test double answering from a queue, or never (until `answer()` is called).
The editor approver (requestPermission over LSP/ACP) lives in the adapters, which implement `Approver`.

Imports agentd.tools.base (`Preview`) and agentd.permissions.rules (for `--allow` patterns); never pygls,
lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agentd.permissions.rules import Rule, names, parse_target, subject_of, verdicts
from agentd.protocol.approvals import permission_options
from agentd.tools.base import Preview, visible

ApprovalOption = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"]
OutcomeBy = Literal["user", "timeout", "cancel"]

NO_TERMINAL = "no terminal to ask"
DIFF_MAX_LINES = 200


def timed_out_text(timeout_s: float) -> str:
    """`timed out after <N> s` (CONTRACTS.md §11), `N` without a trailing `.0`."""
    return f"timed out after {timeout_s:g} s"


@dataclass(frozen=True)
class ApprovalRequest:
    """One approval question. `timeout_s`: `permissions.approval_timeout_s`, seconds; `raw_input`: the
    tool_use input as the model gave it (for the editor's `rawInput`); `options`: the answers offered
    (PROTOCOL.md §6.10, built by the gate; empty: the four base options); `protected`: the protected-path
    class that forced this question (issue 12 §3), which only a person may answer; `kind`: the tool's ACP
    kind (`read`, `edit`, `execute`, ...)."""

    session_id: str
    tool_use_id: str
    tool_name: str
    title: str
    preview: Preview
    timeout_s: float = 120.0
    raw_input: Any = None
    options: tuple[dict[str, Any], ...] = ()
    protected: str | None = None
    kind: str = "other"


@dataclass(frozen=True)
class ApprovalOutcome:
    """An answer. `option`: the ACP option id (or `cancelled`); `reason`: the user's rejection reason;
    `decided_by`: `user`, or `timeout` / `cancel` when nobody answered; `rule`: the preset flag that
    answered (`--yes`, `--allow run_command`); `detail`: why there was no answer (`no terminal to ask`);
    `note`: how the front end describes who answered, shown in the `[Permission]` line instead of
    `decided_by` (`auto-answered by --yes`; never audited: the audit keeps `decided_by` and `rule`).
    `option_id`: the exact option picked when it is not the kind's own id (`allow_always_prefix`)."""

    option: ApprovalOption
    reason: str | None = None
    decided_by: OutcomeBy = "user"
    rule: str | None = None
    detail: str | None = None
    note: str | None = None
    option_id: str | None = None


def offered_options(req: ApprovalRequest) -> list[dict[str, Any]]:
    """The options a front end shows, in order: the ones the gate offers (the command prefix, no "always"
    for a protected path; PROTOCOL.md §6.10), else the four base options; each `name` escaped as every
    approval text is (H20: a prefix comes from the model's command)."""
    offered = [dict(o) for o in req.options] or permission_options(req.tool_name)
    return [{**o, "name": visible(str(o.get("name", "")), one_line=True)} for o in offered]


class Approver(Protocol):
    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        """Ask and wait for the answer. May be cancelled (timeout, cancelled turn)."""
        ...


class PresetApprover:
    """`--yes` answers every approval with allow; `--allow TOOL` answers approvals for TOOL; the rest go
    to `fallback` (e.g. the `TerminalApprover`). A question about a protected path always goes to the
    fallback: `--yes` never writes agentd's config, its data dir, `.git/` or a shell start-up file."""

    def __init__(self, yes: bool, allow: Iterable[str], fallback: Approver) -> None:
        self.yes = yes
        self.allow = frozenset(allow)
        self.fallback = fallback

    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        if req.protected is not None:  # a protected path is asked every time, of a person (issue 12 §3)
            return await self.fallback.request(req)
        if self.yes:
            return ApprovalOutcome(option="allow_once", rule="--yes", note="auto-answered by --yes")
        target = self._allowed_by(req)
        if target is not None:
            rule = f"--allow {target}"
            return ApprovalOutcome(option="allow_once", rule=rule, note=f"auto-answered by {rule}")
        return await self.fallback.request(req)

    def _allowed_by(self, req: ApprovalRequest) -> str | None:
        """The `--allow` target that covers the whole call: the tool's name, or patterns (every part of a
        command, as a rule would: `--allow 'run_command(npm test)'`)."""
        if req.tool_name in self.allow:
            return req.tool_name
        mine = [t for t in sorted(self.allow) if names(parse_target(t)[0], req.tool_name)]
        if not mine:
            return None
        p = req.preview
        roots = [Path(p.cwd)] if p.cwd else []
        subject = subject_of(req.tool_name, command=p.command, path=p.path, roots=roots)
        parts = verdicts(subject, [Rule(tool=t, action="allow") for t in mine])
        return ", ".join(mine) if all(v.action == "allow" for v in parts) else None


@dataclass
class QueueApprover:
    """Test double: answers from `answers` in order (an option id or a whole `ApprovalOutcome`). With the
    queue empty it waits until `answer()` is called (or forever: a user who never answers).
    `requests` records every question; `asked` is set at each question."""

    answers: deque[ApprovalOutcome | ApprovalOption] = field(default_factory=deque)
    requests: list[ApprovalRequest] = field(default_factory=list)
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    _waiting: list[asyncio.Future[ApprovalOutcome]] = field(default_factory=list, init=False, repr=False)

    @classmethod
    def of(cls, *answers: ApprovalOutcome | ApprovalOption) -> QueueApprover:
        return cls(answers=deque(answers))

    def answer(self, outcome: ApprovalOutcome | ApprovalOption) -> None:
        """Answer the oldest waiting question (a late answer to a cancelled one is dropped)."""
        while self._waiting:
            fut = self._waiting.pop(0)
            if not fut.done():
                fut.set_result(_outcome(outcome))
                return

    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        self.requests.append(req)
        self.asked.set()
        if self.answers:
            return _outcome(self.answers.popleft())
        fut: asyncio.Future[ApprovalOutcome] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        return await fut


def _outcome(value: ApprovalOutcome | ApprovalOption) -> ApprovalOutcome:
    return value if isinstance(value, ApprovalOutcome) else ApprovalOutcome(option=value)


def _open_tty(path: str) -> int:
    """Open the controlling terminal for reading and writing; raises OSError when there is none."""
    return os.open(path, os.O_RDWR | os.O_NOCTTY)


_ANSWERS: dict[str, ApprovalOption] = {
    "o": "allow_once",
    "once": "allow_once",
    "a": "allow_always",
    "always": "allow_always",
    "d": "reject_once",
    "deny": "reject_once",
    # the terminal client's keys (docs/terminal.md: y once, a always, n reject) mean the same here
    "y": "allow_once",
    "yes": "allow_once",
    "n": "reject_once",
    "no": "reject_once",
}


def render_prompt(req: ApprovalRequest) -> str:
    """The question shown on the terminal: the title, then the unified diff (first 200 lines) or the
    command, its cwd and where it runs (`Preview.sandbox_note`), then the choices."""
    p = req.preview
    lines = [f"[agentd] {req.title}"]
    if req.protected is not None:  # why --yes, --allow and rules did not answer (issue 12 §3)
        lines.append(
            f"(a protected path, {req.protected}: asked every time; --yes, --allow and rules never answer it)"
        )
    if p.diff:
        diff_lines = p.diff.splitlines()
        lines.extend(diff_lines[:DIFF_MAX_LINES])
        if len(diff_lines) > DIFF_MAX_LINES:
            lines.append(f"... ({len(diff_lines) - DIFF_MAX_LINES} more diff lines)")
    elif p.command is not None:
        lines.append(f"$ {visible(p.command, one_line=True)}")
        lines.append(f"(cwd {p.cwd})" if p.cwd else "")
        note = p.sandbox_note()  # where it runs: in the sandbox, or outside it (new-user R2)
        lines.append(f"({note})" if note else "")
    elif p.path:
        lines.append(p.path)
    else:
        lines.append(p.summary)
    text = "\n".join(line for line in lines if line)
    always = next((o for o in req.options if o.get("kind") == "allow_always"), None)
    if req.options and always is None:
        choices = "\nAllow? [o]nce / [d]eny: "
    elif always is not None and always.get("optionId") != "allow_always":
        choices = f"\nAllow? [o]nce / [a]lways ({always.get('name', '')}) / [d]eny: "
    else:
        choices = "\nAllow? [o]nce / [a]lways / [d]eny: "
    # control characters shown as \xNN: a command must not hide what it does (`cmd #\r\x1b[K$ ls`)
    return visible(text) + visible(choices)


class TerminalApprover:
    """Asks on `/dev/tty` (CLI mode). `open_tty(path) -> fd` is injectable; an `OSError` from it means
    there is no terminal: deny with decided_by `timeout` and detail `no terminal to ask`. The question
    waits at most `req.timeout_s` seconds (then `timed out after <N> s`); EOF counts as no terminal.
    `poll_s`: how often the reading thread checks whether the request was cancelled."""

    def __init__(
        self, tty_path: str = "/dev/tty", open_tty: Callable[[str], int] | None = None, poll_s: float = 0.2
    ) -> None:
        self.tty_path = tty_path
        self._open = open_tty
        self.poll_s = poll_s

    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        opener = self._open or _open_tty
        try:
            fd = opener(self.tty_path)
        except OSError:
            return ApprovalOutcome(option="reject_once", decided_by="timeout", detail=NO_TERMINAL)
        stop = threading.Event()
        try:
            return await asyncio.to_thread(self._ask, fd, req, stop)
        finally:
            stop.set()  # cancelled or done: the thread stops within `poll_s` and closes the tty

    def _ask(self, fd: int, req: ApprovalRequest, stop: threading.Event) -> ApprovalOutcome:
        try:
            return self._dialog(fd, req, stop)
        except OSError:
            return ApprovalOutcome(option="reject_once", decided_by="timeout", detail=NO_TERMINAL)
        finally:
            os.close(fd)

    def _dialog(self, fd: int, req: ApprovalRequest, stop: threading.Event) -> ApprovalOutcome:
        deadline = time.monotonic() + req.timeout_s
        _write_all(fd, "\n" + render_prompt(req))
        buf = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _write_all(fd, "\n[agentd] no answer; denied\n")
                return ApprovalOutcome(
                    option="reject_once", decided_by="timeout", detail=timed_out_text(req.timeout_s)
                )
            if stop.is_set():
                return ApprovalOutcome(option="cancelled", decided_by="cancel")
            ready, _, _ = select.select([fd], [], [], min(self.poll_s, remaining))
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return ApprovalOutcome(option="reject_once", decided_by="timeout", detail=NO_TERMINAL)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                option = _ANSWERS.get(line.decode("utf-8", "replace").strip().lower())
                offered = {o.get("kind") for o in req.options} or {option}
                if option is not None and option in offered:
                    return ApprovalOutcome(option=option)
                _write_all(fd, "Please answer o (or y), a or d (or n): ")


def _write_all(fd: int, text: str) -> None:
    data = text.encode("utf-8", "replace")
    while data:
        written = os.write(fd, data)
        data = data[written:]
