"""Secrets never persisted and private file modes, after real `agentd run` processes with tools, a retry,
a denied approval, a kill, a resume and a 401 (TESTING.md §4.6, §4.7; CONTRACTS.md §9, §10)."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from agentd.core.session import INTERRUPTED_AFTER
from tests.reliability.conftest import Agentd, accepted, messages_of, result_block, takeover, warnings_of

SECRET_VARS = ("ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=", "OPENAI_API_KEY=")


def leaks(key: str, blobs: dict[str, bytes]) -> list[tuple[str, str]]:
    """Every (source, 16-character piece of `key`) found in the bytes of a source."""
    pieces = {key[i : i + 16] for i in range(len(key) - 15)}
    return sorted((name, p) for name, blob in blobs.items() for p in pieces if p.encode() in blob)


def test_the_api_key_is_in_no_file_log_or_output(agentd: Agentd, canary: str, tmp_path: Path) -> None:
    """§4.6: a canary key passed as ANTHROPIC_API_KEY and OPENAI_API_KEY; debug logging to a file and to
    stderr; `run_command env`, a denied approval, a 529 retry, a kill, a resume and a 401. No 16-character
    piece of the key may appear in any file under the test's folders or in any captured output."""
    log_file = tmp_path / "logs" / "agentd.log"
    (agentd.ws / "a.txt").write_text("alpha\n")
    agentd.emu.script(
        [
            {"fault": {"http": 529, "headers": {"retry-after": "0"}}},
            {
                "reply": [
                    {"text": "Checking."},
                    {"tool_use": {"name": "run_command", "input": {"command": "env"}}},
                    {"tool_use": {"name": "write_file", "input": {"path": "note.txt", "content": "n"}}},
                ]
            },
            {"reply": [{"text": "Done."}]},
            {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}]},
            {"reply": [{"text": "Fine."}]},
            {"http": 401},
        ]
    )
    agentd.env_extra = {"OPENAI_API_KEY": canary}
    debug = ("-vv", "--log-file", str(log_file))
    first = agentd.run("check the env", pre=debug, args=("--allow", "run_command"))
    assert first.popen.returncode == 0, first.stderr
    sid = first.session_id()
    killed = agentd.run("read a", resume=sid, pre=("-vv",), failpoints="loop.after_tool_started=kill")
    assert killed.popen.returncode == -9, killed.stderr
    resumed = agentd.run("continue", resume=sid, pre=debug)
    assert resumed.popen.returncode == 0, resumed.stderr
    rejected = agentd.run("again", resume=sid, pre=("-vv",))
    assert (rejected.popen.returncode, rejected.stderr.splitlines()[-1]) == (
        6,
        "agentd: Anthropic rejected the API key (HTTP 401). Set ANTHROPIC_API_KEY in the environment that "
        "launches your editor, then restart agentd.",
    )

    journal = agentd.emu.journal
    assert [accepted(e) for e in journal] == [(529, None), (200, None), (200, None), (200, None), (200, None),
                                              (401, None)]  # fmt: skip
    assert {e["auth"]["key_hash"] for e in journal} == {hashlib.sha256(canary.encode()).hexdigest()[:8]}
    messages = messages_of(agentd.records(sid))
    env_out = messages[2]["content"][0]["content"]
    assert [ln for ln in env_out.splitlines() if ln.startswith(SECRET_VARS)] == []
    assert f"AGENTD_DATA_DIR={agentd.data}" in env_out.splitlines()  # `env` really ran in the tool
    assert messages[3]["content"][0] == result_block(
        "toolu_emu_2_2", "No approval was given (no terminal to ask); the call was not run.", is_error=True
    )
    assert messages[7]["content"][0] == result_block("toolu_emu_4_1", INTERRUPTED_AFTER, is_error=True)
    assert takeover(sid, killed.pid) in warnings_of(log_file.read_text())  # the log file was written

    blobs = {str(p.relative_to(tmp_path)): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    assert any(name.endswith("audit.jsonl") for name in blobs)
    for proc in agentd.procs:
        blobs[f"output of {proc.argv[3:6]} pid {proc.pid}"] = proc.output_bytes
    assert leaks(canary, blobs) == []


def test_files_are_private_whatever_the_umask(agentd: Agentd, tmp_path: Path) -> None:
    """§4.7, C05, C07: agentd started with umask 022 (and killed between a meta.json temp write and its rename):
    every folder of the data dir is 0700, every file 0600 (log, meta, lock, audit, blob, log file), and the
    resume removes the `*.tmp` the kill left behind."""
    (agentd.config_dir / "config.toml").write_text("[store]\nblob_min_bytes = 64\n")
    (agentd.ws / "a.txt").write_text("b" * 200 + "\n")
    log_file = tmp_path / "logs" / "agentd.log"
    agentd.emu.script(
        [
            {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}]},
            {"reply": [{"text": "Read."}]},
            {"reply": [{"text": "Again."}]},
        ]
    )
    # meta.json is written at create (hit 1), when the turn starts (hit 2) and when it ends (hit 3)
    killed = agentd.run("read a", pre=("--log-file", str(log_file)), failpoints="meta.before_rename=kill@3")
    assert killed.popen.returncode == -9, killed.stderr
    sid = killed.session_id()
    sdir = agentd.session_dir(sid)
    assert (sdir / "meta.json.tmp").exists()
    resumed = agentd.run("again", resume=sid, pre=("--log-file", str(log_file)))
    assert resumed.popen.returncode == 0, resumed.stderr

    records = agentd.records(sid)
    refs = [r["blobs"] for r in records if r["kind"] == "message" and "blobs" in r]
    content = "     1\t" + "b" * 200
    assert refs == [{"0": hashlib.sha256(content.encode()).hexdigest()}]
    files = {str(p.relative_to(agentd.data)): stat.S_IMODE(p.stat().st_mode) for p in agentd.data.rglob("*")}
    files["."] = stat.S_IMODE(agentd.data.stat().st_mode)
    files["<log file>"] = stat.S_IMODE(log_file.stat().st_mode)
    s = f"sessions/{sid}"
    named = {".", "sessions", s, f"{s}/log.jsonl", f"{s}/meta.json", f"{s}/lock", f"{s}/audit.jsonl",
             f"{s}/blobs", f"{s}/blobs/{refs[0]['0']}", "<log file>"}  # fmt: skip
    assert named <= set(files), sorted(named - set(files))
    # everything else agentd wrote (checkpoint packs, ...) is held to the same rule: folders 0700, files 0600
    dirs = {".", *(str(p.relative_to(agentd.data)) for p in agentd.data.rglob("*") if p.is_dir())}
    assert {k: v for k, v in files.items() if v != (0o700 if k in dirs else 0o600)} == {}
