"""`agentd sessions checkpoints | rewind | fork` (PROTOCOL.md §3.1; issue 13; docs/checkpoints.md).

Owns: the text these three commands print and the confirmation asked on a terminal for files the user
changed after the checkpoint. The work is agentd.core.stored's (the same core as the editors' methods).
`checkpoints` and `fork` never take the source's lock; `rewind` opens the session (exit 4 while another
process holds it). Output goes to stdout, questions and notes to stderr (not a server mode).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentd.persistence.paths import DataDir


def checkpoints_command(args: argparse.Namespace, data_dir: DataDir) -> int:
    """Dispatch `sessions checkpoints | rewind | fork`; returns the exit code. Raises SessionNotFound (3),
    SessionLocked (4), CheckpointError / UsageError (2), StorageError (5)."""
    from agentd.core.stored import (
        fork_stored,
        session_settings,
        stored_checkpoints,
    )  # the core: not at start-up

    if args.sessions_command == "checkpoints":
        return _list(stored_checkpoints(data_dir, args.id), args.json)
    if args.sessions_command == "fork":
        at = args.at if args.at is None else str(args.at)
        result = fork_stored(data_dir, args.id, at, session_settings(data_dir, args.id))
        return _forked(result, args.json)
    return _rewind(args, data_dir)


def _json_line(result: dict[str, Any]) -> str:
    """One JSON line of `result`, always valid UTF-8: a path whose name is not UTF-8 (a lone surrogate from
    `os.fsdecode`) makes the whole line ASCII with `\\udcff` escapes, which JSON readers take as is."""
    text = json.dumps(result, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(result)
    return text + "\n"


def _list(result: dict[str, Any], as_json: bool) -> int:
    out = sys.stdout
    if as_json:
        out.write(_json_line(result))
        return 0
    if not result["checkpoints"]:
        sys.stderr.write("no checkpoints yet (one is taken before each prompt)\n")
        return 0
    out.write(f"{'ID':<9} {'BEFORE':<12} {'AT':<20} {'FILES':>7} {'CHANGED':>7}  TEXT\n")
    for c in result["checkpoints"]:
        files = "-" if c.get("files") is None else str(c["files"])
        mark = "" if c["active"] else "  (abandoned branch)"
        what = f"failed: {c['error']}" if c.get("error") else c.get("text") or ""
        out.write(f"{c['id']:<9} {c['before']:<12} {str(c.get('at', ''))[:19]:<20} {files:>7} "
                  f"{c['changed']:>7}  {_one_line(what)}{mark}\n")  # fmt: skip
    for r in result["rewinds"]:
        what = "files and conversation" if r["files"] and r["conversation"] else (
            "files" if r["files"] else "conversation")  # fmt: skip
        undo = f" (undo: --to {r['before']} --files-only)" if r.get("before") else ""
        out.write(f"rewind {r['id']} at {str(r.get('at', ''))[:19]}: {what} back to {r['to']}{undo}\n")
    if result.get("pendingRewind"):
        out.write("an interrupted rewind finishes when the session opens next\n")
    return 0


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:59] + "…"


def _forked(result: dict[str, Any], as_json: bool) -> int:
    if as_json:
        sys.stdout.write(_json_line(result))
        return 0
    at = f"at checkpoint {result['at']}" if result.get("at") else "at its end"
    sys.stdout.write(result["sessionId"] + "\n")
    sys.stderr.write(f"forked {result['forkedFrom']} {at} ({result['messages']} messages); continue it with: "
                     f"agentd run --resume {result['sessionId']} --prompt '...'\n")  # fmt: skip
    return 0


def _rewind(args: argparse.Namespace, data_dir: DataDir) -> int:
    overwrite: bool | list[str] = True if args.overwrite_all else list(args.overwrite or [])
    from agentd.core.stored import rewind_stored

    ask = None if args.yes or not _tty() else _confirm
    result = asyncio.run(rewind_stored(
        data_dir, args.id, args.to, files=not args.conversation_only, conversation=not args.files_only,
        overwrite=overwrite or args.yes, dry_run=args.dry_run, confirm=ask,
        lines=_note,
    ))  # fmt: skip
    if args.json:
        sys.stdout.write(_json_line(result))
        return 0
    _report(args, result, data_dir)
    return 0


def _report(args: argparse.Namespace, result: dict[str, Any], data_dir: DataDir) -> None:
    """What a rewind did, or (a dry run) would do, in plain words: the files restored, removed and kept, the
    conversation's size before and after, and the prompts it leaves on an abandoned branch with their text."""
    out, done, to = sys.stdout, result["done"], result["to"]
    if not done:
        out.write(f"dry run, nothing was changed; a rewind to checkpoint {to} would do this:\n")
    files = result.get("files")
    if files is not None:
        _report_files(args, files, to, done)
    conv = result.get("conversation")
    if conv is not None:
        _report_conversation(args, conv, data_dir, done)
    if done and result.get("checkpoint"):
        out.write(f"undo with: agentd sessions rewind {args.id} --to {result['checkpoint']} --files-only\n")


def _report_files(args: argparse.Namespace, files: dict[str, Any], to: str, done: bool) -> None:
    out = sys.stdout
    n = (len(files["restored"]), len(files["removed"]), len(files["kept"]))
    counts = (f"{n[0]} restored, {n[1]} removed, {n[2]} kept" if done
              else f"{n[0]} to restore, {n[1]} to remove, {n[2]} to keep as they are")  # fmt: skip
    out.write(f"files: {counts}\n")
    verbs = ("restored", "removed ", "kept    ") if done else ("restore ", "remove  ", "keep    ")
    for path in files["restored"]:
        out.write(f"  {verbs[0]} {path}\n")
    for path in files["removed"]:
        out.write(f"  {verbs[1]} {path}\n")
    for kept in files["kept"]:
        out.write(f"  {verbs[2]} {kept['path']} ({kept['reason'].replace('_', ' ')})\n")
    mine = [k["path"] for k in files["kept"] if k["reason"] == "changed_by_user"]
    if mine:
        left = "were left" if done else "would be left"
        only = " --files-only" if done or args.files_only else ""  # done: the conversation went back already
        sys.stderr.write(
            f"{len(mine)} file(s) you changed after checkpoint {to} {left} as they are; to restore them too: "
            f"agentd sessions rewind {args.id} --to {to}{only} " + " ".join(f"--overwrite {p}" for p in mine) + "\n"
        )  # fmt: skip


def _report_conversation(
    args: argparse.Namespace, conv: dict[str, Any], data_dir: DataDir, done: bool
) -> None:
    out = sys.stdout
    before, after, dropped = conv["messagesBefore"], conv["messagesAfter"], conv["abandonedPrompts"]
    size = f"{before} -> {after} messages" if done else f"would go from {before} to {after} messages"
    if not dropped:
        out.write(f"conversation: {size}; no prompt {'was' if done else 'would be'} dropped\n")
        return
    which = "dropped from it" if done else "it would drop"
    out.write(f"conversation: {size}; the prompts {which} (they stay in the log as an abandoned branch: "
              f"agentd sessions show {args.id}):\n")  # fmt: skip
    texts = _prompt_texts(data_dir, args.id)
    for n in dropped:
        out.write(f"  prompt {n}: {_one_line(texts.get(n, ''))}\n")


def _prompt_texts(data_dir: DataDir, session_id: str) -> dict[int, str]:
    """Prompt number -> its text, from the checkpoints listing (read-only; the log alone)."""
    from agentd.core.stored import stored_checkpoints

    listed = stored_checkpoints(data_dir, session_id)["checkpoints"]
    return {
        int(c.get("prompt") or 0): str(c.get("text") or "") for c in listed if c.get("before") == "prompt"
    }


def _note(line: str) -> None:
    sys.stderr.write(line + "\n")


def _tty() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def _confirm(paths: list[str]) -> bool:
    sys.stderr.write("You changed these files after the checkpoint:\n")
    for p in paths[:50]:
        sys.stderr.write(f"  {p}\n")
    if len(paths) > 50:
        sys.stderr.write(f"  ... and {len(paths) - 50} more\n")
    sys.stderr.write("Overwrite them with the checkpoint's version too? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def add_parsers(ss: Any, add_globals: Any) -> None:
    """The three subparsers of `agentd sessions` (the CLI's parser builds the rest)."""
    cps = ss.add_parser("checkpoints", help="a session's checkpoints and rewinds")
    cps.add_argument("id")
    rw = ss.add_parser("rewind", help="files and/or conversation back to a checkpoint")
    rw.add_argument("id")
    rw.add_argument("--to", required=True, metavar="N", help="the checkpoint: N = before prompt N, or an id")
    only = rw.add_mutually_exclusive_group()
    only.add_argument("--files-only", action="store_true", help="the files only; the conversation stays")
    only.add_argument("--conversation-only", action="store_true", help="the conversation only")
    rw.add_argument("--overwrite", action="append", metavar="PATH",
                    help="also restore PATH, which you changed after the checkpoint (repeatable)")  # fmt: skip
    rw.add_argument("--overwrite-all", action="store_true", help="also restore every file you changed")
    rw.add_argument("--yes", "-y", action="store_true", help="do not ask; with no --overwrite, restore all")
    rw.add_argument("--dry-run", action="store_true", help="only say what would happen")
    fk = ss.add_parser("fork", help="a new session with the history up to a checkpoint")
    fk.add_argument("id")
    fk.add_argument("--at", metavar="N", help="the checkpoint to fork at (default: the end)")
    for leaf in (cps, rw, fk):
        leaf.add_argument("--json", action="store_true", help="the protocol's result as one JSON line")
        add_globals(leaf, 2)
