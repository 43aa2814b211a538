"""The cost benchmark's pipeline on a small workload (issue 15): the real daemon over LSP, the real SDK over HTTP,
the emulator. The benchmark's figures come from requests the emulator accepted and agentd sent: its count of
requests (agentd's per-request usage reports) equals the emulator's journal, one report per entry, and the
re-billing of the journal as sent reproduces the usage the emulator served."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks import billing, drive
from tests.benchmarks.workloads import Shape, generate

SMALL = Shape(
    "small", 99, turns=3, steps_per_turn=(1, 2), calls_per_step=(1, 2), output_bytes=(300, 1500, 4000),
    pause_s=(200.0, 900.0), agents_md_bytes=600, resume_before=2, resume_pause_s=1200.0,
)  # fmt: skip


def test_the_benchmark_counts_exactly_the_requests_the_emulator_journaled(tmp_path: Path) -> None:
    workload = generate(SMALL)
    played = drive.run(
        workload, {"cache": {"ttl": "auto"}}, tmp_path / "run"
    )  # check()ed: reports == journal
    replies = sum(len(t["replies"]) for t in workload["turns"])
    assert (
        len(played.reported) == len(played.journal) == replies
    )  # one request per scripted reply, no compression
    assert played.stops == ["end_turn"] * 3
    split, output = billing.served(played.journal)
    assert billing.rebill(played.journal, "as_sent", 1024) == split
    assert output == sum(r["outputTokens"] for r in played.reported) > 0
    assert [e["clock"] for e in played.journal][-1] >= sum(t["pause_s"] for t in workload["turns"]) + 1200

    played.reported.pop()  # a request the benchmark did not count
    with pytest.raises(RuntimeError, match=r"reported \d+ requests, the emulator served \d+"):
        played.check()
