"""`agentd doctor`: what protects this machine's commands and configuration (issue 12; docs/security.md).

Owns: `report()` (the facts as one JSON-able dict, also read by `:checkhealth agentd` through
`agentd doctor --json`) and `render()` (the text for the terminal). The facts themselves come from their
owners: `agentd.sandbox.status` (sandbox, file system, secrets, network, agentd's process, cleanup),
`agentd.config` (the configuration layers and their warnings). Never prints; `agentd.cli` writes the text.
Exit code (PROTOCOL.md §3.1): 0 when the configured sandbox mode is honoured, 1 when `sandbox` is `auto` or
`required` and no sandbox works here, 2 for a configuration error.
Imports agentd.config, agentd.sandbox and agentd.permissions; never pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentd import __version__
from agentd.config import Settings, load_settings, user_config_path
from agentd.errors import ConfigError
from agentd.sandbox import detect, missing, protections
from agentd.sandbox.status import SandboxStatus


def report(
    workspace: Path | None, data_dir: Path | str, status: SandboxStatus | None = None
) -> dict[str, Any]:
    """Every fact for `workspace` (None: the user config only) and `data_dir` (a path, or the text of the
    error that made it unusable). `status` defaults to `detect()`. Keys: version, python, platform, config,
    sandbox, permissions, facts, missing, dataDir, exitCode."""
    warnings: list[str] = []
    error: str | None = None
    try:
        settings = load_settings(workspace, warnings=warnings)
    except ConfigError as exc:
        settings, error = Settings.model_validate({}), exc.message
    if isinstance(data_dir, str) and error is None:
        error = data_dir
    found = status or detect()
    box = settings.sandbox
    facts = protections(found, box.mode, box.network)
    honoured = box.mode == "off" or found.available
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "platform": sys.platform,
        "config": {
            "user": str(user_config_path()),
            "workspace": str(workspace / ".agentd" / "config.toml") if workspace else None,
            "warnings": warnings,
            "error": error,
        },
        "sandbox": {
            **found.to_json(),
            "mode": box.mode,
            "network": box.network,
            "active": honoured and box.mode != "off",
        },
        "permissions": {
            "defaultMode": settings.permissions.default_mode,
            "rules": len(settings.permissions.rules),
        },
        "facts": [f.to_json() for f in facts],
        "missing": [f.name for f in missing(facts)],
        "dataDir": str(data_dir) if isinstance(data_dir, Path) else None,
        "exitCode": 2 if error else (0 if honoured else 1),
    }


def render(rep: dict[str, Any]) -> str:
    """The report as text: one line per fact, `ok` or `MISSING`, then what to do."""
    lines = [f"version: agentd {rep['version']} (Python {rep['python']}, {rep['platform']})"]
    cfg = rep["config"]
    lines.append(f"user config: {cfg['user']}")
    if cfg["workspace"]:
        absent = "" if Path(cfg["workspace"]).is_file() else " (none)"
        lines.append(f"workspace config: {cfg['workspace']}{absent}")
    if cfg["error"]:
        lines.append(f"  ERROR {cfg['error']}")
    lines += [f"  warning: {w}" for w in cfg["warnings"]]
    lines.append(f"data dir: {rep['dataDir'] or 'not usable (see the error above)'}")
    perms = rep["permissions"]
    lines.append(f"permission mode: {perms['defaultMode']}; configured rules: {perms['rules']}")
    lines.append("")
    width = max(len(f["name"]) for f in rep["facts"])
    for fact in rep["facts"]:
        mark = "ok     " if fact["ok"] else "MISSING"
        lines.append(f"{mark} {fact['name']:<{width}}  {fact['text']}")
    if rep["missing"]:
        lines.append("")
        lines.append("missing protections: " + ", ".join(rep["missing"]))
        if not rep["sandbox"]["available"] and rep["sandbox"]["problem"]:
            lines.append(f"to fix: {rep['sandbox']['problem']}")
    return "\n".join(lines) + "\n"
