"""The cost benchmark's 20-request variant as a test (TESTING.md §5.1): token counts are exact, so this asserts
outcomes, not timings. Every request must pass the emulator's validator (the driver aborts otherwise)."""

from __future__ import annotations

import json

from tests.benchmarks import cost


def _first_requests(n: int) -> dict:
    ref = json.loads(cost.REFERENCE.read_text(encoding="utf-8"))
    turns, count = [], 0
    for turn in ref["turns"]:
        if count + len(turn["rounds"]) + 1 > n:
            break
        turns.append(turn)
        count += len(turn["rounds"]) + 1
    return {**ref, "turns": turns}


def test_agentd_bills_less_than_the_seed_cache_and_every_request_is_accepted() -> None:
    ref = _first_requests(20)
    runs = {s: cost.Driver(ref, s, 1024).play() for s in ("agentd", "seed_cache", "nocache")}
    requests = {s: r.requests for s, r in runs.items()}
    assert len(set(requests.values())) == 1 and 15 <= requests["agentd"] <= 20
    assert runs["agentd"].bill < runs["seed_cache"].bill < runs["nocache"].bill
    assert runs["agentd"].read > 0 and runs["nocache"].read == 0


def test_moving_breakpoint_reads_grow_within_a_turn() -> None:
    """C11: cache reads grow request over request inside a tool loop."""
    ref = _first_requests(20)
    d = cost.Driver(ref, "agentd", 1024)
    d.play()
    sizes = d.run.prompt_sizes
    assert sizes == sorted(sizes) and d.run.read > 0.7 * sum(sizes)
