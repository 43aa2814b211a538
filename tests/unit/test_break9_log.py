"""H21 (break9): a FIFO planted where `--log-file` points (with no reader) made agentd hang at start, in
`open()`, before any output. It is refused with a clear error (exit 2), never waited on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_fifo_without_a_reader_as_log_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    """H21 (break9)."""
    fifo = tmp_path / "agentd.log"
    os.mkfifo(fifo)
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-m", "agentd", "--log-file", str(fifo), "sessions", "list"], env=env,
                         text=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 2
    assert out.stderr == (
        f"agentd: --log-file {fifo}: is a FIFO that nothing reads; start its reader or choose another --log-file\n"
    )
