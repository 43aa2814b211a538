"""Branches of a session log (agentd.persistence.branches; issue 13): a conversation rewind moves the tip
back, the abandoned records stay in the log but leave the conversation."""

from __future__ import annotations

import random
from typing import Any

from agentd.persistence.branches import BRANCH_KINDS, ActiveBranch, active_seqs, branch_seqs, on_branch


def recs(*kinds: str | tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for seq, k in enumerate(kinds, start=1):
        kind, extra = (k, {}) if isinstance(k, str) else k
        out.append({"seq": seq, "kind": kind, **extra})
    return out


def test_without_rewinds_everything_is_active() -> None:
    log = recs("meta", "checkpoint", "prompt", "message", "message", "checkpoint")
    assert active_seqs(log) == {1, 2, 3, 4, 5, 6}


def test_a_conversation_rewind_abandons_what_followed_its_checkpoint() -> None:
    log = recs(
        "meta",
        "checkpoint",
        "prompt",
        "message",  # 1-4: turn 1
        "checkpoint",
        "prompt",
        "message",
        "grant",  # 5-8: turn 2 (5 = checkpoint "2")
        ("rewind", {"conversation": True, "toSeq": 5}),  # 9
        "prompt",
        "message",  # 10-11: the new turn 2
    )
    active = active_seqs(log)
    assert active == {1, 2, 3, 4, 5, 10, 11}
    assert not on_branch(log[6], active) and on_branch(log[7], active)  # the grant holds for the session
    assert branch_seqs(log, 7) == {1, 2, 3, 4, 5, 6, 7}  # the abandoned branch, as it was


def test_a_files_only_rewind_leaves_the_conversation() -> None:
    log = recs(
        "meta", "checkpoint", "prompt", "message", ("rewind", {"conversation": False, "toSeq": 2}), "prompt"
    )
    assert active_seqs(log) == {1, 2, 3, 4, 5, 6}


def test_rewinding_to_an_abandoned_checkpoint_goes_back_to_that_branch() -> None:
    log = recs(
        "meta",
        "checkpoint",
        "prompt",
        "message",
        "checkpoint",
        "prompt",
        "message",  # 1-7
        ("rewind", {"conversation": True, "toSeq": 2}),  # 8: back to before prompt 1
        "prompt",
        "message",  # 9-10
        ("rewind", {"conversation": True, "toSeq": 5}),  # 11: to checkpoint 5 on the first branch
        "prompt",  # 12
    )
    assert active_seqs(log) == {1, 2, 3, 4, 5, 12}


def test_branch_kinds_are_the_conversation() -> None:
    assert {"prompt", "message", "todos", "compaction", "usage"} <= BRANCH_KINDS
    assert not {"grant", "mode", "title", "checkpoint", "rewind", "meta"} & BRANCH_KINDS


def test_the_active_branch_from_rewinds_alone_is_active_seqs() -> None:
    """Issue 16: a resume finds the active branch from the `rewind` records (read through the index) and the
    last seq; on random logs with conversation and files-only rewinds, to earlier, equal, later and missing
    seqs, it is `active_seqs` of the whole log."""
    for trial in range(2000):
        rng = random.Random(trial)
        log: list[dict[str, Any]] = []
        for seq in range(1, rng.randint(1, 40) + 1):
            if seq > 1 and rng.random() < 0.15:
                to = rng.randint(0, seq + 2)
                log.append({"seq": seq, "kind": "rewind", "conversation": rng.random() < 0.8, "toSeq": to})
            else:
                log.append({"seq": seq, "kind": rng.choice(["message", "checkpoint", "prompt"])})
        branch = ActiveBranch([r for r in log if r["kind"] == "rewind"], len(log))
        assert {s for s in range(len(log) + 3) if s in branch} == active_seqs(log), trial
