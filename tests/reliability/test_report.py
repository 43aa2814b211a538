"""The CI-sized reliability report (issue 16): the provider fault matrix on the Messages API, hostile LSP
frames and ACP lines, ten concurrent sessions, then the secrets and file-mode sweep. The full run (20 crash points, both
APIs, 50 sessions) is `tests/reliability/slow/test_report_full.py` (AGENTD_RELIABILITY=1) and
`python -m tests.reliability.report`; timings are reported there, never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.report import QUICK, report


@pytest.mark.timeout(600)
async def test_quick_report_faults_fuzz_load_and_secrets(tmp_path: Path) -> None:
    """Every fault case ends in a successful retry or one clear error with a valid history and nothing stored
    twice; hostile frames leave the daemon alive with clean stdout and no traceback; ten sessions at once
    see no cross talk; no canary key piece in any file; agentd's files 0600 and dirs 0700."""
    out = await report(tmp_path, QUICK, ("faults", "fuzz", "load"))
    assert out["fault_cases_ok"] == out["fault_cases"] == 13, out["fault_problems"]
    assert out["fuzz_frames_lsp"] > 100 and out["fuzz_frames_acp"] > 100, out
    assert out["fuzz_frames"] == out["fuzz_frames_lsp"] + out["fuzz_frames_acp"]
    assert out["daemon_alive"], out["fuzz_problems"]
    assert out["sessions_concurrent"] == QUICK["sessions"] and out["cross_talk"] == 0, out
    assert out["secrets_found"] == 0, out["secrets_problems"]
    assert out["private_modes_bad"] == 0, out["modes_problems"]
