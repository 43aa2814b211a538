"""Project instructions in a real session (issue 11): AGENTS.md files from the project root down to the
workspace in the system prompt, in order, byte-identical on every request and after a resume (even when
the files changed on disk), a reload on request, the AGENTS.md of a deeper folder delivered once as a note
on a tool result, and `agentd sessions show` naming the files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from agentd.core.instructions import HEADER, reload
from agentd.core.prompts import SYSTEM_TEMPLATE
from agentd.persistence.paths import DataDir
from agentd.sessions_cli import sessions_command
from tests.integration.conftest import answers_of, read_file, text


def put(path: Path, text_: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    put(root / "AGENTS.md", "Use tabs.\n")
    put(root / "pkg" / "AGENTS.md", "Run make check.\n")
    put(root / "pkg" / "api" / "AGENTS.md", "Keep the API stable.\n")
    put(root / "pkg" / "api" / "db" / "AGENTS.md", "Never drop tables.\n")
    put(root / "pkg" / "api" / "db" / "schema.sql", "create table t (x int);\n")
    put(root / "pkg" / "api" / "db" / "seed.sql", "insert into t values (1);\n")
    return root


@pytest.fixture
def workspace(repo: Path) -> Path:
    """The session works in repo/pkg/api: the project root is repo (it holds .git)."""
    return repo / "pkg" / "api"


def expected_system(repo: Path, ws: Path, root_text: str = "Use tabs.") -> list[dict[str, str]]:
    instructions = "\n\n".join(
        [
            HEADER,
            f"## {repo / 'AGENTS.md'}\n\n{root_text}",
            f"## {repo / 'pkg' / 'AGENTS.md'}\n\nRun make check.",
            "## AGENTS.md\n\nKeep the API stable.",
        ]
    )
    return [
        {"type": "text", "text": SYSTEM_TEMPLATE.format(root=ws)},
        {"type": "text", "text": instructions},
    ]


def systems(h: Any) -> list[list[dict[str, Any]]]:
    return [[{k: v for k, v in b.items() if k != "cache_control"} for b in r["system"]] for r in h.requests]


async def test_nested_instructions_in_order_byte_stable_across_resume_and_reloaded_on_request(
    make_harness: Any, repo: Path, workspace: Path, data_dir: Path
) -> None:
    h = make_harness(answers_of([read_file("db/schema.sql")], [text("ok")]))
    assert await h.session.prompt([{"type": "text", "text": "look"}]) == "end_turn"
    want = expected_system(repo, workspace)
    assert systems(h) == [want, want]
    assert len({json.dumps(x) for x in systems(h)}) == 1  # byte-identical (the breakpoint's TTL aside)
    sid = h.session.id
    h.session.close()

    put(
        repo / "AGENTS.md", "Use spaces now.\n"
    )  # changed on disk: a resume keeps what the session started with
    h2 = make_harness(answers_of([text("still")]), resume=sid)
    assert await h2.session.prompt([{"type": "text", "text": "again"}]) == "end_turn"
    assert systems(h2) == [want]
    assert json.dumps(systems(h2)[0]) == json.dumps(systems(h)[-1])

    fresh = reload(h2.session)  # the user asked: one new record, a new prompt from now on
    assert fresh.files[0].path == str(repo / "AGENTS.md")
    h2.provider.scenario["answers"] += [{"reply": [text("reloaded")]}, {"reply": [text("same")]}]
    await h2.session.prompt([{"type": "text", "text": "after reload"}])
    await h2.session.prompt([{"type": "text", "text": "and again"}])
    new = expected_system(repo, workspace, "Use spaces now.")
    assert systems(h2)[1:] == [new, new]
    kinds = [
        json.loads(x)["kind"] for x in (data_dir / "sessions" / sid / "log.jsonl").read_text().splitlines()
    ]
    assert kinds.count("instructions") == 1


async def test_a_deeper_folder_s_agents_md_comes_once_with_a_tool_result(
    make_harness: Any, workspace: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = make_harness(answers_of([read_file("db/schema.sql")], [read_file("db/seed.sql")], [text("ok")]))
    await h.session.prompt([{"type": "text", "text": "read both"}])
    first = h.requests[1]["messages"][-1]["content"][0]["content"]
    assert first == (
        "     1\tcreate table t (x int);"
        "\n\n[Project instructions from db/AGENTS.md; they apply to work under db/]\nNever drop tables."
    )
    assert h.requests[2]["messages"][-1]["content"][0]["content"] == "     1\tinsert into t values (1);"
    assert "[Hook] after_tool nested_instructions: loaded db/AGENTS.md" in h.lines
    sid = h.session.id
    h.session.close()
    h2 = make_harness(answers_of([read_file("db/seed.sql")], [text("ok")]), resume=sid)
    await h2.session.prompt([{"type": "text", "text": "again"}])
    assert h2.requests[1]["messages"][-1]["content"][0]["content"] == "     1\tinsert into t values (1);"
    h2.session.close()

    capsys.readouterr()
    args = argparse.Namespace(sessions_command="show", id=sid)
    assert sessions_command(args, DataDir(data_dir)) == 0
    out = capsys.readouterr().out.splitlines()
    repo = workspace.parent.parent
    assert out[1:3] == [
        f"workspace: {workspace}  model: scripted",
        f"instructions: {repo / 'AGENTS.md'} (10 bytes), {repo / 'pkg' / 'AGENTS.md'} (16 bytes),"
        " AGENTS.md (21 bytes)",
    ]
