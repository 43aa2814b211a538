"""H20 in VS Code: the extension's `src/visible.ts` (used for the approval dialog and the diff title)
escapes exactly like the daemon's `agentd.text.visible`, with the table generated into `src/protocol.ts`.

The TypeScript is transpiled with the `typescript` package `.ci/lint/install.sh` installs (as `.ci/run`
does) and run by node; without them the test is skipped, or fails under AGENTD_TEST_STRICT=1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentd.protocol.display import ESCAPED_RANGES
from agentd.text import ESCAPED_SAMPLE, visible

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "editor-clients" / "vscode" / "src"
TYPESCRIPT = REPO / ".ci" / "lint" / "node_modules" / "typescript"

SCRIPT = r"""
const ts = require(process.env.TYPESCRIPT);
const fs = require("fs");
const path = require("path");
const out = process.env.OUT_DIR;
for (const name of ["protocol", "visible"]) {
  const src = fs.readFileSync(path.join(process.env.SRC, name + ".ts"), "utf8");
  const js = ts.transpileModule(src, { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 } });
  fs.writeFileSync(path.join(out, name + ".js"), js.outputText);
}
const { visible } = require(path.join(out, "visible.js"));
const sample = JSON.parse(process.env.SAMPLE);
const ranges = [];
let start = null;
for (let cp = 0; cp <= 0x10ffff; cp++) {
  const ch = String.fromCodePoint(cp);
  const changed = cp !== 10 && visible(ch) !== ch;
  if (changed && start === null) start = cp;
  if (!changed && start !== null) { ranges.push([start, cp - 1]); start = null; }
}
if (start !== null) ranges.push([start, 0x10ffff]);
process.stdout.write(JSON.stringify({
  sample: visible(sample), oneLine: visible(sample, true), ranges,
  lone: visible("a\udcffb"),
}));
"""


def test_visible_ts_escapes_like_the_daemon(tmp_path: Path) -> None:
    """H20: the same code points, the same escape forms (`\\xNN`, `\\uNNNN`, `\\UNNNNNNNN`, `\\r`, `\\n`)."""
    node = shutil.which("node")
    if node is None or not TYPESCRIPT.is_dir():
        why = "node and .ci/lint/node_modules/typescript (bash .ci/lint/install.sh)"
        if os.environ.get("AGENTD_TEST_STRICT") == "1":
            pytest.fail(f"missing {why} (AGENTD_TEST_STRICT=1: a missing prerequisite is a failure)")
        pytest.skip(f"missing {why}")
    sample = ESCAPED_SAMPLE + "\nnext\tline é 中 😀"
    env = dict(
        os.environ, TYPESCRIPT=str(TYPESCRIPT), SRC=str(SRC), OUT_DIR=str(tmp_path), SAMPLE=json.dumps(sample)
    )
    proc = subprocess.run(
        [node, "-e", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["sample"] == visible(sample)
    assert got["oneLine"] == visible(sample, one_line=True)
    assert [tuple(r) for r in got["ranges"]] == list(ESCAPED_RANGES)
    assert got["lone"] == "a\\udcffb"
