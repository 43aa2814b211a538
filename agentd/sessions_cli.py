"""`agentd sessions list | show | export | rm` (PROTOCOL.md §3.1): read-only views of stored sessions.

Owns: rendering a session log as a readable transcript (with the current plan) and as Markdown.
`list` reads only `meta.json` files; `show` and `export` never lock and never change a byte, so they work
on a session another process holds. Output goes to stdout (these are not server modes), control characters
escaped (`agentd.text.terminal_safe`: a stored reply cannot drive the terminal); `export --format jsonl` is
the log itself (JSON escapes them).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agentd.core.instructions import Instructions
from agentd.persistence.branches import active_seqs
from agentd.persistence.index import delete_session, list_sessions, read_meta
from agentd.persistence.paths import DataDir
from agentd.persistence.records import restore_message
from agentd.persistence.store import read_blob, read_records
from agentd.text import terminal_safe


def sessions_command(args: argparse.Namespace, data_dir: DataDir) -> int:
    """Dispatch a `sessions` subcommand; returns the exit code. Raises SessionNotFound (exit 3) etc."""
    cmd = args.sessions_command
    if cmd == "list":
        return _list(data_dir, args.workspace)
    if cmd == "rm":
        delete_session(data_dir, args.id)
        sys.stderr.write(f"deleted session {args.id}\n")
        return 0
    records, warnings = read_records(data_dir, args.id)
    for w in warnings:
        sys.stderr.write(f"agentd: warning: {w}\n")
    if cmd == "export" and args.format == "jsonl":
        sys.stdout.write(
            data_dir.log_path(args.id).read_text(encoding="utf-8")
            if not warnings
            else "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
        )
        return 0
    markdown = cmd == "export"
    asked = (read_meta(data_dir, args.id) or {}).get("model")
    blob = lambda ref: read_blob(data_dir, args.id, ref)  # noqa: E731
    sys.stdout.write(terminal_safe(render_transcript(args.id, records, blob, markdown, model=asked)))
    return 0


def _list(data_dir: DataDir, workspace: str | None) -> int:
    sessions = list_sessions(data_dir, workspace)
    if not sessions:
        sys.stderr.write("no sessions" + (f" for {workspace}" if workspace else "") + "\n")
        return 0
    out = sys.stdout
    out.write(f"{'ID':<34} {'UPDATED':<20} {'TURNS':>5} {'TOKENS':>9}  WORKSPACE  TITLE\n")
    for m in sessions:
        tokens = m.get("tokens") or {}
        total = sum(int(tokens.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite"))
        lock = f"  [open in pid {m['lockedBy'].get('pid')}]" if m.get("lockedBy") else ""
        lock += (
            "  [meta.json damaged: rebuilt when the session is next opened]" if m.get("metaRebuilt") else ""
        )
        out.write(
            terminal_safe(
                f"{m.get('id', '?'):<34} {str(m.get('updatedAt', ''))[:19]:<20} {m.get('turns', 0):>5} {total:>9}  "
                f"{m.get('cwd', '')}  {m.get('title') or ''}{lock}"
            )
            + "\n"
        )
    return 0


def _block_text(block: dict[str, Any], markdown: bool) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        args = json.dumps(block.get("input"), ensure_ascii=False)
        return f"`{block.get('name')}` {args}" if markdown else f"-> {block.get('name')} {args}"
    if kind == "tool_result":
        content = block.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        text = text if len(text) <= 2000 else text[:2000] + f"\n[... {len(text) - 2000} more characters]"
        label = "error" if block.get("is_error") else "result"
        return f"**{label}:**\n```\n{text}\n```" if markdown else f"<- {label}: {text}"
    return f"[{kind}]"


def _rewind_line(rec: dict[str, Any]) -> str:
    what = " and ".join(w for w in ("files", "conversation") if rec.get(w))
    kept = f"; {len(rec['kept'])} path(s) left as they were" if rec.get("kept") else ""
    return f"--- rewind {rec.get('id')}: {what} back to checkpoint {rec.get('to')}{kept} ---"


def render_transcript(
    session_id: str, records: list[dict[str, Any]], blob: Any, markdown: bool, model: str | None = None
) -> str:
    """A readable transcript of the log (every original message, compactions marked; after a conversation
    rewind the abandoned branch's messages stay, marked `abandoned`, issue 13) and the current plan.

    `model`: the model the session last asked for (meta.json; H11), else the one it was created with."""
    lines: list[str] = []
    meta = next((r for r in records if r.get("kind") == "meta"), {})
    todos: list[dict[str, Any]] = []
    head = f"# Session {session_id}" if markdown else f"Session {session_id}"
    first = meta.get("model")
    shown = str(model or first or "?") + (
        f" (created with {first})" if model and first and model != first else ""
    )
    lines += [head, f"workspace: {meta.get('cwd', '?')}  model: {shown}"]
    start = (
        Instructions.from_record(meta["instructions"]) if isinstance(meta.get("instructions"), dict) else None
    )
    lines += [f"instructions: {start.summary()}"] if start and start.files else []
    lines.append("")
    active = active_seqs(records)
    for rec in records:
        kind = rec.get("kind")
        if kind == "message":
            msg = restore_message(rec, blob)
            who = "User" if msg["role"] == "user" else "Assistant"
            if all(b.get("type") == "tool_result" for b in msg["content"]):
                who = "Tool"
            who += "" if rec.get("seq") in active else " · abandoned"
            body = "\n".join(_block_text(b, markdown) for b in msg["content"])
            lines.append(f"## {who}\n\n{body}\n" if markdown else f"[{who}] {body}")
        elif kind == "todos" and rec.get("seq") in active:
            todos = rec.get("todos") or []
        elif kind == "rewind":
            lines.append(_rewind_line(rec))
        elif kind == "compaction":
            lines.append(f"--- history compressed: {rec.get('replaced')} messages summarised ---")
        elif kind == "instructions":
            lines.append(f"--- instructions reloaded: {Instructions.from_record(rec).summary()} ---")
    lines.append("")
    lines.append("## Plan" if markdown else "Plan:")
    marks = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]"}
    lines += [f"- {marks.get(t.get('status', ''), '[ ]')} {t.get('content')}" for t in todos] or [
        "(no todos)"
    ]
    return "\n".join(lines) + "\n"
