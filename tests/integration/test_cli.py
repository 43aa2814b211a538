"""`agentd run` and the command line as a user meets them: a real subprocess, the real anthropic SDK, the
Messages-API emulator over HTTP (PROTOCOL.md §3.1; issue acceptance for the foundation and the plan/tools
issues)."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentd.core.todos import REMINDER_TEXT
from agentd.testing.emulator import Emulator

CHINESE_PROMPT = "先建立完整 TODO，再读取 README.md 并总结运行和验证步骤"


def _agentd(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentd", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    env.update(extra)
    return env


def test_help_lists_run(tmp_path: Path) -> None:
    out = _agentd(["--help"], _env(tmp_path))
    assert (out.returncode, "run" in out.stdout, "demo" in out.stdout, "sessions" in out.stdout) == (
        0,
        True,
        True,
        True,
    )


def test_bad_input_gives_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "bad.json").write_text("{not json")
    env = _env(tmp_path)
    env.pop("ANTHROPIC_API_KEY", None)
    cases = {
        "provider": _agentd(["run", "--workspace", str(ws), "--prompt", "x", "--provider", "nope"], env),
        "scenario": _agentd(
            [
                "run",
                "--workspace",
                str(ws),
                "--prompt",
                "x",
                "--provider",
                "scripted",
                "--scenario",
                str(tmp_path / "bad.json"),
            ],
            env,
        ),
        "workspace": _agentd(["run", "--workspace", str(tmp_path / "missing"), "--prompt", "x"], env),
        "key": _agentd(["run", "--workspace", str(ws), "--prompt", "x"], env),
    }
    assert {k: (r.returncode, r.stdout, len(r.stderr.strip().splitlines())) for k, r in cases.items()} == {
        k: (2, "", 1) for k in cases
    }
    assert "Traceback" not in "".join(r.stderr for r in cases.values())
    assert cases["provider"].stderr == "agentd: unknown provider 'nope'; use anthropic, openai or scripted\n"
    assert cases["key"].stderr == (
        "agentd: No API key: set ANTHROPIC_API_KEY in the environment (or choose another provider with --provider)\n"
    )
    assert cases["workspace"].stderr == (
        f"agentd: workspace {tmp_path / 'missing'} does not exist or is not a directory; "
        "pass an existing --workspace DIR\n"
    )


def _tool(name: str, **inp: Any) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": inp}}


def test_chinese_plan_read_and_denied_write_through_the_real_sdk(tmp_path: Path, emulator: Emulator) -> None:
    """The plan/tools issue's `agentd run` acceptance: [Hook], [Permission], accounting lines; the exact
    escaped snapshot; a write asks, is denied without a terminal, and is audited; no key in any file."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text(
        "# Demo\n\nRun: `python -m demo`. Verify: `python -m unittest`.\n", encoding="utf-8"
    )
    items = [("建立 TODO", "done"), ("读取 README.md", "in_progress"), ("总结运行和验证步骤", "pending")]
    plan = _tool("todo_write", todos=[{"content": c, "status": s} for c, s in items])
    read = _tool("read_file", path="README.md")
    write = _tool("write_file", path="NOTES.md", content="steps\n")
    emulator.script(
        {
            "answers": [
                {"reply": [{"text": "先建立计划。"}, plan]},
                {"reply": [read]},
                {"reply": [read]},
                {"reply": [read]},
                {"reply": [write]},
                {"reply": [{"text": "运行: python -m demo；验证: python -m unittest。"}]},
            ]
        }
    )
    key = "sk-ant-emu-" + secrets.token_hex(16)
    env = _env(tmp_path, ANTHROPIC_BASE_URL=emulator.url, ANTHROPIC_API_KEY=key)
    out = _agentd(["run", "--workspace", str(ws), "--prompt", CHINESE_PROMPT, "--provider", "anthropic"], env)
    assert (out.returncode, out.stdout) == (  # 9: the one write was refused for lack of a terminal (H9)
        9,
        "先建立计划。\n运行: python -m demo；验证: python -m unittest。\n",
    )
    lines = out.stderr.splitlines()
    at = lines.index("[Tool] Update todos (3 items) -> completed")  # the plan as a checklist (new-user R7)
    assert lines[at + 1 : at + 5] == [
        "[Plan]",
        "  [x] 建立 TODO",
        "  [~] 读取 README.md",
        "  [ ] 总结运行和验证步骤",
    ]
    assert [x for x in lines if x.startswith("[Permission]")] == [
        "[Permission] todo_write -> allow (rule)",
        "[Permission] read_file -> allow (rule)",
        "[Permission] read_file -> allow (rule)",
        "[Permission] read_file -> allow (rule)",
        "[Permission] write_file -> deny (no terminal to ask; use --yes or --allow write_file)",
    ]
    assert [x for x in lines if x.startswith("[Hook]")] == [
        "[Hook] before_model todo_reminder: changed the request (9 messages)"
    ]
    accounting = [x for x in lines if x.startswith("[turn · in=")]
    assert len(accounting) == 6 == len(emulator.journal)
    bodies = [e["body"] for e in emulator.journal]
    assert [REMINDER_TEXT in json.dumps(b, ensure_ascii=False) for b in bodies] == [False] * 4 + [True, False]
    denied = bodies[5]["messages"][-1]["content"][0]
    assert {k: v for k, v in denied.items() if k != "cache_control"} == {
        "type": "tool_result",
        "tool_use_id": "toolu_emu_5_1",
        "is_error": True,
        "content": "No approval was given (no terminal to ask); the call was not run.",
    }
    assert not (ws / "NOTES.md").exists()
    data = tmp_path / "data"
    (sid,) = [p.name for p in (data / "sessions").iterdir()]
    audit = [json.loads(x) for x in (data / "sessions" / sid / "audit.jsonl").read_text().splitlines()]
    assert [(r["tool"], r["decision"], r["decidedBy"]) for r in audit] == [
        ("todo_write", "allow", "rule"),
        ("read_file", "allow", "rule"),
        ("read_file", "allow", "rule"),
        ("read_file", "allow", "rule"),
        ("write_file", "deny", "timeout"),
    ]
    written = b"".join(p.read_bytes() for p in data.rglob("*") if p.is_file()) + out.stderr.encode()
    assert [key[i : i + 16] for i in range(len(key) - 15) if key[i : i + 16].encode() in written] == []


def test_cached_prefix_grows_request_over_request(tmp_path: Path, emulator: Emulator) -> None:
    """C11: the moving breakpoint sits on the stored history, so cache reads grow every request."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.txt").write_text("lorem ipsum dolor sit amet " * 400)
    read = _tool("read_file", path="big.txt")
    emulator.script(
        {
            "models": {"claude-sonnet-4-6": {"min_cacheable_tokens": 1024}},
            "answers": [{"reply": [read]}, {"reply": [read]}, {"reply": [read]}, {"reply": [{"text": "ok"}]}],
        }
    )
    env = _env(tmp_path, ANTHROPIC_BASE_URL=emulator.url, ANTHROPIC_API_KEY="sk-ant-emu-" + "0" * 32)
    out = _agentd(["run", "--workspace", str(ws), "--prompt", "read it", "--provider", "anthropic"], env)
    assert out.returncode == 0, out.stderr
    reads = [e["usage"]["cache_read_input_tokens"] for e in emulator.journal]
    assert reads[0] == 0 and all(b > a for a, b in itertools.pairwise(reads[1:])) and reads[1] > 0


def test_demo_runs_offline_and_says_the_model_is_scripted(tmp_path: Path) -> None:
    out = _agentd(["demo"], _env(tmp_path, TMPDIR=str(tmp_path)))  # the demo's copy stays in tmp_path
    assert (out.returncode, "The model is SCRIPTED" in out.stderr, "[stop · end_turn]" in out.stderr) == (
        0,
        True,
        True,
    )
    assert out.stdout.splitlines()[-1].startswith("Done: greet.py now takes --shout")


def test_lone_surrogates_in_a_tool_input_and_on_argv_do_not_end_the_run(
    tmp_path: Path, emulator: Emulator
) -> None:
    """H19: a reply whose tool input holds `\\udcff` (through the real SDK) and a prompt with undecodable
    bytes on argv: the run ends normally (exit 0, not 1), the model gets an `invalid_arguments` result."""
    ws = tmp_path / "ws"
    ws.mkdir()
    emulator.script(
        {
            "answers": [
                {"reply": [_tool("read_file", path="notes\udcff.md")]},
                {
                    "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True},
                    "reply": [{"text": "That path was not valid Unicode."}],
                },
            ]
        }
    )
    env = _env(
        tmp_path, ANTHROPIC_BASE_URL=emulator.url, ANTHROPIC_API_KEY="sk-ant-emu-" + secrets.token_hex(16)
    )
    argv = [
        sys.executable,
        "-m",
        "agentd",
        "run",
        "--workspace",
        str(ws),
        "--provider",
        "anthropic",
        "--prompt",
    ]
    out = subprocess.run(
        [*argv, b"read notes\xff.md"], env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert (out.returncode, out.stdout) == (0, b"That path was not valid Unicode.\n"), out.stderr
    assert b"[Permission] read_file -> deny (invalid_input)" in out.stderr
    assert b"Traceback" not in out.stderr
