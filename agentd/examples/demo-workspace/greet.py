"""A tiny greeting tool used by `agentd demo`."""

import sys


def greet(name: str) -> str:
    return f"Hello, {name}!"


def main(argv: list[str]) -> int:
    name = argv[1] if len(argv) > 1 else "world"
    sys.stdout.write(greet(name) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
