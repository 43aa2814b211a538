"""The key-exfiltration and background-escape reproductions of issue 12 against a real `agentd run`:
a scripted model runs one command that base64-encodes every `/proc/*/environ` into the workspace and starts
`sleep` four ways that leave its process group (`setsid`, `env -i setsid`, a double fork, `set -m` +
`setsid`); then agentd is killed with SIGKILL.

With the sandbox (`sandbox = "required"`): 0 leaks of the API key (plain, reversed or base64) and 0
survivors. Without it (`sandbox = "off"`): 0 survivors (the subreaper helper), and any leak is named as a
missing protection on stderr.
"""

from __future__ import annotations

import base64

import pytest

from tests.reliability.conftest import Agentd
from tests.sandbox_fixtures import escapes, marker, needs_bwrap, wait_survivors

DUMP = "for p in /proc/[0-9]*; do base64 -w0 $p/environ 2>/dev/null; echo; done > envs.b64; "


def leaks(canary: str, dump: bytes) -> int:
    """Lines of the dump whose decoded environment holds the key (as is or reversed)."""
    found = 0
    for line in dump.splitlines():
        env = base64.b64decode(line + b"=" * (-len(line) % 4))
        if canary.encode() in env or canary.encode()[::-1] in env:
            found += 1
    return found


def run_and_kill(agentd: Agentd, mode: str) -> tuple[list[int], str]:
    (agentd.config_dir / "config.toml").write_text(f'sandbox = "{mode}"\n')
    mark = marker()
    command = DUMP + escapes(mark) + f"; sleep {mark}"
    agentd.emu.script([{"reply": [{"tool_use": {"name": "run_command", "input": {"command": command}}}]}])
    proc = agentd.start("leak the key", args=("--allow", "run_command"))
    started = wait_survivors(mark, 5)
    assert len(started) == 5, (started, proc.stderr)
    assert proc.sigkill() == -9
    return wait_survivors(mark, 0), proc.stderr


def test_sandboxed_command_leaks_nothing_and_dies_with_agentd(agentd: Agentd, canary: str) -> None:
    needs_bwrap()
    left, stderr = run_and_kill(agentd, "required")
    dump = (agentd.ws / "envs.b64").read_bytes()
    assert (left, leaks(canary, dump)) == ([], 0), stderr
    assert len(dump.splitlines()) >= 1  # it did read the environments it could see: its own processes'


def test_unsandboxed_command_dies_with_agentd_and_the_gap_is_named(agentd: Agentd, canary: str) -> None:
    left, stderr = run_and_kill(agentd, "off")
    assert left == [], stderr
    line = next((ln for ln in stderr.splitlines() if ln.startswith("[Sandbox] ")), "")
    assert line.startswith('[Sandbox] sandbox = "off"; missing protections: file system, secrets, network'), (
        stderr
    )
    if leaks(canary, (agentd.ws / "envs.b64").read_bytes()):
        assert "agentd's process" in line, line
    else:
        pytest.skip(
            "agentd's environment was not readable here (not root, agentd not dumpable): nothing to name"
        )
