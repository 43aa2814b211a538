"""The process-lifetime helper for commands that run without a sandbox (Linux; issue 12).

Run as a file, not imported by agentd at run time: `python3 -I -S reaper.py <agentd pid> -- <argv...>`.
Standard library only (no agentd import, so it starts in ~20 ms with `-S`).

What it guarantees: every process the command starts dies with it, including those that left the process
group (`setsid`, `env -i setsid`, a double fork), when
- the command exits (background jobs it left are killed, then the helper exits with the command's status,
  re-raising the same signal when the command was killed by one),
- agentd sends the group SIGTERM (timeout, cancel, shutdown), and
- agentd dies, even by `kill -9` (`PR_SET_PDEATHSIG` delivers SIGTERM to the helper).
How: the helper is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every orphaned descendant becomes its
child; on exit it SIGKILLs its children until none is left (each death hands the dead one's children to
it). A process can leave only by being started by someone else (a system service, `systemd-run`): the
sandbox, not this helper, closes those doors.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
USAGE = "usage: reaper.py AGENTD_PID -- COMMAND [ARG...]"


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


def children(pid: int) -> list[int]:
    """The live children of `pid`: from /proc/<pid>/task/*/children, else by scanning /proc/*/stat."""
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(x) for x in f.read().split()]
        return found
    except OSError:
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                found.append(int(name))
    return found


def kill_descendants() -> int:
    """SIGKILL children until none is left (orphans keep arriving as their parents die). Returns how
    many processes were reaped."""
    me, reaped = os.getpid(), 0
    while True:
        for pid in children(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return reaped
        reaped += 1


def _spawn(argv: list[str]) -> int:
    """Start the command with default signal dispositions and an empty signal mask."""
    defaults = {signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, *STOP_SIGNALS}
    return os.posix_spawnp(argv[0], argv, os.environ, setsigdef=defaults, setsigmask=())


def _wait_for(child: int) -> int | None:
    """Wait for `child`, reaping orphans meanwhile; its wait status, or None when a stop signal came
    first. Signals are blocked and taken synchronously (`sigwaitinfo`): nothing interrupts the caller."""
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return None  # cannot happen while `child` is ours; treated as stopped
            if pid == 0:
                break
            if pid == child:
                return status
        info = signal.sigwaitinfo({signal.SIGCHLD, *STOP_SIGNALS})
        if info.si_signo != signal.SIGCHLD:
            return None


def _exit_like(status: int | None) -> None:
    """Exit with the command's code, or die by the signal that killed it (None: stopped by agentd)."""
    if status is None:
        os._exit(128 + signal.SIGTERM)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default action is not to terminate
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--" or not argv[1].isdigit():
        sys.stderr.write(USAGE + "\n")
        os._exit(2)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, *STOP_SIGNALS})
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(argv[1]):  # agentd died before PR_SET_PDEATHSIG took effect
        os._exit(128 + signal.SIGTERM)
    try:
        child = _spawn(argv[3:])
    except OSError as exc:
        sys.stderr.write(f"{argv[3]}: {exc.strerror}\n")
        os._exit(127)
    status = _wait_for(child)
    kill_descendants()
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv)
