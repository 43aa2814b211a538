"""The environment of every process agentd starts for the model: commands, and sandboxed servers.

Owns: `PROVIDER_KEY_VARS`, `is_secret_name()` and `child_env()`. A command never receives a variable that
holds an API key or another credential (CONTRACTS.md §10; issue 12 "no API keys in the environment"): the
provider keys, the variable `api_key_env` names, and every name that looks like a credential
(`*API_KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`, `*PRIVATE_KEY*`, `*ACCESS_KEY*`,
case-insensitive), as Codex's default shell environment policy does. `sandbox.pass_env` names variables the
user wants passed anyway; it never brings back a provider key. Imports only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

PROVIDER_KEY_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")

_SECRET_NAME = re.compile(
    r"API_?KEY|TOKEN|SECRET|PASSW(?:OR)?D|CREDENTIAL|PRIVATE_?KEY|ACCESS_?KEY", re.IGNORECASE
)


def is_secret_name(name: str) -> bool:
    """True when an environment variable's name says it holds a credential (see the module docstring)."""
    return _SECRET_NAME.search(name) is not None


def key_vars(api_key_env: str | None) -> set[str]:
    """The provider key variables, plus the one `api_key_env` names (if any)."""
    return set(PROVIDER_KEY_VARS) | ({api_key_env} if api_key_env else set())


def child_env(
    environ: Mapping[str, str], api_key_env: str | None = None, pass_env: Iterable[str] = ()
) -> dict[str, str]:
    """`environ` without provider keys and credential-looking variables; `pass_env` names are kept
    unless they are provider keys. Returns a new dict."""
    never = key_vars(api_key_env)
    keep = set(pass_env) - never
    return {k: v for k, v in environ.items() if k not in never and (k in keep or not is_secret_name(k))}


def dropped_names(environ: Mapping[str, str], api_key_env: str | None = None) -> list[str]:
    """The names `child_env()` drops from `environ` (sorted), for `agentd doctor`."""
    kept = child_env(environ, api_key_env)
    return sorted(k for k in environ if k not in kept)
