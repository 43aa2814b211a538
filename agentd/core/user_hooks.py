"""User hooks: commands the user configures to run at four points of a turn (issue 12 §4; docs/hooks.md).

Owns: `HookSpec` (one configured hook), `HookAnswer`, `UserHooks` (the hooks of one session) and
`run_hook()`. Each hook gets the event as one JSON object on stdin and may answer on stdout:
`{"decision": "allow" | "deny" | "ask", "reason": "..."}` (only `before_tool` decides; the other points
observe). Exit code 0 with empty stdout: no opinion. Exit code 2: deny, the reason is stderr. Any other
exit code, an answer that is not that JSON, a crash or the timeout (`timeout_s`, then the hook's process
group and everything it started are killed): the hook failed, which counts as `ask` (a person decides).
A hook's `allow` only waives an ask; it never overrides a deny rule, a reject grant, `readOnly` or a
protected path (the gate's order, CONTRACTS.md §5). Hooks run with the user's rights, outside the sandbox
(they are the user's own commands), under the process-lifetime helper; hooks defined by a workspace run
only once the user trusts it (agentd.permissions.trust). Must not import pygls, lsprotocol, acp or
adapters.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentd.permissions.rules import Rule, parse_target, subject_of, verdicts
from agentd.sandbox.env import child_env
from agentd.sandbox.launcher import REAPER

HookPoint = Literal["before_tool", "after_tool", "before_model", "turn_end"]
POINTS: tuple[HookPoint, ...] = ("before_tool", "after_tool", "before_model", "turn_end")
OUTPUT_MAX_BYTES = 65536
KILL_GRACE_S = 0.5


@dataclass(frozen=True)
class HookSpec:
    """`name` (shown in logs and the audit log), `command` (run by `/bin/sh -c`), `matcher` (a tool name
    or a rule pattern such as `run_command(git push *)`; None or `*`: every tool), `timeout_s`, `origin`
    (`user` or the workspace path)."""

    point: HookPoint
    name: str
    command: str
    matcher: str | None = None
    timeout_s: float = 10.0
    origin: str = "user"

    def matches(self, tool: str | None, preview: Any = None, roots: Sequence[Path] = ()) -> bool:
        if self.matcher in (None, "", "*") or tool is None:
            return True
        name, pattern = parse_target(self.matcher)
        if name != tool:
            return False
        if pattern is None:
            return True
        subject = subject_of(
            tool,
            command=getattr(preview, "command", None),
            path=getattr(preview, "path", None),
            roots=list(roots),
        )
        return any(v.source == "rule" for v in verdicts(subject, [Rule(tool=self.matcher, action="ask")]))


@dataclass(frozen=True)
class HookAnswer:
    """What a hook said: `decision` (`allow`, `deny`, `ask`, or None for no opinion), `reason`, and
    `failed` (a crash, a bad answer or the timeout: counted as `ask`)."""

    hook: str
    decision: Literal["allow", "deny", "ask"] | None
    reason: str = ""
    failed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"hook": self.hook, "decision": self.decision, "reason": self.reason, "failed": self.failed}


async def run_hook(spec: HookSpec, event: Mapping[str, Any], cwd: Path, env: Mapping[str, str]) -> HookAnswer:
    """Run one hook with `event` on stdin; its answer (see the module docstring). Never raises but
    CancelledError (the hook is killed first)."""
    data = json.dumps(event, ensure_ascii=False, default=str).encode("utf-8")
    argv = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "--", "/bin/sh", "-c", spec.command]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd),
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        return HookAnswer(spec.name, "ask", f"hook {spec.name} could not start: {exc}", failed=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(data), spec.timeout_s)
    except TimeoutError:
        await _kill(proc)
        return HookAnswer(
            spec.name, "ask", f"hook {spec.name} timed out after {spec.timeout_s:g} s", failed=True
        )
    except asyncio.CancelledError:
        await _kill(proc)
        raise
    return _answer(spec.name, proc.returncode or 0, out[:OUTPUT_MAX_BYTES], err[:OUTPUT_MAX_BYTES])


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the hook's group (the helper then kills what it started), SIGKILL after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
            break
        except TimeoutError:
            continue


def _answer(name: str, code: int, out: bytes, err: bytes) -> HookAnswer:
    stderr = err.decode("utf-8", "replace").strip()
    if code == 2:
        return HookAnswer(name, "deny", stderr.splitlines()[0] if stderr else f"hook {name} denied the call")
    if code != 0:
        why = f": {stderr.splitlines()[-1]}" if stderr else ""
        return HookAnswer(name, "ask", f"hook {name} failed (exit code {code}){why}", failed=True)
    text = out.decode("utf-8", "replace").strip()
    if not text:
        return HookAnswer(name, None)
    try:
        doc = json.loads(text)
    except ValueError:
        return HookAnswer(name, "ask", f"hook {name} answered something that is not JSON", failed=True)
    decision = doc.get("decision") if isinstance(doc, dict) else None
    reason = doc.get("reason") if isinstance(doc, dict) else None
    if decision not in ("allow", "deny", "ask", None):
        return HookAnswer(name, "ask", f"hook {name} answered an unknown decision {decision!r}", failed=True)
    return HookAnswer(name, decision, str(reason) if reason is not None else "")


@dataclass
class UserHooks:
    """The user hooks of one session: `specs` in configuration order, the workspace `root` (their cwd),
    the environment (`environ` minus API keys) and the line writer for `[Hook]` lines."""

    specs: list[HookSpec]
    root: Path
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    api_key_env: str | None = None
    write: Callable[[str], None] = lambda _line: None
    session_id: str = ""
    running: set[asyncio.Task[list[HookAnswer]]] = field(default_factory=set)
    untrusted: str | None = None  # why the workspace's own hooks and servers do not run (agentd.core.factory)
    ignored: list[str] = field(default_factory=list)  # what does not run for want of trust: hooks, mcp

    def trust_json(self) -> dict[str, Any]:
        """The `trust` of the session status: `{"trusted": false, "ignored": ["hooks", "mcp"], "notice":
        ...}` when the workspace defines hooks or MCP servers the user has not trusted, else
        `{"trusted": true, "ignored": []}`."""
        if self.untrusted is None:
            return {"trusted": True, "ignored": []}
        return {"trusted": False, "ignored": list(self.ignored), "notice": self.untrusted}

    def register(self, hooks: Any) -> None:
        """Attach the observing points to the session's in-process `Hooks` (agentd.core.hooks): each runs
        its user hooks in the background (`drain()` waits for them), so the turn never waits on them."""
        if self.of("after_tool"):
            hooks.add_after_tool("user hooks", self._after_tool)
        if self.of("before_model"):
            hooks.add_before_model("user hooks", self._before_model)
        if self.of("turn_end"):
            hooks.add_on_turn_end("user hooks", self._turn_end)

    def _after_tool(self, tool: str, output: Any) -> None:
        text = str(getattr(output, "content", ""))[:OUTPUT_MAX_BYTES]
        event = {"event": "after_tool", "sessionId": self.session_id, "tool": tool,
                 "isError": bool(getattr(output, "is_error", False)), "output": text}  # fmt: skip
        self.schedule("after_tool", event, tool)

    def _before_model(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.schedule(
            "before_model", {"event": "before_model", "sessionId": self.session_id, "messages": len(messages)}
        )
        return messages

    def _turn_end(self, stop_reason: str) -> None:
        self.schedule(
            "turn_end", {"event": "turn_end", "sessionId": self.session_id, "stopReason": stop_reason}
        )

    def schedule(self, point: HookPoint, event: Mapping[str, Any], tool: str | None = None) -> None:
        """Run an observing point's hooks in the background of the running event loop."""
        try:
            task = asyncio.get_running_loop().create_task(self.observe(point, event, tool))
        except RuntimeError:
            return  # no event loop (a replay): nothing to observe
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def drain(self) -> None:
        """Wait for the observing hooks still running."""
        while self.running:
            await asyncio.gather(*list(self.running), return_exceptions=True)

    def of(self, point: HookPoint) -> list[HookSpec]:
        return [s for s in self.specs if s.point == point]

    async def before_tool(self, event: Mapping[str, Any], tool: str, preview: Any) -> list[HookAnswer]:
        """Every matching `before_tool` hook's answer, in order; a `deny` stops the rest."""
        answers: list[HookAnswer] = []
        for spec in self.of("before_tool"):
            if not spec.matches(tool, preview, [self.root]):
                continue
            answer = await run_hook(spec, event, self.root, self._env())
            self._line("before_tool", answer, tool)
            answers.append(answer)
            if answer.decision == "deny":
                break
        return answers

    async def observe(
        self, point: HookPoint, event: Mapping[str, Any], tool: str | None = None
    ) -> list[HookAnswer]:
        """Run the hooks of an observing point (`after_tool`, `before_model`, `turn_end`); their answers are
        logged, never obeyed."""
        answers = []
        for spec in self.of(point):
            if spec.matches(tool):
                answer = await run_hook(spec, event, self.root, self._env())
                self._line(point, answer, tool)
                answers.append(answer)
        return answers

    def _env(self) -> dict[str, str]:
        return {**child_env(self.environ, self.api_key_env), "AGENTD_HOOK": "1"}

    def _line(self, point: str, answer: HookAnswer, tool: str | None) -> None:
        what = answer.decision or "no opinion"
        on = f" {tool}" if tool else ""
        reason = f": {answer.reason}" if answer.reason else ""
        self.write(f"[Hook] {point} {answer.hook}{on} -> {what}{reason}")
