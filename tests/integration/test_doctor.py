"""`agentd doctor` (issue 12; PROTOCOL.md §3.1): the facts, the missing protections, the exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentd.doctor import render, report
from agentd.sandbox import SandboxStatus

NO_BWRAP = SandboxStatus(
    "bubblewrap", False, problem="bubblewrap (bwrap) is not installed; install bubblewrap"
)
BWRAP = SandboxStatus("bubblewrap", True, "/usr/bin/bwrap", "0.8.0")


def test_report_without_a_sandbox_names_what_is_missing(tmp_path: Path) -> None:
    rep = report(None, tmp_path, status=NO_BWRAP)
    assert (rep["exitCode"], rep["sandbox"]["active"], rep["sandbox"]["mode"]) == (1, False, "auto")
    assert rep["missing"][:4] == ["sandbox", "file system", "secrets", "network"]
    text = render(rep)
    assert "MISSING sandbox           no sandbox: bubblewrap (bwrap) is not installed" in text
    assert "to fix: bubblewrap (bwrap) is not installed; install bubblewrap" in text


def test_report_with_a_sandbox_and_the_workspace_config(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").write_text('sandbox = "off"\n[permissions]\ndefault_mode = "auto"\n')
    rep = report(ws, tmp_path, status=BWRAP)
    assert (rep["exitCode"], rep["sandbox"]["mode"], rep["missing"]) == (0, "auto", [])
    assert [w.split("ignored")[0] for w in rep["config"]["warnings"]] == [
        f"{ws}/.agentd/config.toml: sandbox.mode = 'off' ",
        f"{ws}/.agentd/config.toml: permissions.default_mode = 'auto' ",
    ]


def test_doctor_command_json(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.toml").write_text('sandbox = "off"\n')
    env = {**os.environ, "AGENTD_CONFIG_DIR": str(cfg), "AGENTD_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "agentd", "doctor", "--json"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    rep = json.loads(done.stdout)
    assert (done.returncode, rep["sandbox"]["mode"], rep["sandbox"]["active"]) == (0, "off", False)
    assert {"file system", "secrets", "network"} <= set(rep["missing"])
    assert done.stderr == b""


def test_doctor_reads_the_config_of_the_current_folder(tmp_path: Path) -> None:
    """new-user R4: `agentd doctor` run inside a project ignored its `.agentd/config.toml` (`"workspace":
    null`) unless given `--workspace .`; the current folder is now the default workspace, as for
    `agentd run`, and `--workspace DIR` still names another."""
    ws, other = tmp_path / "ws", tmp_path / "other"
    (ws / ".agentd").mkdir(parents=True)
    other.mkdir()
    (ws / ".agentd" / "config.toml").write_text('[permissions]\ndefault_mode = "auto"\n')
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}

    def doctor(*args: str) -> dict[str, object]:
        cmd = [sys.executable, "-m", "agentd", "doctor", "--json", *args]
        done = subprocess.run(cmd, cwd=ws, capture_output=True, env=env, timeout=60, check=False)
        return dict(json.loads(done.stdout)["config"])

    here = doctor()
    assert here["workspace"] == f"{ws}/.agentd/config.toml"
    assert [w.split(":")[0] for w in here["warnings"]] == [f"{ws}/.agentd/config.toml"]  # type: ignore[union-attr]
    there = doctor("--workspace", str(other))
    assert (there["workspace"], there["warnings"]) == (f"{other}/.agentd/config.toml", [])
