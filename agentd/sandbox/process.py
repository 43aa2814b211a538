"""agentd's own process: not readable by the commands it runs when there is no sandbox (issue 12 §1).

Owns: `harden_process()` and `is_dumpable()`. A non-dumpable process (Linux `PR_SET_DUMPABLE` 0) has its
`/proc/<pid>/environ`, `mem` and friends owned by root: other processes of the same user, commands run
without the sandbox included, cannot read the API key from its environment or attach a debugger. Root
still can. Imports only the standard library.
"""

from __future__ import annotations

import ctypes
import sys

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def _prctl(option: int, value: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(option, value, 0, 0, 0))


def harden_process() -> bool:
    """Make this process non-dumpable (Linux only). Returns True when it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return _prctl(PR_SET_DUMPABLE, 0) == 0
    except (OSError, AttributeError):
        return False


def is_dumpable() -> bool:
    """False when `harden_process()` took effect (always True off Linux: the flag does not exist there)."""
    if not sys.platform.startswith("linux"):
        return True
    try:
        return _prctl(PR_GET_DUMPABLE, 0) != 0
    except (OSError, AttributeError):
        return True
