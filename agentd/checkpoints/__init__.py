"""Checkpoints of the workspace (issue 13; docs/checkpoints.md): what the files were before each prompt and
each `run_command`, and how to put them back.

Modules: `objects` (the content-addressed pack store under `sessions/<id>/checkpoints/`), `tree` (a
folder's snapshot: entries with their stat keys, content refs and what is not covered; encoding, loading,
comparing), `scan` (the incremental walk that makes a snapshot, re-reading only what changed), `restore`
(the plan from one snapshot to another, applied through an intent file so a crash is finished on the next
open). The session-level API (taking checkpoints, rewind, fork) is `agentd.core.checkpoints`.
Imports the standard library, `agentd.tools` (ignore rules, the pinned workspace), `agentd.persistence.paths`
and `agentd.failpoints`; never pygls, lsprotocol, acp, `agentd.core` or `agentd.adapters`.
"""
