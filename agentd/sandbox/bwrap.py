"""The Linux backend: bubblewrap (`bwrap`, the Debian/Fedora/Arch package `bubblewrap`).

Owns: `bwrap_argv()` (a `SandboxPolicy` as bwrap arguments), `via_args_file()` (long options through
`--args FD`) and `probe()` (does bwrap work here?).
Every namespace is new (`--unshare-all`: user, pid, net, ipc, uts, cgroup), so the command sees its own
`/proc` with its own processes only (never agentd's `/proc/<pid>/environ`) and no network but its own
loopback; `--share-net` gives it agentd's network. `--die-with-parent` and the pid namespace make every
process it starts die with it: when the outer bwrap dies (SIGTERM or SIGKILL from agentd, or agentd's own
death), the namespace's init dies and the kernel kills everything in it, `setsid` and double forks
included. `--cap-drop ALL`: bwrap run as root keeps every capability otherwise, and root with
CAP_SYS_ADMIN can unmount the empty folders that hide the data dir. `--new-session`: no controlling
terminal (no TIOCSTI injection). Mount order: `/` read-only, private `/tmp`, `/var/tmp`, `/run` (which
also hides the sockets of docker, D-Bus, systemd and ssh-agent), the policy's `visible` paths that lie in
them bound back read-only (the program's own installation, `sandbox.readable`: never a private folder
itself), the writable roots (a workspace under `/tmp` included), the hidden paths, then the read-only
paths inside the roots (every protected path there: `agentd.sandbox.guard` finds them and makes empty
stand-ins for the absent ones). Imports only the standard library and `agentd.sandbox.policy`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from agentd.sandbox.policy import SandboxPolicy

PRIVATE_DIRS = ("/tmp", "/var/tmp", "/run", "/var/run")
RESOLVER_DIRS = ("/run/systemd/resolve", "/run/resolvconf", "/run/NetworkManager")
PROBE_TIMEOUT_S = 10.0
INLINE_MAX = 64 * 1024  # bytes of options passed on the command line; more go through `--args` (S3)


def _private_dirs() -> list[str]:
    """The folders replaced by an empty tmpfs: those that exist as real folders (`/var/run` is usually a
    link to `/run`)."""
    return [d for d in PRIVATE_DIRS if os.path.isdir(d) and not os.path.islink(d)]


def _under_any(path: Path, tops: list[str] | list[Path]) -> bool:
    return any(path == Path(t) or Path(t) in path.parents for t in tops)


def _shown(policy: SandboxPolicy, private: list[str]) -> list[Path]:
    """The `visible` paths to bind back: strictly inside a private folder (never one itself, nor a
    folder holding one), not inside a writable root or another path already shown."""
    inside = [v for v in policy.visible if any(Path(d) in v.parents for d in private)]
    out: list[Path] = []
    for v in sorted(inside, key=lambda p: len(p.parts)):
        if not _under_any(v, [*policy.writable, *out]):
            out.append(v)
    return out


def _resolver_binds() -> list[str]:
    """With the network on, `/etc/resolv.conf` often points into `/run` (systemd-resolved): bind the
    resolver's folder back read-only, or name resolution fails."""
    target = Path(os.path.realpath("/etc/resolv.conf"))
    out: list[str] = []
    for d in RESOLVER_DIRS:
        if os.path.isdir(d) and (target == Path(d) or Path(d) in target.parents):
            out += ["--ro-bind", d, d]
    return out


def bwrap_argv(bwrap: str, policy: SandboxPolicy, cwd: Path, argv: list[str]) -> list[str]:
    """The full command line: `bwrap <options> -- <argv...>`, run with `cwd` as working directory."""
    out = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if policy.network:
        out.append("--share-net")
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    private = _private_dirs()
    for d in private:
        out += ["--tmpfs", d]
    if policy.network:
        out += _resolver_binds()
    shown = _shown(policy, private)
    for v in shown:
        out += ["--ro-bind", str(v), str(v)]
    for w in policy.writable:
        out += ["--bind", str(w), str(w)]
    for h in (*policy.hidden, *policy.hidden_files):
        if _under_any(h, private) and not _under_any(h, [*policy.writable, *shown]):
            continue  # already invisible
        out += ["--tmpfs", str(h)] if h in policy.hidden else ["--ro-bind", "/dev/null", str(h)]
    for r in policy.readonly:
        out += ["--ro-bind", str(r), str(r)]
    out += ["--chdir", str(cwd), "--", *argv]
    return out


def via_args_file(argv: list[str], folder: str | None = None) -> tuple[list[str], str | None]:
    """`argv` (from `bwrap_argv`) as it can be started whatever its size: when its options exceed
    `INLINE_MAX` bytes (hundreds of binds of long paths: the kernel refuses such a command line with
    E2BIG, break12 S3), they go NUL-separated into a 0600 file in `folder` and bwrap reads them from
    fd 3 (`--args 3`, opened and the file removed by a `/bin/sh` in front). Returns the command line and
    the file (None when inline; the caller removes it if the launch never ran)."""
    end = argv.index("--")
    options = argv[1:end]
    if sum(len(a) + 1 for a in options) <= INLINE_MAX:
        return argv, None
    fd, path = tempfile.mkstemp(prefix="agentd-bwrap-", dir=folder)
    with os.fdopen(fd, "wb") as f:
        f.write(b"".join(os.fsencode(a) + b"\0" for a in options))
    opener = 'exec 3<"$1" || exit 126; rm -f -- "$1"; shift; exec "$@"'
    return ["/bin/sh", "-c", opener, "sh", path, argv[0], "--args", "3", *argv[end:]], path


def version(bwrap: str) -> str | None:
    """`0.8.0` from `bwrap --version`, or None when it does not run."""
    try:
        done = subprocess.run([bwrap, "--version"], capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.decode("utf-8", "replace").split()
    return words[-1] if done.returncode == 0 and words else None


def probe(bwrap: str) -> str | None:
    """Run `true` in a sandbox with every namespace this backend uses. None when it works, else the
    first line bwrap printed (e.g. `bwrap: No permissions to create a new namespace`)."""
    policy = SandboxPolicy(writable=())
    argv = bwrap_argv(bwrap, policy, Path("/"), ["/bin/sh", "-c", "exit 0"])
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not run: {exc}"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else f"{bwrap} exited with code {done.returncode}"
