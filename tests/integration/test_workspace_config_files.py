"""Issue 12 §5: a workspace's `.agentd/config.toml` that is a FIFO, /dev/zero (a device, or a link to it),
a 50 MB file or a link to /etc/passwd gives a warning within 1 s, and the session starts with the other
layers (the user's config still applies)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from agentd.clock import ManualClock
from agentd.config import load_settings
from agentd.core.factory import create_session
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.providers.scripted import ScriptedProvider


def make_fifo(p: Path) -> None:
    os.mkfifo(p)


def make_zero_device(p: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root; the link case covers /dev/zero otherwise")
    os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # the device /dev/zero is


def make_zero_link(p: Path) -> None:
    os.symlink("/dev/zero", p)


def make_big(p: Path) -> None:
    with p.open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB of NUL bytes


def make_passwd_link(p: Path) -> None:
    os.symlink("/etc/passwd", p)


CASES = {
    "fifo": (make_fifo, "not a regular file (a FIFO, device or socket)"),
    "dev_zero": (make_zero_device, "not a regular file (a FIFO, device or socket)"),
    "dev_zero_link": (make_zero_link, "a link leading out of the workspace (to /dev/zero)"),
    "50MB": (make_big, "larger than 1048576 bytes (52428800); a config file is small"),
    "passwd_link": (make_passwd_link, "a link leading out of the workspace (to /etc/passwd)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_workspace_config_is_a_warning_and_the_session_starts(case: str, tmp_path: Path) -> None:
    make, why = CASES[case]
    (Path(os.environ["AGENTD_CONFIG_DIR"])).mkdir(parents=True, exist_ok=True)
    user_cfg = Path(os.environ["AGENTD_CONFIG_DIR"]) / "config.toml"
    saved = user_cfg.read_bytes() if user_cfg.exists() else None
    user_cfg.write_text("[todos]\nmax_items = 7\n")
    try:
        ws = tmp_path / "ws"
        (ws / ".agentd").mkdir(parents=True)
        cfg = ws / ".agentd" / "config.toml"
        make(cfg)
        warnings: list[str] = []
        started = time.monotonic()
        settings = load_settings(ws, warnings=warnings)
        assert time.monotonic() - started < 1.0
        assert warnings == [f"{cfg}: {why}; it was not read"]
        assert settings.todos.max_items == 7  # the user layer still applies
        session = create_session(cwd=ws, settings=settings, provider=ScriptedProvider({"answers": []}),
                                 data_dir=DataDir(tmp_path / "data"), approver=QueueApprover(),
                                 clock=ManualClock(), lines=lambda _l: None)  # fmt: skip
        session.close()
    finally:
        if saved is None:
            user_cfg.unlink()
        else:
            user_cfg.write_bytes(saved)
