"""Fixes of what a new user found in `agentd run`, `agentd doctor` and `make test` (new-user R2-R7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_session_home_may_hold_read_only_folders() -> None:
    """new-user R5 (the probe the next test runs in a pytest of its own): a test leaves a read-only folder
    in the session's HOME, as sandbox tests do; the end of the run still removes it."""
    locked = Path(os.environ["HOME"]) / "r5-locked"
    (locked / "inner").mkdir(parents=True, exist_ok=True)
    (locked / "inner" / "f").write_text("x")
    (locked / "inner").chmod(0o500)
    locked.chmod(0o500)
    assert locked.stat().st_mode & 0o777 == 0o500


def test_a_pytest_run_removes_its_own_session_tmp_dir(tmp_path: Path) -> None:
    """new-user R5: every pytest run left an `agentd-tests-*` folder in the system tmp dir (1,621 on one
    machine); a run now removes its own, read-only folders in it too, and leaves another run's alone."""
    other = tmp_path / "agentd-tests-another-run"  # a concurrent run's folder: in use, not ours
    other.mkdir()
    probe = f"{Path(__file__).relative_to(ROOT)}::test_the_session_home_may_hold_read_only_folders"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", probe]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "audit sweep" in done.stdout  # the suite's conftest ran
    left = sorted(p.name for p in tmp_path.glob("agentd-tests-*"))
    assert left == ["agentd-tests-another-run"], done.stdout[-2000:]
