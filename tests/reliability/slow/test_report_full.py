"""The full reliability report (issue 16 acceptance; opt-in: AGENTD_RELIABILITY=1): 20 crash points of a
40-call session, the fault matrix on both APIs, 50 concurrent sessions, 300 batches of hostile LSP frames and
as many of ACP lines, the hostile tool inputs and data dirs, the secrets and file-mode sweep. Latency figures are printed for docs/reliability.md, not asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.report import FULL, report


@pytest.mark.timeout(3600)
async def test_full_report_meets_the_targets(tmp_path: Path) -> None:
    """crash_resumes_ok == crash_points == 20; fault_cases_ok == fault_cases; sessions_concurrent >= 50;
    cross_talk == 0; daemon_alive; hostile_cases_ok == hostile_cases; secrets_found == 0; private modes
    everywhere."""
    out = await report(tmp_path, FULL)
    print(json.dumps(out))
    assert out["crash_resumes_ok"] == out["crash_points"] == 20, out["crash_problems"]
    assert out["fault_cases_ok"] == out["fault_cases"], out["fault_problems"]
    assert out["sessions_concurrent"] >= 50 and out["cross_talk"] == 0, out
    assert out["daemon_alive"], out["fuzz_problems"]
    assert out["hostile_cases_ok"] == out["hostile_cases"] == 4, (
        out["hostile_problems"],
        out["hostile_skipped"],
    )
    assert out["secrets_found"] == 0, out["secrets_problems"]
    assert out["private_modes_bad"] == 0, out["modes_problems"]
