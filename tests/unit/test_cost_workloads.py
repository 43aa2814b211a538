"""The cost benchmark's workloads (tests/benchmarks/workloads.py; issue 15): the committed files are exactly what
the generator makes from each seed and declared shape, the shapes hold what they declare, and every scripted
edit applies to the workspace as the real `edit_file` would see it (its old text occurs exactly once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.workloads import DIR, SHAPES, dumps, file_text, generate, load, materialize


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_committed_workload_is_what_the_generator_makes(name: str) -> None:
    assert (DIR / f"{name}.json").read_text(encoding="utf-8") == dumps(generate(SHAPES[name]))
    assert generate(SHAPES[name]) == load(name)  # and the JSON round-trips


def test_file_texts_are_deterministic_and_sized() -> None:
    a, b = file_text(7, "src/x.py", 5000), file_text(7, "src/x.py", 5000)
    assert a == b != file_text(8, "src/x.py", 5000)
    assert 5000 <= len(a.encode()) < 5200 and a.startswith("# anchor 0\n")


def calls(name: str) -> list[dict]:
    return [b["tool_use"] for t in load(name)["turns"] for r in t["replies"] for b in r if "tool_use" in b]


def test_the_shapes_hold_what_they_declare() -> None:
    turns = {n: load(n)["turns"] for n in SHAPES}
    assert {n: len(t) for n, t in turns.items()} == {
        "interactive": 8, "agentic": 40, "heavy": 60, "parallel": 20, "resumed": 22, "seed-article": 14,
    }  # fmt: skip
    assert all(20 <= t["pause_s"] <= 240 for t in turns["interactive"])
    assert 160 <= len(calls("agentic")) <= 200
    pauses = [t["pause_s"] for t in turns["agentic"]]
    assert min(pauses) < 10 and max(pauses) > 1800  # from seconds to an hour
    widths = [sum("tool_use" in b for b in r) for t in turns["parallel"] for r in t["replies"][:-1]]
    assert set(widths) == {2, 3, 4, 5}
    assert load("resumed")["resume"] == {"before": 12, "pause_s": 86400.0}
    seed = load("seed-article")
    assert (seed["model"], seed["settings"]) == (
        "claude-opus-4-5",
        {"context": {"compressThresholdTokens": 12000}},
    )
    # about 4,100 tokens of project instructions: with agentd's own prompt, a system of about 4,600
    assert {"path": "AGENTS.md", "bytes": 16300} in seed["files"]
    heavy = sorted(f["bytes"] for f in load("heavy")["files"] if f["path"].startswith(("src/", "logs/")))
    agentic = sorted(f["bytes"] for f in load("agentic")["files"] if f["path"].startswith(("src/", "logs/")))
    assert 2.5 < heavy[len(heavy) // 2] / agentic[len(agentic) // 2] < 3.5  # outputs 3x larger
    for reply in (r for t in turns["agentic"] for r in t["replies"]):
        assert reply  # no empty reply (the final one of each turn is text only)
    assert all(
        list(t["replies"][-1][0]) == ["text"] and len(t["replies"][-1]) == 1 for n in SHAPES for t in turns[n]
    )


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_scripted_edit_applies_once(name: str, tmp_path: Path) -> None:
    workload = load(name)
    materialize(workload, tmp_path)
    for call in calls(name):
        if call["name"] == "edit_file":
            path = tmp_path / call["input"]["path"]
            text = path.read_text(encoding="utf-8")
            assert text.count(call["input"]["old_string"]) == 1, call
            path.write_text(
                text.replace(call["input"]["old_string"], call["input"]["new_string"]), encoding="utf-8"
            )
        elif call["name"] in ("read_file",):
            assert (tmp_path / call["input"]["path"]).is_file()
        elif call["name"] == "run_command":
            assert (tmp_path / call["input"]["command"].removeprefix("cat ")).is_file()
