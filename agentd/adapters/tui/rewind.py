"""`/rewind` and `/fork` in the terminal client (docs/terminal.md; docs/checkpoints.md; issue 13).

Owns the two commands over the Session's checkpoint API (`checkpoints`, `rewind`, `fork`; PROTOCOL.md
§6.12-§6.14): `/rewind [N] [files|conversation]` picks a prompt's checkpoint (a list when N is left out) and
what to put back (files and conversation, the conversation only, the files only; a command's checkpoint
`N.M` is files only), asks before overwriting files the user changed after the checkpoint, prints what was
restored, removed and kept and how to undo it, and after a conversation rewind offers the rewound prompt
again in the input; `/fork [N]` makes a new session of the history before checkpoint N (default: all of it)
and opens it, the original kept. The work is the core's; this module only asks and shows.
Never imports pygls, lsprotocol or acp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from agentd.adapters.tui.approval import CANCELLED, choose_option
from agentd.errors import UsageError
from agentd.text import visible

if TYPE_CHECKING:
    from agentd.adapters.tui.chat import Chat

WHAT = {"both": (True, True), "conversation": (False, True), "files": (True, False)}
WHAT_WORDS = {"files": "files", "code": "files", "conversation": "conversation", "chat": "conversation"}
PICK_HINT = "↑↓ Enter, or a number; Esc keeps everything as it is"


def prompt_checkpoints(session: Any) -> list[dict[str, Any]]:
    """The checkpoints before the prompts of the conversation as it is now, newest first."""
    listed = session.checkpoints()["checkpoints"]
    return [c for c in reversed(listed) if c.get("before") == "prompt" and c.get("active")]


def label(c: dict[str, Any]) -> str:
    text = " ".join(str(c.get("text") or "").split())
    return f"{c['id']} · {visible(text, one_line=True)[:70]}"


async def rewind_command(chat: Chat, arg: str) -> None:
    """`/rewind [N] [files|conversation]` (see the module docstring)."""
    session = chat.session
    if session is None:
        raise UsageError("no session is open; /resume ID opens one")
    words = arg.split()
    target = words[0] if words else await _pick_target(chat, session)
    if target is None:
        return
    if len(words) > 1:
        what = WHAT_WORDS.get(words[1])
        if what is None:
            raise UsageError(
                f"/rewind {target} {words[1]}: say files or conversation, or leave it out for both"
            )
    elif "." in target and not target.endswith(".end"):
        what = "files"  # a command's checkpoint: the conversation cannot go back to the middle of a turn
    else:
        what = await _pick_what(target) if not words else "both"
    if what is None:
        return
    files, conversation = WHAT[what]
    overwrite = await _overwrite(session, target, conversation) if files else False
    if overwrite is None:
        return
    typed = _prompt_text(session, target) if conversation else ""
    result = await session.rewind(target, files=files, conversation=conversation, overwrite=overwrite)
    _report(chat, result)
    if conversation:
        chat.view.reset_usage()
        chat.prefill = typed


async def _pick_target(chat: Chat, session: Any) -> str | None:
    found = prompt_checkpoints(session)[:9]
    if not found:
        chat.view.note("[no checkpoint yet: one is taken before each prompt]")
        return None
    options = [{"optionId": str(c["id"]), "name": label(c)} for c in found]
    options.append({"optionId": CANCELLED, "name": "(keep everything)", "kind": "reject_once"})
    picked = await choose_option(options, "Rewind to before which prompt?", hint=PICK_HINT)
    return None if picked == CANCELLED else picked


async def _pick_what(target: str) -> str | None:
    options = [
        {"optionId": "both", "name": "Files and conversation"},
        {"optionId": "conversation", "name": "Conversation only (the files stay as they are)"},
        {"optionId": "files", "name": "Files only (the conversation goes on)"},
        {"optionId": CANCELLED, "name": "(keep everything)", "kind": "reject_once"},
    ]
    picked = await choose_option(options, f"Put back what, as it was at checkpoint {target}?", hint=PICK_HINT)
    return None if picked == CANCELLED else picked


async def _overwrite(session: Any, target: str, conversation: bool) -> bool | list[str] | None:
    """False, or the paths the user changed after the checkpoint that should be restored too; None when
    the user backed out."""
    plan = await session.rewind(target, files=True, conversation=conversation, dry_run=True)
    mine = [k["path"] for k in plan["files"]["kept"] if k["reason"] == "changed_by_user"]
    if not mine:
        return False
    shown = ", ".join(visible(p, one_line=True) for p in mine[:5]) + (
        f" and {len(mine) - 5} more" if len(mine) > 5 else ""
    )
    options = [
        {"optionId": "keep", "name": "Leave them as they are", "kind": "reject_once"},
        {"optionId": "overwrite", "name": "Put them back too", "kind": "allow_once"},
        {"optionId": CANCELLED, "name": "(do not rewind)", "kind": "reject_always"},
    ]
    question = f"You changed {shown} after checkpoint {target}."
    picked = await choose_option(options, question, hint="↑↓ Enter, or a key; Esc leaves them as they are")
    return None if picked == CANCELLED else mine if picked == "overwrite" else False


def _report(chat: Chat, result: dict[str, Any]) -> None:
    files, conv = result.get("files"), result.get("conversation")
    parts = []
    if files is not None:
        parts.append(f"files: {len(files['restored'])} restored, {len(files['removed'])} removed")
    if conv is not None:
        parts.append(f"conversation: {conv['messagesBefore']} → {conv['messagesAfter']} messages")
    chat.view.note(f"[rewound to checkpoint {result['to']} · {' · '.join(parts)}]", style="green")
    for kept in (files or {}).get("kept", []):
        chat.view.note(f"  kept {kept['path']} ({str(kept['reason']).replace('_', ' ')})", style="yellow")
    if result.get("checkpoint"):
        chat.view.note(f"[undo the files with: /rewind {result['checkpoint']} files]")


def _prompt_text(session: Any, target: str) -> str:
    """The whole text of the prompt checkpoint `target` stands before (from the replay, before the rewind
    leaves it on an abandoned branch), to offer it again in the input; "" for another checkpoint."""
    cks = session.checkpoints()["checkpoints"]
    mid = next(
        (c.get("messageId") for c in cks if str(c.get("id")) == target and c.get("before") == "prompt"), None
    )
    if mid is None:
        return ""
    for u in session.replay_updates():
        if u.get("sessionUpdate") == "user_message_chunk" and u.get("messageId") == mid:
            return str((u.get("content") or {}).get("text") or "")
    return ""


async def fork_command(chat: Chat, arg: str) -> None:
    """`/fork [N]`: a new session of this one's history before checkpoint N (default: all of it), opened
    here; the original is kept as it is."""
    session = chat.session
    if session is None:
        raise UsageError("no session is open; /resume ID opens one")
    result = session.fork(arg or None)
    at = f"at checkpoint {result['at']}" if result.get("at") else "at its end"
    chat.view.print(Text(f"[forked {session.id} {at} · {result['messages']} messages]", style="green"))
    await chat.open(str(result["sessionId"]))
