"""`:checkhealth agentd` in a real Neovim: executable found and `agentd --version`, API key variable
(warn only), data dir writable, Neovim >= 0.11 (else an error)."""

from __future__ import annotations

import sys
from pathlib import Path

from agentd import __version__
from agentd.sandbox import protections
from tests.editors.nvim.harness import Nvim, scrub
from tests.sandbox_fixtures import needs_bwrap

PY = [sys.executable, "-m", "agentd"]
BIN = str(Path(sys.executable).parent)
HEADER = ["", "=" * 78]
NVIM_OK = "- ✅ OK Neovim 0.11.4 (>= 0.11)"
NOT_RUNNING = "- agentd is not running in this Neovim (it starts with the first :Agentd command)"


def test_checkhealth_agentd(nvim_bin: str, tmp_path: Path) -> None:
    """The sandbox line comes from `agentd doctor --json` (issue 12): one OK line when every protection
    holds (bubblewrap works here), else a warning per missing protection (docs/security.md)."""
    status = needs_bwrap()
    sandbox_ok = f"- ✅ OK sandbox: {protections(status, 'auto')[0].text}; every protection holds"
    nvim = Nvim(nvim_bin, tmp_path)
    fresh = tmp_path / "fresh-data"
    not_a_dir = tmp_path / "data-file"  # a file where the data dir should be (root may write anywhere)
    not_a_dir.write_text("")
    cases = [
        # the default cmd { 'agentd' }, found on PATH
        {"name": "ok", "setup": {}, "env": {"ANTHROPIC_API_KEY": "sk-ant-emu-0"}},
        {"name": "no_key", "setup": {"cmd": PY, "data_dir": str(fresh)}, "env": {"ANTHROPIC_API_KEY": False}},
        {
            "name": "missing",
            "setup": {"cmd": ["agentd-does-not-exist"], "init_options": {"provider": "openai"}},
            "env": {"OPENAI_API_KEY": False},
        },
        {"name": "scripted_bad_dir", "setup": {"cmd": PY, "init_options": {"provider": "scripted"},
                                                "data_dir": str(not_a_dir)}},
        {"name": "old_nvim", "setup": {"cmd": PY}, "old_nvim": True},
    ]  # fmt: skip
    out = nvim.run("health", AGENTD_HEALTH_CASES=cases)
    got = scrub(
        out["cases"],
        {sys.executable: "<python>", BIN: "<bin>", str(tmp_path): "<tmp>", __version__: "<version>"},
    )
    key_advice = [
        "  - ADVICE:",
        "    - Set ANTHROPIC_API_KEY in the environment that starts Neovim, then restart agentd.",
        "    - agentd reads API keys only from the environment; settings carry only the variable name (apiKeyEnv).",
    ]
    assert got == {
        "ok": [
            *HEADER,
            "agentd:" + " " * 69 + "✅",
            "",
            "agentd ~",
            NVIM_OK,
            "- ✅ OK executable agentd found: <bin>/agentd",
            "- ✅ OK agentd --version: agentd <version>",
            "- ✅ OK ANTHROPIC_API_KEY is set (provider anthropic)",
            "- ✅ OK data dir <tmp>/data is writable",
            sandbox_ok,
            NOT_RUNNING,
            "",
        ],
        "no_key": [
            *HEADER,
            "agentd:" + " " * 67 + "1 ⚠️",
            "",
            "agentd ~",
            NVIM_OK,
            "- ✅ OK executable found: <python>",
            "- ✅ OK <python> -m agentd --version: agentd <version>",
            "- ⚠️ WARNING ANTHROPIC_API_KEY is not set (provider anthropic): agentd cannot reach the model",
            *key_advice,
            "- ✅ OK data dir <tmp>/fresh-data does not exist yet; agentd will create it (<tmp> is writable)",
            sandbox_ok,
            NOT_RUNNING,
            "",
        ],
        "missing": [
            *HEADER,
            "agentd:" + " " * 61 + "1 ⚠️  1 ❌",
            "",
            "agentd ~",
            NVIM_OK,
            '- ❌ ERROR agentd-does-not-exist not found (cmd = { "agentd-does-not-exist" })',
            "  - ADVICE:",
            "    - Install agentd from a clone of its repository: `pipx install .` there puts it on PATH.",
            "    - Its Python package is agentd-daemon; `pip install agentd` installs an unrelated project.",
            "    - Or set cmd in require('agentd').setup({ cmd = { '/path/to/agentd' } }), e.g. a venv's bin/agentd.",
            "- ⚠️ WARNING OPENAI_API_KEY is not set (provider openai)",
            "  - ADVICE:",
            "    - A local OpenAI-compatible server usually needs no key; a hosted one does.",
            "    - Set it in the environment that starts Neovim.",
            "- ✅ OK data dir <tmp>/data is writable",
            NOT_RUNNING,
            "",
        ],
        "scripted_bad_dir": [
            *HEADER,
            "agentd:" + " " * 67 + "1 ❌",
            "",
            "agentd ~",
            NVIM_OK,
            "- ✅ OK executable found: <python>",
            "- ✅ OK <python> -m agentd --version: agentd <version>",
            "- ✅ OK provider scripted: no API key needed",
            "- ❌ ERROR data dir <tmp>/data-file is not a writable directory",
            "  - ADVICE:",
            "    - Fix its permissions, or set data_dir in setup() / AGENTD_DATA_DIR.",
            sandbox_ok,
            NOT_RUNNING,
            "",
        ],
        "old_nvim": [
            *HEADER,
            "agentd:" + " " * 67 + "1 ❌",
            "",
            "agentd ~",
            "- ❌ ERROR Neovim 0.11.4 is too old: agentd needs Neovim >= 0.11 (vim.lsp.config, vim.lsp.enable)",
            "  - ADVICE:",
            "    - Upgrade Neovim to 0.11 or later.",
            "",
        ],
    }
