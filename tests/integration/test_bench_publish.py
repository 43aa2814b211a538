"""`python -m tests.benchmarks all --write FILE` publishes only figures of a committed tree (issue 9 H17)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import tests.benchmarks.__main__ as bench


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run([*cmd, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "code.py").write_text("x = 1\n")
    (root / "docs" / "benchmarks.md").write_text("# Benchmarks\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    monkeypatch.setattr(bench, "ROOT", root)
    monkeypatch.setattr(bench, "MODULES", ())  # the publishing rule, not the benchmarks themselves
    return root


def test_h17_write_refuses_a_dirty_tree_and_records_the_commit(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """H17: docs/benchmarks.md was generated from an uncommitted tree. `--write` now refuses (exit 2) while
    anything but the target file is changed or untracked, records the commit otherwise, and marks it when
    `--allow-dirty` overrides."""
    target = repo / "docs" / "benchmarks.md"
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    (repo / "code.py").write_text("x = 2\n")
    (repo / "new.py").write_text("")
    assert bench.run_all(["--write", str(target)]) == 2
    err = capsys.readouterr().err
    assert "refusing to --write from a tree with uncommitted changes" in err and "code.py" in err
    assert target.read_text() == "# Benchmarks\n"

    assert bench.run_all(["--write", str(target), "--allow-dirty"]) == 0
    assert f"- commit: `{head} (with uncommitted changes)`" in target.read_text()

    _git(repo, "checkout", "-q", "code.py")
    (repo / "new.py").unlink()
    assert bench.run_all(["--write", str(target)]) == 0  # only the target itself differs: allowed
    assert f"- commit: `{head}`\n" in target.read_text()
