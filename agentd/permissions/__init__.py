"""Permission rules, the decision gate (CONTRACTS.md §5) and approvers."""
