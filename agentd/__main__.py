"""`python -m agentd`: the same entry point as the `agentd` console script (PROTOCOL.md §3.1)."""

from agentd.cli import main

main()
