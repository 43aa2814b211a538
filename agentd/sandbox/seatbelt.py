"""The macOS backend: `sandbox-exec` with a Seatbelt profile (as Codex and Claude Code use on macOS).

Owns: `seatbelt_profile()` (a `SandboxPolicy` as an SBPL profile) and `seatbelt_argv()`. The profile
denies by default, then allows reading the file system, writing the writable roots and a private temporary
folder (passed as the `TMPDIR` parameter), running and signalling processes of the same sandbox, and the
mach/sysctl services ordinary tools need; it denies reads and writes of the hidden paths, writes of the
read-only paths inside the roots, and every network use unless `policy.network`. Protected paths
(`agentd.permissions.protected`) are denied by path, so also when they do not exist yet: the fixed ones
(`policy.guarded`) by name, every `ANYWHERE` name (`.git`, `.vscode`, ...) at any depth by a regex. macOS has no pid
namespace and no subreaper: processes that leave the process group are not tracked (named by
`agentd doctor`). Not exercised by the Linux CI: the profile text is unit-tested, the behaviour is not.
Imports only the standard library, `agentd.permissions.protected` and `agentd.sandbox.policy`.
"""

from __future__ import annotations

from pathlib import Path

from agentd.permissions.protected import ANYWHERE
from agentd.sandbox.policy import SandboxPolicy

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

_BASE = """(version 1)
(deny default)
(allow process-exec process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow mach-lookup)
(allow ipc-posix-shm ipc-posix-sem)
(allow pseudo-tty)
(allow file-ioctl)
(allow file-read*)
(allow file-write-data (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty"))
(allow file-write* (subpath (param "TMPDIR")))"""


def _quote(path: Path) -> str:
    """An SBPL string literal."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def seatbelt_profile(policy: SandboxPolicy) -> str:
    """The SBPL profile text. Later rules win in SBPL, so the denials come after the allowances."""
    lines = [_BASE]
    for w in policy.writable:
        lines.append(f"(allow file-write* (subpath {_quote(w)}))")
    if policy.network:
        lines.append("(allow network*)")
    for r in (*policy.readonly, *(p for p, _ in policy.guarded)):
        lines.append(f"(deny file-write* (subpath {_quote(r)}))")
    for name in ANYWHERE:  # names are letters and dots only: escaping the dots is enough
        pattern = "/" + name.replace(".", "\\.") + "(/|$)"
        lines.append(f'(deny file-write* (regex #"{pattern}"))')
    for h in policy.hidden:
        lines.append(f"(deny file-read* file-write* (subpath {_quote(h)}))")
    for h in policy.hidden_files:
        lines.append(f"(deny file-read* file-write* (literal {_quote(h)}))")
    return "\n".join(lines) + "\n"


def seatbelt_argv(policy: SandboxPolicy, tmpdir: Path, argv: list[str]) -> list[str]:
    """`sandbox-exec -p <profile> -D TMPDIR=<tmpdir> <argv...>`."""
    return [SANDBOX_EXEC, "-p", seatbelt_profile(policy), "-D", f"TMPDIR={tmpdir}", *argv]
