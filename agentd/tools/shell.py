"""`run_command`: a shell command in the workspace (CONTRACTS.md §5, TESTING.md §4.5 and §4.6; issue 12).

Owns: `RunCommand`, its input model and texts, the head+tail output capture, and process-group cleanup.
The command runs as `bash -c` (`/bin/sh -c` without bash) in its own session and process group, with the
workspace root as cwd, stdin from /dev/null, stdout and stderr merged, and `ctx.env` without API keys and
credential variables (`agentd.sandbox.env`). `ctx.launcher` (`agentd.sandbox.Launcher`) wraps it: in the
sandbox (bubblewrap / sandbox-exec), or under the process-lifetime helper, so every process the command
starts dies with it, also those that leave its group (`setsid`, double forks) and also when agentd dies.
On timeout, on asyncio cancellation, and for background jobs left when the shell exits, the whole group
gets SIGTERM, then SIGKILL 0.5 s later. In the sandbox, protected paths inside the workspace stay
unwritable (`agentd.sandbox.guard`); the result names what the guard moved away, and a write refused on
a read-only path says what is protected and how to ask to write it (`unsandboxed`). Path rules cannot see inside a command (B10): containment is the
permission gate's "ask" or the sandbox, not this module's. Imports only the standard library, pydantic,
`agentd.sandbox` and `agentd.tools.base`; never pygls, lsprotocol, acp or `agentd.adapters`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from typing import IO, Any

from pydantic import Field

from agentd.sandbox import Launch, Launcher, SandboxPolicy, SandboxRefused, detect
from agentd.sandbox.env import child_env
from agentd.sandbox.guard import stand_in_note
from agentd.tools.base import Preview, StrictInput, Tool, ToolContext, ToolOutput

KILL_GRACE_S = 0.5
_POLL_S = 0.02
_DRAIN_S = 2.0
_CHUNK = 65536


def shell_path() -> str:
    """`/bin/bash` when present, else `/bin/sh`."""
    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def launcher_of(ctx: ToolContext) -> Launcher:
    """The session's launcher, else one without a sandbox (the helper still guards the command)."""
    if isinstance(ctx.launcher, Launcher):
        return ctx.launcher
    return Launcher("off", detect(), SandboxPolicy(writable=tuple(ctx.roots)))


class OutputCapture:
    """Keeps the first `limit` bytes and the last `limit - limit // 2` bytes after them; counts all bytes.

    `render()` is the whole output when it fits in `limit` bytes, else head (`limit // 2` bytes) + the
    truncation marker of CONTRACTS.md §11 + tail, both cut back to UTF-8 boundaries. Memory is O(limit).
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            keep = self.limit - self.limit // 2
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - keep)]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def render(self) -> str:
        if not self.truncated:
            return self.head.decode("utf-8", "replace")
        half = self.limit // 2
        head = _head_boundary(bytes(self.head[:half]))
        tail = _tail_boundary((bytes(self.head[half:]) + bytes(self.tail))[-(self.limit - half) :])
        omitted = self.total - len(head) - len(tail)
        marker = f"\n[... {omitted} of {self.total} bytes omitted ...]\n"
        return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")


def _head_boundary(data: bytes) -> bytes:
    """Drop a UTF-8 sequence cut at the end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:
            need = 2 if byte >= 0xC0 else 1
            need = 3 if byte >= 0xE0 else need
            need = 4 if byte >= 0xF0 else need
            return data[:-back] if need > back else data
    return data


def _tail_boundary(data: bytes) -> bytes:
    """Drop continuation bytes at the start (the rest of a sequence cut off)."""
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def kill_group(
    pgid: int, proc: subprocess.Popen[bytes] | None = None, grace_s: float = KILL_GRACE_S
) -> None:
    """SIGTERM the process group `pgid`, then SIGKILL it after `grace_s` seconds if any member is left.

    `proc` (the group leader, our child) is reaped as soon as it exits, so its zombie does not count as a
    member. The SIGKILL is sent even if this coroutine is cancelled during the grace period.
    """
    if not _signal_group(pgid, signal.SIGTERM):
        return
    alive = True
    try:
        deadline = time.monotonic() + grace_s
        while alive and time.monotonic() < deadline:
            await asyncio.sleep(_POLL_S)
            if proc is not None:
                proc.poll()
            alive = _signal_group(pgid, 0)
    finally:
        if alive:
            _signal_group(pgid, signal.SIGKILL)


class _PipeReader:
    """Feeds the child's merged stdout/stderr pipe into an `OutputCapture` from the event loop."""

    def __init__(self, pipe: IO[bytes], capture: OutputCapture) -> None:
        self._loop = asyncio.get_running_loop()
        self._pipe, self._fd, self._capture = pipe, pipe.fileno(), capture
        self.eof: asyncio.Future[None] = self._loop.create_future()
        os.set_blocking(self._fd, False)
        self._loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            chunk = os.read(self._fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._capture.feed(chunk)
        else:
            self.close()

    async def drain(self, timeout_s: float) -> None:
        """Wait for EOF up to `timeout_s` (a process that left the group may hold the pipe), then close."""
        await asyncio.wait({self.eof}, timeout=timeout_s)
        self.close()

    def close(self) -> None:
        if not self.eof.done():
            self._loop.remove_reader(self._fd)
            self._pipe.close()
            self.eof.set_result(None)


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def wait_exit(proc: subprocess.Popen[bytes]) -> int:
    """Wait until `proc` exits (not until its pipe closes: background jobs may hold it); reap it and
    return its return code (negative: killed by that signal). Uses a pidfd on Linux, else a thread."""
    if proc.poll() is not None:
        return proc.wait()
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return await asyncio.to_thread(proc.wait)
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    try:
        loop.add_reader(pidfd, _set_done, exited)
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
    finally:
        os.close(pidfd)
    return proc.wait()


class RunCommandInput(StrictInput):
    command: str = Field(
        min_length=1, description="Shell command line, run by bash -c in the workspace root directory."
    )
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds before the command is killed. Default and maximum: the configured limit.",
    )
    network: bool = Field(
        False,
        description="The command needs the network (package installs, git fetch, curl). In the sandbox the"
        " network is off otherwise; asking for it may need the user's approval.",
    )
    unsandboxed: bool = Field(
        False,
        description="Run outside the sandbox, with the user's full access. Only when the sandbox blocked a"
        " needed write outside the workspace; the user is always asked.",
    )


class RunCommand(Tool):
    """`run_command`: one shell command; output head+tail within `ctx.output_max_bytes`, then an exit line."""

    name = "run_command"
    description = (
        "Run a shell command (bash -c) in the workspace root. stdin is empty; stdout and stderr are"
        " merged. The result is the output, then a last line `[exit code N]` or"
        " `[timed out after N s; process group killed]`. Long output keeps its beginning and end with"
        " `[... N of M bytes omitted ...]` between them. A command still running at the timeout is"
        " killed; background processes it started are killed when it ends, so do not start servers here."
    )
    terse_description = "Run a shell command in the workspace root; returns output and exit code."
    effect = "exec"
    kind = "execute"
    Input = RunCommandInput

    def title(self, args: Any) -> str:
        return f"Run `{args.command}`"

    def check(self, args: Any, ctx: ToolContext) -> None:
        """Raises `RootChanged` when the workspace root is no longer the directory the session pinned (H18):
        the command would run somewhere else."""
        ctx.workspace.verify()

    async def preview(self, args: Any, ctx: ToolContext) -> Preview:
        launcher = launcher_of(ctx)
        sandboxed = launcher.active and not args.unsandboxed
        escalation = None
        if launcher.active and args.unsandboxed:
            escalation = "outside the sandbox"
        elif sandboxed and args.network and not launcher.policy.network:
            escalation = "network"
        where = " in the sandbox" if sandboxed else ""
        extra = f" with {escalation}" if escalation == "network" else ""
        return Preview(
            summary=f"Run `{args.command}` in {ctx.root}{where}{extra}",
            command=args.command,
            cwd=str(ctx.root),
            sandboxed=sandboxed,
            escalation=escalation,
        )

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        """Raises CancelledError after killing the group when cancelled; never leaves a process behind."""
        ctx.workspace.verify()  # again: the approval may have taken minutes (raises RootChanged)
        timeout = min(args.timeout_s or ctx.run_timeout_s, ctx.run_timeout_s)
        capture = OutputCapture(ctx.output_max_bytes)
        shell = shell_path()
        if not os.access(shell, os.X_OK):  # before any wrapper (sandbox, helper) reports it less clearly
            err = FileNotFoundError(2, "No such file or directory", shell)
            return ToolOutput(
                content=f"run_command could not start: {err}", is_error=True, title=self.title(args)
            )
        launcher = launcher_of(ctx)
        try:
            launch = await _launch(launcher, [shell, "-c", args.command], ctx, args)
        except SandboxRefused as exc:
            return ToolOutput(content=str(exc), is_error=True, title=self.title(args))
        try:
            out = await self._run(args, ctx, launch, capture, timeout)
        finally:
            try:
                notes = await asyncio.to_thread(launch.finish)
            finally:
                if launch.tmpdir is not None:
                    shutil.rmtree(launch.tmpdir, ignore_errors=True)
        return _noted(out, launch, launcher, notes)

    async def _run(
        self, args: Any, ctx: ToolContext, launch: Launch, capture: OutputCapture, timeout: float
    ) -> ToolOutput:
        env = child_env(ctx.env, ctx.state.get("api_key_env"), ctx.state.get("pass_env", ()))
        if launch.tmpdir is not None:
            env["TMPDIR"] = str(launch.tmpdir)
        try:
            proc = subprocess.Popen(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=str(ctx.root),
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return ToolOutput(
                content=f"run_command could not start: {exc}", is_error=True, title=self.title(args)
            )
        assert proc.stdout is not None
        reader = _PipeReader(proc.stdout, capture)
        timed_out = False
        try:
            try:
                code = await asyncio.wait_for(wait_exit(proc), timeout)
            except TimeoutError:
                timed_out = True
            await kill_group(proc.pid, proc)  # after a timeout, and any background job left behind
            if timed_out:
                code = await self._reap(proc)
            await reader.drain(_DRAIN_S)
        except asyncio.CancelledError:
            await self._cancelled(proc)
            raise
        finally:
            reader.close()
        out = self._result(args, capture, code, timed_out, timeout)
        unsaved = ctx.editor.unsaved_paths() if ctx.editor is not None else []
        if unsaved:  # the command saw the disk, not the editor's buffers (CONTRACTS.md §11)
            out.content += f"\n[not saved to disk yet: {', '.join(unsaved)}]"
        return out

    @staticmethod
    async def _reap(proc: subprocess.Popen[bytes]) -> int:
        try:
            return await asyncio.wait_for(wait_exit(proc), _DRAIN_S)
        except TimeoutError:
            proc.kill()
            return await wait_exit(proc)

    @staticmethod
    async def _cancelled(proc: subprocess.Popen[bytes]) -> None:
        """Kill the group on cancellation; the final SIGKILL is sent even if cancelled again."""
        try:
            await kill_group(proc.pid, proc)
            await asyncio.wait_for(wait_exit(proc), _DRAIN_S)
        except (TimeoutError, asyncio.CancelledError):
            _signal_group(proc.pid, signal.SIGKILL)

    def _result(
        self, args: Any, capture: OutputCapture, code: int, timed_out: bool, timeout: float
    ) -> ToolOutput:
        out = capture.render()
        if timed_out:
            last = f"[timed out after {timeout:g} s; process group killed]"
        elif code < 0:
            last = f"[killed by signal {_signal_name(-code)}]"
        else:
            last = f"[exit code {code}]"
        sep = "\n" if out and not out.endswith("\n") else ""
        return ToolOutput(
            content=f"{out}{sep}{last}",
            is_error=timed_out or code != 0,
            title=self.title(args),
            raw_output={
                "exitCode": code,
                "bytes": capture.total,
                "timedOut": timed_out,
                "truncated": capture.truncated,
            },
        )


async def _launch(launcher: Launcher, argv: list[str], ctx: ToolContext, args: Any) -> Launch:
    """`launcher.launch` in a thread (the sandbox's guard walks the workspace: agentd.sandbox.guard). If
    the call is cancelled meanwhile, the launch still completes there; its stand-ins are then removed."""
    call = asyncio.ensure_future(
        asyncio.to_thread(launcher.launch, argv, ctx.root, network=args.network, unsandboxed=args.unsandboxed)
    )
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        call.add_done_callback(_abandon)
        raise


def _abandon(call: asyncio.Future[Launch]) -> None:
    if not call.cancelled() and call.exception() is None:
        call.result().finish(ran=False)
        if call.result().tmpdir is not None:
            shutil.rmtree(str(call.result().tmpdir), ignore_errors=True)


def _noted(out: ToolOutput, launch: Launch, launcher: Launcher, notes: list[str]) -> ToolOutput:
    """The result with the sandbox's lines: protected paths the command created and agentd moved away
    (the result is then an error), or, for a sandboxed command that met a read-only path, what is
    protected and how to ask to write it (docs/security.md, "Protected paths in the sandbox")."""
    if not notes and launch.sandboxed and "Read-only file system" in out.content:
        notes = [launcher.readonly_hint()]
    shown = stand_in_note(out.content, launch.guard.stand_ins) if launch.guard is not None else None
    notes = [*notes, shown] if shown else notes
    if notes:
        out.content += "\n" + "\n".join(notes)
        out.is_error = out.is_error or (launch.guard is not None and launch.guard.moved > 0)
    return out


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)
