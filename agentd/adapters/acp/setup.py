"""Opening a session over ACP, the parts that need no connection state (PROTOCOL.md §4.5, §6.1, §6.2): the
folders a client names (absolute, existing, real), the stored root of a session, the effective settings, the
session's MCP servers (the config's and the client's `mcpServers`), its provider, and closing what was
opened when opening fails. Used by agentd.adapters.acp.host and .checkpoints; imports acp only through
agentd.adapters.acp.errors, never pygls or lsprotocol.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd.adapters.acp.errors import bad_param, rpc
from agentd.errors import ConfigError

if TYPE_CHECKING:
    from agentd.config import Settings
    from agentd.persistence.paths import DataDir
    from agentd.providers.base import Provider


def directory(method: str, raw: str, what: str) -> str:
    """A real, absolute, existing directory (-32602 otherwise)."""
    if not os.path.isabs(raw):
        raise bad_param(
            method, what, f"must be an absolute path (got {raw!r})", "send the folder's absolute path"
        )
    real = os.path.realpath(raw)
    if not os.path.isdir(real):
        raise bad_param(
            method, what, f"{raw} does not exist or is not a directory", "send an existing folder"
        )
    return real


def stored_cwd(data_dir: DataDir, session_id: str) -> str | None:
    """The real path of the folder the session was started in (its `meta.json`), None if unknown."""
    from agentd.persistence.index import read_meta

    cwd = (read_meta(data_dir, session_id) or {}).get("cwd")
    return os.path.realpath(cwd) if isinstance(cwd, str) else None


def settings_of(cwd: str) -> tuple[Settings, list[str]]:
    """The effective settings for a session in `cwd` and the config files' warnings; -32602 for a config
    file agentd cannot use (its message says which and why)."""
    from agentd.config import load_settings

    warnings: list[str] = []
    try:
        return load_settings(Path(cwd), warnings=warnings), warnings
    except ConfigError as exc:
        raise rpc("InvalidParams", exc.message) from None


async def start_mcp(
    settings: Settings, cwd: str, given: list[dict[str, Any]], warnings: list[str], data_dir: DataDir
) -> Any:
    """The session's MCP servers: the config's (agentd.core.factory.session_mcp_specs: a workspace file's
    only once the user trusts it), then the client's `mcpServers` (a name given by the client replaces
    the config's); stdio servers start in the session's sandbox; a server that does not start, or that
    agentd cannot run, is a warning."""
    from agentd.core.factory import session_launcher, session_mcp_specs
    from agentd.mcp.connection import ServerSpec
    from agentd.mcp.manager import start_servers

    specs = session_mcp_specs(settings, Path(cwd))
    for raw in given:
        try:
            specs.append(ServerSpec.from_acp(raw))
        except (ValueError, TypeError, KeyError) as exc:
            kind = raw.get("type", "stdio")
            warnings.append(f"MCP server {raw.get('name')!r} ({kind}) was not started: {exc}")
    launcher = session_launcher(settings, Path(cwd), data_dir) if specs else None
    return await start_servers(specs, Path(cwd), settings, warn=warnings.append, launcher=launcher,
                               secret_env=[settings.api_key_env] if settings.api_key_env else [])  # fmt: skip


def provider_of(settings: Settings) -> Provider:
    """The session's provider (agentd.providers.factory.provider_for). Raises its errors; no key is
    MissingCredentials with the ACP user's remedy (the editor's agent-server `env`, or config.toml), since
    `--provider` is a flag of `agentd run` only."""
    from agentd.errors import MissingCredentials
    from agentd.providers.factory import DEFAULT_KEY_ENV, provider_for

    try:
        return provider_for(settings)
    except MissingCredentials:
        variable = settings.api_key_env or DEFAULT_KEY_ENV.get(settings.provider, "the API key variable")
        raise MissingCredentials(
            f"No API key: set {variable} in the environment your editor starts `agentd --acp` with (the `env` "
            "of its agent server settings), or choose another provider in config.toml (docs/acp.md, "
            '"Configure the model")',
            provider=settings.provider,
            reason="missing_credentials",
        ) from None


async def close_quietly(mcp: Any, provider: Any, session: Any = None) -> None:
    if session is not None:
        with contextlib.suppress(Exception):
            await session.aclose()
    elif mcp is not None:
        with contextlib.suppress(Exception):
            await mcp.aclose()
    with contextlib.suppress(Exception):
        await provider.aclose()
