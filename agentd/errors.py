"""Operator-facing errors and their exit codes (PROTOCOL.md §3.1, §11).

Owns: the exception types that mean "the person running agentd must do something". Mistakes of the model
(bad tool input, a failing command) are never exceptions: they become `is_error` tool results.
Imports nothing from agentd.
"""

from __future__ import annotations

from typing import Any

# The exit codes of the command line that are not an error's (PROTOCOL.md §3.1); agentd.cli re-exports them.
EXIT_OK, EXIT_USAGE, EXIT_PROVIDER, EXIT_STOP, EXIT_SIGINT = 0, 2, 6, 7, 130
EXIT_NO_TERMINAL = 9  # `run`: every action (write) of the turn was refused: no terminal to ask (H9, R7)
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a Unix tool whose reader went away (H7)


class AgentdError(Exception):
    """Base of operator-facing errors.

    `message` says what happened and what to do next. `exit_code` is the CLI exit code (PROTOCOL.md §3.1);
    `rpc_code` / `rpc_name` the JSON-RPC error of PROTOCOL.md §11.
    """

    exit_code = 2
    rpc_code = -32603
    rpc_name = "InternalError"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class UsageError(AgentdError):
    """Bad command line (exit 2)."""

    exit_code = 2
    rpc_code = -32602
    rpc_name = "InvalidParams"


class ConfigError(AgentdError):
    """Bad configuration, unknown provider, missing workspace or malformed scenario (exit 2)."""

    exit_code = 2
    rpc_code = -32602
    rpc_name = "InvalidParams"


class SessionNotFound(AgentdError):
    """No session with this id in the data dir (exit 3, -32010)."""

    exit_code = 3
    rpc_code = -32010
    rpc_name = "SessionNotFound"


class SessionLocked(AgentdError):
    """Another live process holds the session lock (exit 4, -32012). `data`: pid, hostname, since."""

    exit_code = 4
    rpc_code = -32012
    rpc_name = "SessionLocked"


class InvalidHistory(AgentdError):
    """agentd built a request (or a compacted history) its own validator rejects: a bug; nothing is sent
    (CONTRACTS.md §8)."""

    rpc_code = -32603


class StorageError(AgentdError):
    """The session log or lock cannot be written, or the log is damaged beyond a torn last line (exit 5)."""

    exit_code = 5
    rpc_code = -32016
    rpc_name = "StorageError"


class UnsupportedSessionVersion(StorageError):
    """The session log was written by a newer agentd (exit 5, -32017)."""

    rpc_code = -32017
    rpc_name = "UnsupportedSessionVersion"


class ProviderError(AgentdError):
    """The provider failed for good (exit 6, -32015).

    `reason` is one of `missing_credentials`, `authentication`, `bad_request`, `unavailable`.
    `retryable` tells the retry loop (providers/base.py) whether another attempt may succeed;
    `retry_after_s` is the server's hint in seconds, if it gave one; `http_status` the HTTP status or None;
    `max_attempts` caps the attempts for this failure (a refused connection on this machine: 2), None = the
    time budget alone decides.
    """

    exit_code = 6
    rpc_code = -32015
    rpc_name = "ProviderError"

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        reason: str,
        http_status: int | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
        max_attempts: int | None = None,
    ) -> None:
        super().__init__(
            message, provider=provider, reason=reason, httpStatus=http_status, retryable=retryable
        )
        self.provider = provider
        self.reason = reason
        self.http_status = http_status
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.max_attempts = max_attempts


class MissingCredentials(ProviderError):
    """No API key in the environment variable the config names (exit 2 for `agentd run`)."""

    exit_code = 2


class ContextExceeded(ProviderError):
    """The provider refused the request because the prompt does not fit its context window (issue 17): HTTP 400/413
    with "exceeds the available context size" (llama.cpp), `context_length_exceeded` / "maximum context length"
    (OpenAI, vLLM), "prompt is too long" (Anthropic). `window_tokens` is the window the error states, if any.
    The loop answers it once per request by compressing the history to fit, then retries."""

    def __init__(
        self, message: str, *, provider: str, http_status: int | None, window_tokens: int | None
    ) -> None:
        super().__init__(message, provider=provider, reason="bad_request", http_status=http_status)
        self.window_tokens = window_tokens
