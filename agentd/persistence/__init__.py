"""Session persistence: append-only JSONL logs, locks, blobs, replay (CONTRACTS.md §9)."""
