"""Slash commands of the ACP adapter (ACP "Slash Commands"; docs/acp.md).

Owns: `COMMANDS` (what `available_commands_update` advertises after `session/new`, `session/load` and
`session/resume`), `command_of()` (a prompt that is one of them: its first text block starts with `/<name>`)
and `run()`, which answers it with an `agent_message_chunk` and `end_turn`, without a model request:
- `/compact`: compress the history now (the `agentd/session/compact` of the LSP adapter, PROTOCOL.md §6.9);
- `/status`: the model, context size, token and cache totals, cost and sandbox (`agentd/session/status`);
- `/reload-instructions`: read the project's AGENTS.md files again (docs/instructions.md).
They are not part of the conversation: nothing is stored, so a `session/load` does not replay them. A
prompt starting with any other `/word` goes to the model unchanged. Uses a Session's public API only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentd.core.journal import new_message_id
from agentd.protocol import updates
from agentd.providers.models import model_label

if TYPE_CHECKING:
    from agentd.core.session import Session

COMMANDS: tuple[tuple[str, str], ...] = (
    ("compact", "Compress the conversation history now (the plan is kept)"),
    ("status", "Show the model, context size, token and cache totals, cost and sandbox"),
    ("reload-instructions", "Read the project's AGENTS.md files again"),
)


def available_commands_update() -> dict[str, Any]:
    """The ACP `available_commands_update` of `COMMANDS`."""
    return {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [{"name": n, "description": d} for n, d in COMMANDS],
    }


def command_of(blocks: list[dict[str, Any]]) -> str | None:
    """The command a prompt is (its first block's text is `/<name>` and nothing but whitespace follows), or
    None."""
    first = blocks[0] if blocks else {}
    if len(blocks) != 1 or first.get("type") != "text":
        return None
    words = str(first.get("text", "")).split()
    if len(words) != 1 or not words[0].startswith("/"):
        return None
    name = words[0][1:]
    return name if any(name == n for n, _ in COMMANDS) else None


async def run(name: str, session: Session, emit: Callable[[dict[str, Any]], None]) -> str:
    """Run command `name` on `session`, sending its answer through `emit`; the stop reason (`end_turn`).
    Raises as the Session method it calls (SessionBusyError, ProviderError, UsageError)."""
    if name == "compact":
        text = _compacted(await session.compact())
    elif name == "status":
        text = _status(session.status())
    else:
        files = session.reload_instructions().files
        text = (
            "Reloaded the project instructions: " + ", ".join(f.path for f in files) + "."
            if files
            else "No AGENTS.md (or CLAUDE.md) file found; the session runs without project instructions."
        )
    emit(updates.agent_message_chunk(new_message_id(), text))
    return "end_turn"


def _compacted(result: dict[str, Any]) -> str:
    if not result.get("compacted"):
        return "Nothing to compress yet: the history is too short."
    return (
        f"Compressed the history: {result['messagesBefore']} -> {result['messagesAfter']} messages, about "
        f"{result['tokensBefore']:,} -> {result['tokensAfter']:,} tokens."
    )


def _status(st: dict[str, Any]) -> str:
    ctx, t = st["context"], st["totals"]
    lines = [
        f"Model: {model_label(st['provider'], st['model'], provider_first=False)}, mode {st['mode']}, "
        f"{st['turns']} turn{'' if st['turns'] == 1 else 's'}.",
        f"Context: {ctx['usedTokens']:,} of {ctx['windowTokens']:,} tokens (compresses at "
        f"{ctx['compressThresholdTokens']:,}; {ctx['messages']} messages, {ctx['compactions']} compactions).",
        f"Requests: {t['requests']}; tokens in {t['inputTokens']:,}, out {t['outputTokens']:,}, cache read "
        f"{t['cacheReadTokens']:,}, cache write {t['cacheWriteTokens']:,}.",
    ]
    if "costEstimate" in st:
        lines.append(f"Cost estimate: ${st['costEstimate']['amount']:.4f}.")
    box = st.get("sandbox") or {}
    missing = ", ".join(box.get("missing") or []) or "none"
    lines.append(
        f"Sandbox: {box.get('label') or 'none'} (mode {box.get('mode')}; missing protections: {missing})."
    )
    return "\n".join(lines)
