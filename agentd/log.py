"""Logging: stderr or a log file, never stdout (CONTRACTS.md §10).

Owns: `setup_logging(verbose, log_file)` and `LineWriter`, the sink of the operator lines
(`[turn · …]`, `[Permission] …`, `[Hook] …`, `[Tool] …`, `[compressed history · …]`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

LineWriter = Callable[[str], None]


def stderr_line(line: str) -> None:
    """Write one operator line to stderr and flush."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def setup_logging(verbose: int = 0, log_file: str | None = None) -> None:
    """Route the `agentd` logger to `log_file` (mode 0600) or stderr. `-v` = INFO, `-vv` = DEBUG."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler: logging.Handler
    if log_file:
        path = Path(log_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        handler = logging.FileHandler(path, encoding="utf-8")
        level = min(level, logging.DEBUG) if verbose else logging.INFO
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("agentd")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
