"""The SDK's Agent: ACP v1 methods onto the host (PROTOCOL.md §4.5, §5, §6; ACP schema v1).

Owns: `AgentdAgent`, whose methods the `agent-client-protocol` SDK calls with validated params (a failure is
`-32602`, reworded by the transport): `initialize` (protocolVersion 1 whatever the client asks; load, list,
close, resume and additional directories; text, resource links, embedded resources and, when the model
takes them, images; MCP over stdio and HTTP; one auth method), `authenticate`, `session/new`,
`session/load`, `session/resume`, `session/list`, `session/prompt`, `session/cancel`, `session/set_mode`,
`session/set_config_option` (the mode, for clients of config options), `session/close`, and the extension methods `_agentd/session/todos`, `_agentd/session/status`,
`_agentd/session/compact`, and `_agentd/session/checkpoints|rewind|fork` (agentd.adapters.acp.checkpoints;
the SDK hands them over without the leading underscore). Every error leaves
as a `RequestError` with `data.name` (`agentd.adapters.acp.errors`). Holds no state of its own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from agentd.adapters.acp import checkpoints
from agentd.adapters.acp.errors import busy, error_of, rpc
from agentd.adapters.acp.host import AcpHost
from agentd.core.session import SessionBusyError
from agentd.protocol import methods

log = logging.getLogger("agentd.acp")

PROTOCOL_VERSION = 1
EXTENSIONS = ("agentd/session/todos", "agentd/session/status", "agentd/session/compact", "agentd/session/history",
              *checkpoints.METHODS)  # fmt: skip
AUTH_METHOD = {
    "id": "agentd-env",
    "name": "Set ANTHROPIC_API_KEY (or configure a provider), then retry",
    "description": "agentd reads the key from the environment the editor starts it with, or uses the provider "
    "of its config.toml (an OpenAI-compatible server on this machine needs no key).",
}
T = TypeVar("T")


def handler(method: str) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
    """Map whatever the wrapped method raises to the `RequestError` of `method`."""

    def wrap(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> T:
            try:
                return await fn(*args, **kwargs)
            except SessionBusyError as exc:
                raise rpc("SessionBusy", str(exc)) from None
            except Exception as exc:
                raise error_of(exc, method) from None

        return run

    return wrap


def _dicts(items: list[Any] | None) -> list[dict[str, Any]]:
    return [
        i.model_dump(by_alias=True, exclude_none=True) if isinstance(i, BaseModel) else i for i in items or []
    ]


class AgentdAgent:
    """See the module docstring. `resume`: `{sessionId, cwd}` of the `--resume` session, announced in the
    initialize result until the client loads it."""

    def __init__(self, host: AcpHost) -> None:
        self.host = host

    def on_connect(self, conn: Any) -> None:
        self.host.conn = conn

    @handler("initialize")
    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        host = self.host
        if host.data_dir_error is not None:
            raise rpc("StorageError", host.data_dir_error)
        fs = getattr(client_capabilities, "fs", None)
        host.caps.read_text_file = bool(getattr(fs, "read_text_file", False))
        host.caps.write_text_file = bool(getattr(fs, "write_text_file", False))
        name = getattr(client_info, "name", None) or "an ACP client"
        log.info("initialize from %s (protocol %s, fs %s)", name, protocol_version, host.caps)
        import agentd

        meta: dict[str, Any] = {
            "protocolVersion": methods.PROTOCOL_VERSION,
            "methods": [f"_{m}" for m in EXTENSIONS],
        }
        picked = _provider_model()
        images = bool(picked.pop("images"))
        meta.update(picked)
        if host.resume is not None:
            meta["resume"] = {"sessionId": host.resume.session.id, "cwd": str(host.resume.session.cwd)}
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": images, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": False},
                "sessionCapabilities": {"list": {}, "close": {}, "resume": {}, "additionalDirectories": {}},
            },
            "agentInfo": {"name": "agentd", "title": "agentd", "version": agentd.__version__},
            "authMethods": [AUTH_METHOD],
            "_meta": {"agentd": meta},
        }  # fmt: skip

    @handler("authenticate")
    async def authenticate(self, method_id: str, **kwargs: Any) -> dict[str, Any]:
        """Read the user config and the environment again; `{}` once a provider is usable, else -32000."""
        from agentd.adapters.acp.setup import provider_of
        from agentd.config import load_settings

        provider = provider_of(load_settings(None))
        await provider.aclose()
        return {}

    @handler("session/new")
    async def new_session(
        self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:  # fmt: skip
        return await self.host.new_session(cwd, list(additional_directories or []), _dicts(mcp_servers))

    @handler("session/load")
    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None, **kwargs: Any,
    ) -> dict[str, Any]:  # fmt: skip
        extra = list(additional_directories or [])
        return await self.host.load_session(session_id, cwd, extra, _dicts(mcp_servers), replay=True)

    @handler("session/resume")
    async def resume_session(
        self, session_id: str, cwd: str, additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None, **kwargs: Any,
    ) -> dict[str, Any]:  # fmt: skip
        extra = list(additional_directories or [])
        return await self.host.load_session(session_id, cwd, extra, _dicts(mcp_servers), replay=False)

    @handler("session/list")
    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self.host.list_sessions(cwd, cursor)

    @handler("session/prompt")
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> dict[str, Any]:
        return await self.host.prompt(session_id, _dicts(prompt))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.host.cancel(session_id)

    @handler("session/set_mode")
    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> dict[str, Any]:
        self.host.set_mode(session_id, mode_id)
        return {}

    @handler("session/set_config_option")
    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **kwargs: Any
    ) -> dict[str, Any]:
        return self.host.set_config_option(session_id, config_id, value)

    @handler("session/close")
    async def close_session(self, session_id: str, **kwargs: Any) -> dict[str, Any]:
        await self.host.close(session_id)
        return {}

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._ext(method, params)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("ignored the extension notification _%s", method)

    async def _ext(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        name = f"_{method}"
        try:
            if method not in EXTENSIONS:
                raise rpc("MethodNotFound", f"agentd does not implement {name}; see _meta.agentd.methods in its "
                          "initialize result.", method=name)  # fmt: skip
            sid = params.get("sessionId")
            if not isinstance(sid, str):
                raise rpc("InvalidParams", f"{name}: sessionId: a string is required; send the session's id.",
                          errors=[{"loc": "sessionId", "msg": "required"}])  # fmt: skip
            if method in checkpoints.METHODS:
                return await checkpoints.call(self.host, method, params)
            s = self.host.hosted_of(sid).session
            if method.endswith("/todos"):
                return s.todos()
            if method.endswith("/status"):
                return s.status()
            if method.endswith("/history"):
                before = params.get("before")
                if not isinstance(before, int) or isinstance(before, bool):
                    raise rpc("InvalidParams", f"{name}: before: an integer is required (a summary's "
                              "_meta.agentd.earlier.before).", errors=[{"loc": "before", "msg": "required"}])  # fmt: skip
                return await asyncio.to_thread(s.history, before)  # file reads off the loop (break16 F4)
            if s.busy or self.host.hosted_of(sid).prompt_task is not None:
                raise busy(sid)
            return await s.compact()
        except SessionBusyError as exc:
            raise rpc("SessionBusy", str(exc)) from None
        except Exception as exc:
            raise error_of(exc, name) from None


def _provider_model() -> dict[str, str | bool]:
    """The provider and model the user's configuration picks (a workspace file may change them later), and
    whether that model takes images (`images`)."""
    from agentd.config import load_settings
    from agentd.providers.models import DEFAULT_MODELS

    try:
        settings = load_settings(None)
        model = settings.model or DEFAULT_MODELS[settings.provider]
        return {"provider": settings.provider, "model": model, "images": settings.accepts_images()}
    except Exception:
        return {"provider": "anthropic", "model": DEFAULT_MODELS["anthropic"], "images": True}
