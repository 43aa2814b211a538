"""The model table: context windows of known models (PROTOCOL.md §4.3 `context.window_tokens`).

Owns: `MODEL_WINDOWS`, `DEFAULT_WINDOW_TOKENS`, `DEFAULT_MODELS`, `context_window()`, whether a model takes
images in prompts (`IMAGE_MODELS`, `accepts_images()`), and how a provider and its model are named to a person
(`model_label()`). Imports nothing from agentd and no SDK. Windows are the
providers' published input limits in tokens (Anthropic models overview, OpenAI model pages, DeepSeek and Moonshot
API docs); a model not listed gets 32768, a safe size for local servers.
"""

from __future__ import annotations

DEFAULT_WINDOW_TOKENS = 32768

# Default model per provider (PROTOCOL.md §4.3 `model`: "the provider's default model").
DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-4-6",
    "openai": "gpt-4o-mini",
    "scripted": "scripted",
}

MODEL_WINDOWS: dict[str, int] = {
    # Anthropic (standard window; 1M-token windows need a beta header agentd does not send)
    "claude-opus-4-7": 200_000,
    "claude-opus-4-6": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4-6": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    # OpenAI
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # DeepSeek
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    # Moonshot / Kimi
    "kimi-k2": 131_072,
    "moonshot-v1-8k": 8_192,
    "moonshot-v1-32k": 32_768,
    "moonshot-v1-128k": 131_072,
}


# Models of the `openai` provider's table that take images in a prompt (the providers' model pages: DeepSeek's
# and Kimi K2's chat models are text only). Every Anthropic model takes them.
IMAGE_MODELS: frozenset[str] = frozenset(
    {
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4.1-nano",
        "gpt-5",
        "gpt-5-mini",
        "o3",
        "o4-mini",
    }
)


def _table_name(model: str) -> str | None:
    """The table entry naming `model`: exact name first, then the longest table name that prefixes it followed by
    `-` (dated ids such as `claude-sonnet-4-5-20250929`, `kimi-k2-0905-preview`), else None."""
    if model in MODEL_WINDOWS:
        return model
    matches = [name for name in MODEL_WINDOWS if model.startswith(name + "-")]
    return max(matches, key=len) if matches else None


def context_window(model: str) -> int:
    """The context window of `model` in tokens: the table's (`_table_name`), else `DEFAULT_WINDOW_TOKENS`."""
    name = _table_name(model)
    return MODEL_WINDOWS[name] if name else DEFAULT_WINDOW_TOKENS


def accepts_images(provider: str, model: str | None, configured: bool | None = None) -> bool:
    """Whether prompts to `model` of `provider` may carry images (ACP/agentd `promptCapabilities.image`).

    The `images` setting wins when set (`configured`); else: `scripted` never, `anthropic` always, `openai` only
    for a table model in `IMAGE_MODELS` (a model the table does not know, e.g. one served by Ollama or llama.cpp,
    is assumed text only: set `images = true` for a vision model).
    """
    if configured is not None:
        return configured
    if provider in ("scripted", "anthropic"):
        return provider == "anthropic"
    name = _table_name(model or DEFAULT_MODELS.get(provider, ""))
    return name in IMAGE_MODELS


def model_label(provider: str, model: str, *, provider_first: bool = True) -> str:
    """The provider and model as a person reads them: `anthropic claude-sonnet-4-6` (or, with
    `provider_first=False`, `claude-sonnet-4-6 (anthropic)`); the name once when the model is named as its
    provider (the scripted model is `scripted`: never `scripted scripted`) or the provider is unknown."""
    if not provider or provider == model:
        return model
    return f"{provider} {model}" if provider_first else f"{model} ({provider})"
