"""The command line (PROTOCOL.md §3.1): server modes, `run`, `demo`, `sessions`.

Owns: argument parsing (the global options `-v`, `--data-dir`, `--log-file` are accepted before and after
the subcommand), the exit codes, and what a command does with a closed pipe (a quiet exit 141, as a Unix
tool killed by SIGPIPE). Operator errors print one clear line, never a traceback. The terminal turn itself
lives in agentd/terminal.py, the demo in agentd/demo.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from agentd import __version__
from agentd.errors import (  # noqa: F401  (the exit codes, owned by agentd.errors, re-exported)
    EXIT_NO_TERMINAL,
    EXIT_OK,
    EXIT_PIPE,
    EXIT_PROVIDER,
    EXIT_SIGINT,
    EXIT_STOP,
    EXIT_USAGE,
    AgentdError,
    ConfigError,
    UsageError,
)
from agentd.log import console
from agentd.text import has_surrogates

_LEVELS = ("", "1", "2")  # dest suffix of the global options: before the subcommand, after it, after its own


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2 with one line (argparse's default too)
        self.print_usage(sys.stderr)
        sys.stderr.write(f"agentd: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _add_globals(p: argparse.ArgumentParser, level: int) -> None:
    """`--data-dir`, `--log-file` and `-v` on the main parser (level 0) or a subcommand (1, 2) (H8).

    Each level has its own dest (`data_dir1`, ...), so a later level never resets an earlier one."""
    s = _LEVELS[level]
    p.add_argument(
        "--data-dir",
        dest=f"data_dir{s}",
        metavar="DIR",
        help="where sessions live (default: $AGENTD_DATA_DIR, else the platform's user data dir)",
    )
    p.add_argument("--log-file", dest=f"log_file{s}", metavar="FILE", help="write the log here, not stderr")
    p.add_argument(
        "-v", "--verbose", dest=f"verbose{s}", action="count", default=0, help="more logging (-vv: debug)"
    )


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="agentd",
        description="agentd: an editor-integrated coding-agent daemon. On a terminal, `agentd` opens the "
        "interactive client on the workspace (its newest session, or --new, or --resume ID); with pipes it "
        "serves an editor over LSP.",
    )
    p.add_argument("--version", action="version", version=f"agentd {__version__}")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="LSP over stdin/stdout (the default; for editors)")
    mode.add_argument("--socket", metavar="PATH", help="LSP on a Unix domain socket (mode 0600)")
    mode.add_argument("--tcp", metavar="PORT", type=int, help="LSP on 127.0.0.1:PORT with a token")
    mode.add_argument(
        "--acp",
        action="store_true",
        help="Agent Client Protocol over stdin/stdout (Zed, JetBrains, CodeCompanion, avante; docs/acp.md)",
    )
    p.add_argument(
        "--exit-when-idle",
        metavar="SECONDS",
        type=float,
        help="with --socket/--tcp: stop after this long without a connection",
    )
    p.add_argument(
        "--resume",
        metavar="SESSION_ID",
        nargs="?",
        const="",
        help="open this session: on a terminal, in the interactive client; with pipes, replayed, checked and "
        "locked, then announced to the editor",
    )
    p.add_argument(
        "--workspace",
        dest="chat_workspace",
        metavar="DIR",
        help="terminal client: the project folder (default: .)",
    )
    p.add_argument(
        "--new",
        dest="chat_new",
        action="store_true",
        help="terminal client: a new session, not the newest one",
    )
    _add_globals(p, 0)
    sub = p.add_subparsers(
        dest="command", metavar="{run,demo,sessions,audit,doctor,trust,mcp}", parser_class=_Parser
    )

    run = sub.add_parser("run", help="run one turn of the agent in the terminal")
    run.add_argument("--workspace", metavar="DIR", help="the project folder (default: .)")
    run.add_argument("--prompt", metavar="TEXT", required=True, help="what the agent should do")
    which = run.add_mutually_exclusive_group()
    which.add_argument("--new", action="store_true", help="a new session (the default)")
    which.add_argument("--continue", dest="cont", action="store_true", help="the workspace's newest session")
    which.add_argument("--resume", dest="run_resume", metavar="ID", help="the given session")
    run.add_argument("--provider", metavar="NAME", help="anthropic (default), openai or scripted")
    run.add_argument("--model", metavar="NAME", help="the model (default: the provider's)")
    run.add_argument("--base-url", metavar="URL", help="the API endpoint, e.g. http://127.0.0.1:11434/v1")
    run.add_argument("--scenario", metavar="FILE", help="replies for --provider scripted (docs/scenarios.md)")
    run.add_argument("--yes", action="store_true", help="answer every approval with allow")
    run.add_argument(
        "--allow",
        metavar="TOOL",
        action="append",
        default=[],
        help="allow TOOL, or TOOL(pattern) such as 'run_command(npm test)', without asking",
    )
    run.add_argument(
        "--reload-instructions",
        action="store_true",
        help="with --continue or --resume: read the AGENTS.md files again instead of keeping the text the "
        "session started with (costs one prompt-cache write); without them a usage error (exit 2), as a new "
        "session reads them anyway",
    )
    _add_globals(run, 1)

    demo = sub.add_parser("demo", help="one offline turn on the bundled emulated model, shown step by step")
    _add_globals(demo, 1)

    sessions = sub.add_parser(
        "sessions", help="list, show, export, delete, rewind or fork sessions; list their checkpoints"
    )
    _add_globals(sessions, 1)
    ss = sessions.add_subparsers(
        dest="sessions_command",
        metavar="{list,show,export,rm,checkpoints,rewind,fork}",
        required=True,
        parser_class=_Parser,
    )
    ls = ss.add_parser(
        "list",
        help="newest first",
        description="The stored sessions, newest first. TURNS counts every prompt sent to the session (they "
        "are numbered 1..TURNS, as its checkpoints are), those a rewind left on an abandoned branch too; TOKENS "
        "sums every request's input, output and prompt-cache tokens. `agentd sessions show ID` shows what the "
        "conversation holds now.",
    )
    ls.add_argument("--workspace", metavar="DIR", help="only this project's sessions")
    show = ss.add_parser("show", help="a readable transcript with the current plan")
    show.add_argument("id")
    export = ss.add_parser("export", help="the log or a Markdown transcript on stdout")
    export.add_argument("id")
    export.add_argument("--format", choices=["jsonl", "markdown"], required=True)
    rm = ss.add_parser("rm", help="delete a session (refused while locked)")
    rm.add_argument("id")
    for leaf in (ls, show, export, rm):
        _add_globals(leaf, 2)
    from agentd.checkpoints_cli import add_parsers

    add_parsers(ss, _add_globals)
    _add_audit_parser(sub)
    _add_doctor_parser(sub)
    _add_trust_parser(sub)
    _add_mcp_parser(sub)
    return p


def _add_trust_parser(sub: Any) -> None:
    """`agentd trust [DIR] [--revoke] [--list]` (issue 12 §5; docs/security.md)."""
    trust = sub.add_parser("trust", help="let a workspace's own hooks run (or --revoke, --list)")
    trust.add_argument("workspace", nargs="?", default=".", metavar="DIR", help="the workspace (default: .)")
    trust.add_argument("--revoke", action="store_true", help="no longer trust it")
    trust.add_argument("--list", action="store_true", help="list the trusted workspaces")
    _add_globals(trust, 1)


def _trust(args: argparse.Namespace) -> int:
    """Trust a workspace with the hooks it defines now, forget it, or list the trusted ones."""
    from agentd.config import load_settings
    from agentd.core.factory import trust_store, workspace_definitions
    from agentd.permissions.trust import definitions_digest

    store = trust_store()
    if args.list:
        for entry in store.entries():
            sys.stdout.write(
                f"{entry['workspace']}  (trusted {entry.get('at', '?')}, {entry['digest'][:19]})"
                f"{_trust_state(Path(entry['workspace']), entry['digest'])}\n"
            )
        return EXIT_OK
    workspace = _workspace(args.workspace)
    if args.revoke:
        was = store.revoke(workspace)
        console.line(f"agentd: {workspace} is {'no longer' if was else 'not'} trusted")
        return EXIT_OK
    definitions = workspace_definitions(load_settings(workspace))
    store.trust(workspace, definitions_digest(definitions))
    console.line(f"agentd: {workspace} is trusted; its hooks and MCP servers run from the next session on")
    for line in _definition_lines(definitions):
        console.line(f"  {line}")
    return EXIT_OK


def _trust_state(workspace: Path, digest: str) -> str:
    """What `trust --list` adds to a trusted workspace whose grant is not in effect now: its hooks or MCP
    servers changed since (a grant is bound to the definitions it was given for), or it cannot be read."""
    from agentd.config import load_settings
    from agentd.core.factory import workspace_definitions
    from agentd.permissions.trust import definitions_digest

    if not workspace.is_dir():
        return "  [the folder is gone]"
    try:
        now = definitions_digest(workspace_definitions(load_settings(workspace)))
    except AgentdError as err:
        return f"  [its config cannot be read: {err.message}]"
    if now != digest:
        return (
            f"  [NOT in effect: its hooks or MCP servers changed since; run `agentd trust {workspace}` again]"
        )
    return ""


def _definition_lines(definitions: dict[str, Any]) -> list[str]:
    """One line per hook (`turn_end: notify-send ...`) and MCP server (`mcp server db: db-mcp --ro`) that a
    workspace defines (agentd.core.factory.workspace_definitions)."""
    import shlex

    out = [f"{point}: {h['command']}" for point, items in definitions["hooks"].items() for h in items]
    for name, s in (definitions.get("mcp") or {}).items():
        out.append(
            f"mcp server {name}: " + (shlex.join([s["command"], *s["args"]]) if s["command"] else s["url"])
        )
    return out


def _ask_trust(workspace: Path, settings: Any, tty: str = "/dev/tty") -> None:
    """Issue 12 §5, asked once: when the workspace defines hooks the user has not trusted (with exactly
    these definitions), ask on the terminal; a yes is remembered (`agentd trust --revoke DIR` undoes it).
    No terminal, or no: the session runs without them (the factory says so)."""
    from agentd.core.factory import trust_store, workspace_code, workspace_definitions
    from agentd.permissions.trust import definitions_digest
    from agentd.text import visible

    if not workspace_code(settings):
        return
    store = trust_store()
    definitions = workspace_definitions(settings)
    digest = definitions_digest(definitions)
    if store.is_trusted(workspace, digest):
        return
    lines = _definition_lines(definitions)
    question = (
        f"\n[agentd] {workspace}/.agentd/config.toml defines hooks or MCP servers, commands that would run with "
        "your rights:\n"
        + "".join(f"  {visible(line, one_line=True)}\n" for line in lines)
        + "Trust this workspace and run them? [y/N]: "
    )
    try:
        fd = os.open(tty, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return
    try:  # bytes on the descriptor: a text file opened "r+" on a terminal is not seekable (it failed there)
        os.write(fd, question.encode("utf-8", "replace"))
        answer = _read_line(fd).strip().lower()
    except OSError:
        return
    finally:
        os.close(fd)
    if answer in ("y", "yes"):
        store.trust(workspace, digest)


def _read_line(fd: int) -> str:
    """One line typed on the terminal `fd` (without its newline; what was typed before EOF)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _add_doctor_parser(sub: Any) -> None:
    """`agentd doctor [--workspace DIR] [--json]` (PROTOCOL.md §3.1; issue 12); the workspace is the current
    folder unless `--workspace` names another, as for `agentd run` and `agentd chat` (new-user R4)."""
    doctor = sub.add_parser("doctor", help="does the sandbox work here; which protections are missing")
    doctor.add_argument(
        "--workspace",
        metavar="DIR",
        help="the project whose .agentd/config.toml counts (default: the current folder)",
    )
    doctor.add_argument("--json", action="store_true", help="the report as JSON (for editors)")
    _add_globals(doctor, 1)


def _doctor(args: argparse.Namespace) -> int:
    """Print the report of agentd.doctor (text, or JSON with `--json`); its exit code."""
    from agentd.doctor import render, report
    from agentd.persistence.paths import resolve_data_dir

    try:
        data: Path | str = resolve_data_dir(args.data_dir, write=False)
    except ConfigError as exc:  # reported with the other facts, not instead of them
        data = exc.message
    rep = report(_doctor_workspace(args.workspace), data)
    sys.stdout.write(json.dumps(rep, indent=2) + "\n" if args.json else render(rep))
    return int(rep["exitCode"])


def _doctor_workspace(raw: str | None) -> Path | None:
    """`--workspace DIR` (an error if it is no usable folder), else the current folder as `agentd run` takes
    it; a current folder agentd cannot use as a workspace leaves the user config only (new-user R4)."""
    if raw is not None:
        return _workspace(raw)
    try:
        return _workspace(".")
    except (ConfigError, OSError):
        return None


def _add_mcp_parser(sub: Any) -> None:
    """`agentd mcp list [--workspace DIR]` (issue 11; docs/mcp.md)."""
    mcp = sub.add_parser("mcp", help="the configured MCP servers")
    _add_globals(mcp, 1)
    verbs = mcp.add_subparsers(dest="mcp_command", metavar="{list}", required=True, parser_class=_Parser)
    ls = verbs.add_parser("list", help="start each configured server, show its state and tools, stop it")
    ls.add_argument("--workspace", metavar="DIR", default=".", help="whose config to use (default: .)")
    _add_globals(ls, 2)


def _add_audit_parser(sub: Any) -> None:
    """`agentd audit verify SESSION_ID` (PROTOCOL.md §3.1; issue 9 H6)."""
    audit = sub.add_parser("audit", help="check a session's audit log")
    _add_globals(audit, 1)
    verbs = audit.add_subparsers(
        dest="audit_command", metavar="{verify}", required=True, parser_class=_Parser
    )
    verify = verbs.add_parser(
        "verify", help="check the hash chain; exit 0 intact, 8 broken (a record missing, edited or moved)"
    )
    verify.add_argument("id", metavar="SESSION_ID")
    _add_globals(verify, 2)


def _audit(args: argparse.Namespace) -> int:
    """Print the report of `agentd audit verify` on stdout; its exit code (0 intact, 8 broken)."""
    from agentd.audit_verify import verify_session

    report = verify_session(data_dir(args.data_dir, write=False), args.id)
    sys.stdout.write(report.render())
    return report.exit_code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; the global options end up in `verbose` (summed over every place given),
    `data_dir` and `log_file` (the one given last, i.e. nearest the end of the command)."""
    args = build_parser().parse_args(argv)
    args.verbose = sum(getattr(args, f"verbose{s}", 0) or 0 for s in _LEVELS)
    for name in ("data_dir", "log_file"):
        given = [v for s in reversed(_LEVELS) if (v := getattr(args, f"{name}{s}", None))]
        setattr(args, name, given[0] if given else None)
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agentd` console script. Returns (and exits with) the exit code of §3.1."""
    from agentd.log import reserve_standard_streams

    reserve_standard_streams()  # `agentd ... >&-`: a closed stdout is a closed pipe; no file takes fd 1
    try:
        code = _main(argv)
    except BrokenPipeError:
        code = closed_pipe()
    sys.exit(code)


def closed_pipe() -> int:
    """The reader of stdout or stderr went away (`agentd sessions list | head -1`): exit quietly with 141,
    as a Unix tool killed by SIGPIPE would (H7). Both streams are pointed at /dev/null first, so the
    interpreter's final flush cannot complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    os.close(devnull)
    return EXIT_PIPE


def _main(argv: list[str] | None) -> int:
    from agentd import heap

    heap.enable()  # the process's garbage-collector policy (agentd/heap.py)
    args = parse_args(argv)
    try:
        from agentd.log import setup_logging

        setup_logging(args.verbose, args.log_file)
        from agentd.sandbox.process import harden_process

        harden_process()  # commands run without a sandbox cannot read our /proc/<pid>/environ (issue 12)
        return _dispatch(args)
    except AgentdError as err:
        console.line(f"agentd: {err.message}")
        return err.exit_code
    except KeyboardInterrupt:
        console.line("[cancelled]")
        return EXIT_SIGINT
    except BrokenPipeError:
        raise
    except Exception as exc:  # a bug: one line for the user, the traceback in the log (-v or --log-file)
        import logging

        logging.getLogger("agentd").debug("internal error", exc_info=True)
        console.line(
            f"agentd: internal error: {type(exc).__name__}: {exc}. Rerun with -v for details, and please report it."
        )
        if args.verbose:
            import traceback

            traceback.print_exc()
        return 1


def _mcp_list(args: argparse.Namespace) -> int:
    """`agentd mcp list`: the servers of the workspace's effective config, their state and tools."""
    from agentd.config import load_settings
    from agentd.mcp.listing import mcp_list

    workspace = _workspace(args.workspace)
    warnings: list[str] = []
    settings = load_settings(workspace, warnings=warnings)
    for w in warnings:
        console.line(f"agentd: warning: {w}")
    from agentd.core.factory import session_launcher, untrusted_notice

    notice = untrusted_notice(settings, workspace)
    if notice is not None:
        console.line(f"agentd: {notice}")
    launcher = session_launcher(settings, workspace, data_dir(args.data_dir, write=False))
    trusted = bool(settings.workspace_mcp_servers) and notice is None
    return asyncio.run(mcp_list(settings, workspace, launcher, workspace_trusted=trusted))


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        return _run(args)
    if args.command == "demo":
        from agentd.demo import run_demo

        return run_demo(args.data_dir)
    if args.command == "sessions" and args.sessions_command in ("checkpoints", "rewind", "fork"):
        from agentd.checkpoints_cli import checkpoints_command

        return checkpoints_command(
            args, data_dir(args.data_dir, write=args.sessions_command != "checkpoints")
        )
    if args.command == "sessions":
        from agentd.sessions_cli import sessions_command

        return sessions_command(args, data_dir(args.data_dir, write=args.sessions_command == "rm"))
    if args.command == "audit":
        return _audit(args)
    if args.command == "doctor":
        return _doctor(args)
    if args.command == "trust":
        return _trust(args)
    if args.command == "mcp":
        return _mcp_list(args)
    return _serve(args)


def data_dir(cli_value: str | None, *, write: bool = True) -> Any:
    """The `DataDir` of `--data-dir` / `$AGENTD_DATA_DIR` / the platform default; `write=False` for the
    read-only views, which work on a data dir agentd may not write (H12). Raises ConfigError."""
    from agentd.persistence.paths import open_data_dir

    return open_data_dir(cli_value, write=write)


def _on_terminal(args: argparse.Namespace) -> bool:
    """`agentd` typed by a person: stdin and stdout are a terminal and no server mode was asked for."""
    server = args.stdio or args.socket is not None or args.tcp is not None or args.acp
    return not server and sys.stdin.isatty() and sys.stdout.isatty()


def _chat(args: argparse.Namespace) -> int:
    """The interactive terminal client (PROTOCOL.md §3.1; docs/terminal.md) on the workspace: its newest
    session, a new one (`--new`) or `--resume ID` (in that session's own folder). The terminal's Enter
    stays an Enter from here on, before the client's libraries load (agentd.adapters.tui.tty)."""
    from agentd.adapters.tui.tty import enter_stays_enter

    with enter_stays_enter(sys.stdin.fileno()) as found:
        return _chat_in(args, found)


def _chat_in(args: argparse.Namespace, found: Any) -> int:
    from agentd.adapters.tui.chat import Opener, run_chat
    from agentd.adapters.tui.tty import as_found

    dd = data_dir(args.data_dir)
    workspace = _workspace(args.chat_workspace or ".")
    if args.resume:
        workspace = _resumed_workspace(args.resume, args.chat_workspace, dd) or workspace

    def settings(ws: Path, overrides: dict[str, Any]) -> Any:
        from agentd.config import load_settings

        warnings: list[str] = []
        loaded = load_settings(ws, warnings=warnings, cli=overrides)
        for w in warnings:
            console.line(f"agentd: warning: {w}")
        with as_found(sys.stdin.fileno(), found):  # the question reads a line, as typed at start
            _ask_trust(ws, loaded)
        return loaded

    return run_chat(Opener(settings, dd), workspace, resume=args.resume or None, new=args.chat_new,
                    verbose=args.verbose, log_file=bool(args.log_file))  # fmt: skip


def _serve(args: argparse.Namespace) -> int:
    """The LSP adapter (PROTOCOL.md §3.1, §3.2): stdio by default, or `--socket PATH` / `--tcp PORT`; with
    `--acp`, the ACP adapter (§3.3).
    With `--resume ID` the session is replayed, validated and locked before stdin is read (exit 3, 4, 5).
    A data dir agentd cannot write is reported in the answer to `initialize` (H12), not by a silent exit.
    On a terminal, without a server mode, the interactive client instead (`_chat`)."""
    if args.resume == "":
        raise UsageError("--resume needs a session id; list them with: agentd sessions list")
    if _on_terminal(args):
        return _chat(args)
    if args.chat_workspace is not None or args.chat_new:
        raise UsageError(
            "--workspace and --new are for the terminal client (agentd typed on a terminal); an editor "
            "gives its workspace folders in initialize"
        )
    if args.acp:
        if args.exit_when_idle is not None:
            raise UsageError("--exit-when-idle needs --socket PATH or --tcp PORT, not --acp")
        return _serve_acp(args)
    if args.exit_when_idle is not None and args.socket is None and args.tcp is None:
        raise UsageError("--exit-when-idle needs --socket PATH or --tcp PORT")
    if args.tcp is not None and not 0 < args.tcp < 65536:
        raise UsageError(f"--tcp {args.tcp}: the port must be between 1 and 65535")
    if args.log_file:
        import logging

        logging.getLogger("agentd").setLevel(logging.DEBUG)
    from agentd.adapters.lsp.host import Daemon
    from agentd.adapters.lsp.transport import serve
    from agentd.persistence.paths import DataDir

    try:
        daemon = Daemon(data_dir=data_dir(args.data_dir))
    except ConfigError as exc:
        if args.resume or args.tcp is not None:  # both need the data dir before the first message
            raise
        # every connection is refused at `initialize` with the reason, so this data dir is never used
        daemon = Daemon(data_dir=DataDir(os.devnull), data_dir_error=exc.message)
    if args.resume:
        from agentd.adapters.lsp.sessions import open_resume

        daemon.resume = open_resume(daemon, args.resume)
    return serve(daemon, socket_path=args.socket, port=args.tcp, idle_s=args.exit_when_idle)


def _serve_acp(args: argparse.Namespace) -> int:
    """The ACP adapter (PROTOCOL.md §3.3, §4.5; docs/acp.md). Needs the `agentd[acp]` extra."""
    try:
        from agentd.adapters.acp.serve import serve
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith("acp"):
            raise
        raise UsageError(
            "--acp needs the Agent Client Protocol SDK: pip install 'agentd-daemon[acp]' (in agentd's venv: "
            ".venv/bin/pip install -e '.[acp]')"
        ) from None
    from agentd.persistence.paths import DataDir

    if args.log_file:
        import logging

        logging.getLogger("agentd").setLevel(logging.DEBUG)
    try:
        dd, error = data_dir(args.data_dir), None
    except ConfigError as exc:
        if args.resume:
            raise
        dd, error = DataDir(os.devnull), exc.message  # every initialize is answered with the reason (H12)
    return serve(dd, data_dir_error=error, resume=args.resume or None)


def _workspace(raw: str) -> Path:
    ws = Path(raw).expanduser()
    if not ws.is_dir():
        raise ConfigError(
            f"workspace {raw} does not exist or is not a directory; pass an existing --workspace DIR"
        )
    ws = ws.resolve()
    if has_surrogates(str(ws)):  # a session stores its workspace as UTF-8 text (H19 class, break9)
        shown = os.fsencode(ws).decode("utf-8", "backslashreplace")
        raise ConfigError(
            f"workspace {shown}: its path is not valid UTF-8, and a session stores it as text; rename the "
            "folder, or work in another one"
        )
    return ws


def _resumed_workspace(session_id: str, workspace: str | None, dd: Any) -> Path | None:
    """For `--resume ID`: the session's own workspace, which decides its config (rules, limits). An explicit
    `--workspace` naming another folder is refused (H4): a session keeps its workspace."""
    from agentd.persistence.index import read_meta

    meta = read_meta(dd, session_id) or {}
    cwd = meta.get("cwd")
    if not isinstance(cwd, str):
        return None  # not found or unreadable: opening the session says so
    if workspace is not None and os.path.realpath(workspace) != os.path.realpath(cwd):
        raise UsageError(
            f"session {session_id} works in {cwd}, not in {workspace}; drop --workspace to resume "
            f"it there, or start a new session in {workspace} (without --resume)"
        )
    return Path(cwd) if Path(cwd).is_dir() else None


def _run(args: argparse.Namespace) -> int:
    from agentd.config import load_settings, tool_name_problem
    from agentd.terminal import TurnSetup, run_terminal_turn

    if args.reload_instructions and not (args.cont or args.run_resume):
        raise UsageError(
            "--reload-instructions reloads a resumed session's AGENTS.md files: add --continue or --resume ID "
            "(a new session reads them anyway)"
        )
    if args.provider and args.provider not in ("anthropic", "openai", "scripted"):
        raise ConfigError(f"unknown provider '{args.provider}'; use anthropic, openai or scripted")
    for tool in args.allow:
        problem = tool_name_problem(tool)
        if problem:
            raise ConfigError(f"--allow {tool}: {problem}")
    workspace = _workspace(args.workspace or ".")
    dd = data_dir(args.data_dir)
    if args.run_resume:
        workspace = _resumed_workspace(args.run_resume, args.workspace, dd) or workspace
    warnings: list[str] = []
    settings = load_settings(
        workspace,
        warnings=warnings,
        cli={
            "provider": args.provider,
            "model": args.model,
            "base_url": args.base_url,
            "scenario": args.scenario,
        },
    )
    for w in warnings:
        console.line(f"agentd: warning: {w}")
    _ask_trust(workspace, settings)
    setup = TurnSetup(
        prompt=args.prompt,
        workspace=workspace,
        settings=settings,
        data_dir=dd,
        session_id=args.run_resume,
        continue_newest=args.cont,
        yes=args.yes,
        allow=list(args.allow),
        reload_instructions=args.reload_instructions,
    )
    return asyncio.run(run_terminal_turn(setup)).code


if __name__ == "__main__":  # pragma: no cover
    main()
