"""`python -m tests.benchmarks all --only NAMES --write FILE` (issue 15): each module's figures live in their own
section of the bench block, so one benchmark (the cost benchmark takes minutes) can be published alone without
touching the others; nested tables (the cost benchmark's per-workload figures) render as Markdown tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tests.benchmarks.__main__ as bench


def test_only_rewrites_its_own_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results: dict[str, dict[str, Any]] = {
        "cost": {"worst": 1.05, "workloads": {"agentic": {"requests": 210, "ratio": 1.02}}},
        "store": {"append_ratio": 1.1},
    }
    monkeypatch.setattr(bench, "MODULES", ("cost", "store"))
    monkeypatch.setattr(bench, "uncommitted_changes", lambda exclude=None: [])
    monkeypatch.setattr(bench, "_run_module", lambda name: results[name])
    target = tmp_path / "benchmarks.md"
    target.write_text("# Benchmarks\n\nProse kept.\n", encoding="utf-8")
    assert bench.run_all(["--write", str(target)]) == 0
    first = bench.sections_of(target.read_text(encoding="utf-8"))
    assert list(first) == ["cost", "store"]
    assert "| `agentic` | 210 | 1.02 |" in first["cost"]  # the nested table
    results["cost"] = {"worst": 1.01}
    results["store"] = {"append_ratio": 9.9}  # not run: must not appear
    assert bench.run_all(["--only", "cost", "--write", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    again = bench.sections_of(text)
    assert again["store"] == first["store"] and "| `worst` | 1.01 |" in again["cost"]
    assert text.startswith("# Benchmarks\n\nProse kept.\n") and text.count(bench.BEGIN) == 1
    with pytest.raises(SystemExit):
        bench.run_all(["--only", "nope"])


def test_a_block_without_section_markers_keeps_its_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block as written before sections existed: one header, then one heading per module."""
    old = "\n".join([
        bench.BEGIN, "", "Reproduce with ...", "", "- commit: `abc`", "- date: then", "",
        "### `tests.benchmarks.cost`", "", "| `old` | 1 |", "",
        "### `tests.benchmarks.store`", "", "| Key | Value | Target |", "| `append_ratio` | 0.9 | <= 1.5 |", "",
        bench.END,
    ])  # fmt: skip
    target = tmp_path / "benchmarks.md"
    target.write_text("# Benchmarks\n\n" + old + "\n", encoding="utf-8")
    monkeypatch.setattr(bench, "MODULES", ("cost", "store"))
    monkeypatch.setattr(bench, "uncommitted_changes", lambda exclude=None: [])
    monkeypatch.setattr(bench, "_run_module", lambda name: {"fresh": 2})
    assert bench.run_all(["--only", "cost", "--write", str(target)]) == 0
    sections = bench.sections_of(target.read_text(encoding="utf-8"))
    assert sections["store"] == "\n".join([
        "<!-- bench:store:begin -->", "### `tests.benchmarks.store`", "", "- commit: `abc`", "- date: then", "",
        "| Key | Value | Target |", "| `append_ratio` | 0.9 | <= 1.5 |", "<!-- bench:store:end -->",
    ])  # fmt: skip
    assert "| `fresh` | 2 |" in sections["cost"] and "old" not in sections["cost"]
