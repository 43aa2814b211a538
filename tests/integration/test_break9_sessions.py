"""H12 class (break9): a session whose meta.json is damaged (a crash mid-rename on an old agentd, a disk
error, an editor that saved over it) was hidden from `sessions list`, from `agentd/session/list` and from
`--continue`, though opening it by id rebuilds meta.json from the log: it looked lost. The read-only views
now list it from its log's first record, marked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentd.persistence.index import list_sessions, newest_session
from tests.integration.conftest import answers_of, text


@pytest.mark.parametrize("damage", ["garbage", "binary", "missing", "list"])
async def test_a_session_with_a_damaged_meta_json_is_still_listed(
    make_harness, workspace: Path, data_dir: Path, damage: str
) -> None:
    """H12 (break9): listed (marked `metaRebuilt`, with its workspace and model from the log), found by
    `--continue` for its workspace, and shown by `agentd sessions list` with a note."""
    h = make_harness(answers_of([text("hi")]))
    assert await h.session.prompt([{"type": "text", "text": "first"}]) == "end_turn"
    h.session.close()
    sid = h.session.id
    meta = data_dir / "sessions" / sid / "meta.json"
    if damage == "missing":
        meta.unlink()
    else:
        meta.write_bytes({"garbage": b"{not json", "binary": b"\xff\xfe\x00", "list": b"[1, 2]"}[damage])
    (listed,) = list_sessions(data_dir)
    assert (listed["id"], listed["cwd"], listed["metaRebuilt"]) == (sid, str(workspace), True)
    assert newest_session(data_dir, workspace) == sid
    env = {**os.environ, "AGENTD_DATA_DIR": str(data_dir)}
    out = subprocess.run([sys.executable, "-m", "agentd", "sessions", "list"], env=env, text=True,
                         capture_output=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 0 and sid in out.stdout and "meta.json damaged" in out.stdout
    h2 = make_harness(answers_of([text("again")]), resume=sid)  # its next write rebuilds meta.json
    assert await h2.session.prompt([{"type": "text", "text": "second"}]) == "end_turn"
    h2.session.close()
    assert "metaRebuilt" not in list_sessions(data_dir)[0]
