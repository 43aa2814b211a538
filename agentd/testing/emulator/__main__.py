"""Standalone emulator: `python -m agentd.testing.emulator --api anthropic|openai --port 0 --scenario FILE`.

Prints the base URL as the first stdout line (flushed), then serves until SIGTERM or SIGINT; Lua and
TypeScript tests drive it through the `/_emu/` control endpoints (TESTING.md §3.1). Imports only the
standard library and this package, never agentd.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from .server import Emulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentd.testing.emulator", description=__doc__)
    parser.add_argument("--api", choices=["anthropic", "openai"], default="anthropic")
    parser.add_argument("--port", type=int, default=0, help="0 picks an ephemeral port")
    parser.add_argument("--scenario", help="scenario JSON file (TESTING.md §3.3)")
    parser.add_argument("--flavour", choices=["openai", "deepseek", "moonshot-legacy", "none"])
    parser.add_argument(
        "--lenient", action="store_true", help="turn off the strict first-message/alternation rules"
    )
    args = parser.parse_args(argv)
    try:
        emu = Emulator(
            api=args.api,
            scenario=args.scenario,
            flavour=args.flavour,
            strict=not args.lenient,
            port=args.port,
        )
    except (ValueError, RecursionError) as exc:  # a bad scenario: one line, never a traceback
        message = str(exc)
        if args.scenario is not None and args.scenario not in message:
            message = f"scenario {args.scenario}: {message.removeprefix('scenario: ')}"
        sys.stderr.write(f"{parser.prog}: {message}\n")
        return 2
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.stdout.write(emu.start() + "\n")  # the base URL is the first stdout line (TESTING.md §3.1)
    sys.stdout.flush()
    try:
        while not done.wait(0.5):
            pass
    finally:
        emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
