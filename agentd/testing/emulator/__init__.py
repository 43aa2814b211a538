"""`agentd.testing.emulator`: stdlib-only emulators of the model APIs agentd talks to (TESTING.md §3).

The Anthropic Messages API (`api="anthropic"`) and OpenAI-compatible chat completions (`api="openai"`),
served on 127.0.0.1 from scenario scripts, with the service's validation texts, SSE grammar, prompt-cache
billing (EMU-TOK-1 tokens) and a journal of every request. This package imports no agentd module, and no
agentd module outside `agentd/testing/` may import it; tests may.

    from agentd.testing.emulator import Emulator, ManualClock, validate_request, count_tokens, ApiError
"""

from __future__ import annotations

from .cache import CacheSim, PrefixCache
from .clock import ManualClock
from .common import Gate
from .openai import validate_chat_request
from .scenario import SUMMARY_TEXT, Answer, load_scenario, text, tool_use
from .server import Emulator
from .tokens import canon, count_tokens
from .validate import ApiError, validate_request

__all__ = [
    "SUMMARY_TEXT",
    "Answer",
    "ApiError",
    "CacheSim",
    "Emulator",
    "Gate",
    "ManualClock",
    "PrefixCache",
    "canon",
    "count_tokens",
    "load_scenario",
    "text",
    "tool_use",
    "validate_chat_request",
    "validate_request",
]
