"""Building a provider from configuration (PROTOCOL.md §4.3 `provider`, `model`, `base_url`, `api_key_env`,
`scenario`, `openai.*`).

Owns: `make_provider`, `PROVIDERS`. Reads the API key from the environment variable `api_key_env` names and
nowhere else (CONTRACTS.md §10); the key is never logged. Imports no SDK (the provider modules import theirs
lazily). Must not import pygls, lsprotocol, acp or an adapter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentd.clock import Clock, SystemClock
from agentd.errors import ConfigError, MissingCredentials
from agentd.providers.base import Provider, is_local
from agentd.providers.http import ClientPool
from agentd.providers.models import DEFAULT_MODELS

PROVIDERS = ("anthropic", "openai", "scripted")
DEFAULT_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
DEFAULT_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
PLACEHOLDER_KEY = "not-needed"


def _option(options: Any, key: str) -> Any:
    if options is None:
        return None
    if isinstance(options, Mapping):
        return options.get(key)
    return getattr(options, key, None)


def _api_key(name: str, api_key_env: str, base_url: str | None, env: Mapping[str, str]) -> str:
    key = env.get(api_key_env, "").strip()
    if key:
        return key
    if name == "openai" and is_local(base_url):
        return PLACEHOLDER_KEY
    raise MissingCredentials(
        f"No API key: set {api_key_env} in the environment (or choose another provider with --provider)",
        provider=name,
        reason="missing_credentials",
    )


def make_provider(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    scenario: dict[str, Any] | str | Path | None = None,
    openai_options: Mapping[str, Any] | Any = None,
    retries: Mapping[str, Any] | Any = None,
    clock: Clock | None = None,
    env: Mapping[str, str] | None = None,
    pool: ClientPool | None = None,
) -> Provider:
    """The provider `name` ("anthropic", "openai" or "scripted") for `model` (default: `DEFAULT_MODELS`).

    `base_url` None falls back to `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, then the SDK's default. The key comes
    from `env[api_key_env]` (`env` defaults to `os.environ`; `api_key_env` to `ANTHROPIC_API_KEY` /
    `OPENAI_API_KEY`); an openai provider on localhost/127.0.0.1 needs none. `scenario` (dict or file path) is
    required for "scripted"; `openai_options` (mapping or object) gives `temperature` and `seed`; `retries`
    (mapping or object, the `retries` settings) gives `request_timeout_s` and `read_timeout_s` (seconds).
    HTTP providers share one HTTP client per configuration through `pool` (default: the process's pool).

    Raises `ConfigError` (unknown provider, no scenario, malformed scenario) or `MissingCredentials`.
    """
    env = os.environ if env is None else env
    clock = clock or SystemClock()
    if name not in PROVIDERS:
        raise ConfigError(f"unknown provider '{name}'; use anthropic, openai or scripted")
    model = model or DEFAULT_MODELS[name]
    if name == "scripted":
        if scenario is None:
            raise ConfigError(
                "provider 'scripted' needs a scenario: set scenario = \"FILE\" or pass --scenario FILE"
            )
        from agentd.providers.scripted import ScriptedProvider

        return ScriptedProvider(scenario, clock=clock, model=model)
    base_url = base_url or env.get(DEFAULT_URL_ENV[name]) or None
    key_env = api_key_env or DEFAULT_KEY_ENV[name]
    key = _api_key(name, key_env, base_url, env)
    timeouts: dict[str, float] = {}
    for setting, param in (("request_timeout_s", "timeout_s"), ("read_timeout_s", "read_timeout_s")):
        if (value := _option(retries, setting)) is not None:
            timeouts[param] = float(value)
    if name == "anthropic":
        from agentd.providers.anthropic import AnthropicProvider

        return AnthropicProvider(model, key, base_url, clock, api_key_env=key_env, pool=pool, **timeouts)
    from agentd.providers.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(
        model,
        key,
        base_url,
        clock,
        temperature=_option(openai_options, "temperature"),
        seed=_option(openai_options, "seed"),
        reminder_role=_option(openai_options, "reminder_role") or "system",
        api_key_env=key_env,
        pool=pool,
        **timeouts,
    )


def provider_for(settings: Any, **kwargs: Any) -> Provider:
    """`make_provider` for the effective settings (`agentd.config.Settings`): its provider, model, base URL,
    key variable, scenario, `openai` options and `retries`; `kwargs` as for `make_provider` (env, clock, pool).
    Raises as `make_provider`."""
    return make_provider(settings.provider, model=settings.model, base_url=settings.base_url,
                         api_key_env=settings.api_key_env, scenario=settings.scenario,
                         openai_options=settings.openai, retries=settings.retries, **kwargs)  # fmt: skip
