"""The context window a session works with (issue 17: "know the window"; PROTOCOL.md §4.3 `context.window_tokens`).

Owns: `window_for(configured, tabled, served)` (the rule) and `learn_window(session)` (asks the provider once,
then sets `Session.window_tokens`, which every front end reports; front ends call `Session.learn_window()`). Must not import pygls, lsprotocol, acp
or adapters.

The rule: a window the server says it serves (`Provider.served_window()`, OpenAI-compatible local servers) is a
hard limit, so it is never exceeded: the configured `context.window_tokens` applies when it is smaller (a user may
want less), else the served figure. Without a served figure: the configured window, else the model table's.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("agentd.window")


def window_for(configured: int | None, tabled: int, served: int | None) -> int:
    """The window in tokens: min(served, configured) when the server says it, else configured, else tabled."""
    if served is not None:
        return min(served, configured) if configured else served
    return configured or tabled


async def learn_window(session: Any) -> int:
    """Ask `session.provider` for its served window (providers that can tell cache the answer) and set
    `session.window_tokens` by `window_for`. Returns the window in tokens. A failing probe keeps the window."""
    ask = getattr(session.provider, "served_window", None)
    if ask is None:
        return int(session.window_tokens)
    try:
        served = await ask()
    except Exception as exc:  # a probe never ends a turn
        log.warning("the served window could not be read: %s", exc)
        return int(session.window_tokens)
    if served is not None:
        from agentd.providers.models import context_window

        window = window_for(
            session.settings.context.window_tokens, context_window(session.provider.model), served
        )
        if window != session.window_tokens:
            log.info("context window: %d tokens (served %d)", window, served)
        session.window_tokens = window
    return int(session.window_tokens)
