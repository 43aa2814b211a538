"""The command line (PROTOCOL.md §3.1): server modes, `run`, `demo`, `sessions`.

Owns: argument parsing, exit codes, and the terminal front end of `agentd run` (assistant text on stdout;
accounting, `[Hook]`, `[Permission]`, `[Tool]` lines on stderr). Operator errors print one clear line,
never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentd import __version__
from agentd.errors import AgentdError, ConfigError, UsageError
from agentd.log import stderr_line

EXIT_OK, EXIT_USAGE, EXIT_PROVIDER, EXIT_STOP, EXIT_SIGINT = 0, 2, 6, 7, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2 with one line (argparse's default too)
        self.print_usage(sys.stderr)
        sys.stderr.write(f"agentd: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="agentd", description="agentd: an editor-integrated coding-agent daemon.")
    p.add_argument("--version", action="version", version=f"agentd {__version__}")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="LSP over stdin/stdout (the default; for editors)")
    mode.add_argument("--socket", metavar="PATH", help="LSP on a Unix domain socket (mode 0600)")
    mode.add_argument("--tcp", metavar="PORT", type=int, help="LSP on 127.0.0.1:PORT with a token")
    mode.add_argument(
        "--acp", action="store_true", help=argparse.SUPPRESS
    )  # hidden until the ACP adapter exists
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
        help="server mode: replay, check and lock this session, then announce it to the editor",
    )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where sessions live (default: $AGENTD_DATA_DIR, else the platform's user data dir)",
    )
    p.add_argument("--log-file", metavar="FILE", help="write the log here instead of stderr")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = p.add_subparsers(dest="command", metavar="{run,demo,sessions,audit}")

    run = sub.add_parser("run", help="run one turn of the agent in the terminal")
    run.add_argument("--workspace", metavar="DIR", default=".", help="the project folder (default: .)")
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
    run.add_argument("--allow", metavar="TOOL", action="append", default=[], help="allow TOOL without asking")
    run.add_argument("--data-dir", dest="run_data_dir", metavar="DIR", help="as agentd --data-dir")

    sub.add_parser("demo", help="run the loop offline on the bundled scripted model")

    sessions = sub.add_parser("sessions", help="list, show, export or delete sessions")
    sessions.add_argument("--data-dir", dest="run_data_dir", metavar="DIR", help="as agentd --data-dir")
    ss = sessions.add_subparsers(dest="sessions_command", metavar="{list,show,export,rm}", required=True)
    ls = ss.add_parser("list", help="newest first")
    ls.add_argument("--workspace", metavar="DIR", help="only this project's sessions")
    show = ss.add_parser("show", help="a readable transcript with the current plan")
    show.add_argument("id")
    export = ss.add_parser("export", help="the log or a Markdown transcript on stdout")
    export.add_argument("id")
    export.add_argument("--format", choices=["jsonl", "markdown"], required=True)
    rm = ss.add_parser("rm", help="delete a session (refused while locked)")
    rm.add_argument("id")
    _add_audit_parser(sub)
    return p


def _add_audit_parser(sub: Any) -> None:
    """`agentd audit verify SESSION_ID` (PROTOCOL.md §3.1; issue 9 H6)."""
    audit = sub.add_parser("audit", help="check a session's audit log")
    audit.add_argument("--data-dir", dest="run_data_dir", metavar="DIR", help="as agentd --data-dir")
    verbs = audit.add_subparsers(dest="audit_command", metavar="{verify}", required=True)
    verify = verbs.add_parser(
        "verify", help="check the hash chain; exit 0 intact, 8 broken (a record missing, edited or moved)"
    )
    verify.add_argument("id", metavar="SESSION_ID")


def _audit(args: argparse.Namespace) -> int:
    """Print the report of `agentd audit verify` on stdout; its exit code (0 intact, 8 broken)."""
    from agentd.audit_verify import verify_session

    report = verify_session(_data_dir(args), args.id)
    sys.stdout.write(report.render())
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agentd` console script. Returns (and exits with) the exit code of §3.1."""
    args = build_parser().parse_args(argv)
    from agentd.log import setup_logging

    setup_logging(args.verbose, args.log_file)
    try:
        if args.command == "run":
            code = _run(args)
        elif args.command == "demo":
            code = _demo(args)
        elif args.command == "sessions":
            from agentd.sessions_cli import sessions_command

            code = sessions_command(args, _data_dir(args))
        elif args.command == "audit":
            code = _audit(args)
        else:
            code = _serve(args)
    except AgentdError as err:
        sys.stderr.write(f"agentd: {err.message}\n")
        code = err.exit_code
    except KeyboardInterrupt:
        code = EXIT_SIGINT
    except Exception as exc:  # a bug: one line for the user, the traceback in the log (-v or --log-file)
        import logging

        logging.getLogger("agentd").debug("internal error", exc_info=True)
        sys.stderr.write(
            f"agentd: internal error: {type(exc).__name__}: {exc}. Rerun with -v for details, and please report it.\n"
        )
        if args.verbose:
            import traceback

            traceback.print_exc()
        code = 1
    sys.exit(code)


def _data_dir(args: argparse.Namespace) -> Any:
    from agentd.persistence.paths import DataDir, resolve_data_dir

    return DataDir(resolve_data_dir(getattr(args, "run_data_dir", None) or args.data_dir))


def _serve(args: argparse.Namespace) -> int:
    """The LSP adapter (PROTOCOL.md §3.1, §3.2): stdio by default, or `--socket PATH` / `--tcp PORT`.
    With `--resume ID` the session is replayed, validated and locked before stdin is read (exit 3, 4, 5)."""
    if args.resume == "":
        raise UsageError("--resume needs a session id; list them with: agentd sessions list")
    if args.acp:
        raise UsageError(
            "--acp: the ACP adapter is not available in this build yet; start the LSP adapter instead "
            "(`agentd` or `agentd --stdio`)"
        )
    if args.exit_when_idle is not None and args.socket is None and args.tcp is None:
        raise UsageError("--exit-when-idle needs --socket PATH or --tcp PORT")
    if args.tcp is not None and not 0 < args.tcp < 65536:
        raise UsageError(f"--tcp {args.tcp}: the port must be between 1 and 65535")
    if args.log_file:
        import logging

        logging.getLogger("agentd").setLevel(logging.DEBUG)
    from agentd.adapters.lsp.host import Daemon
    from agentd.adapters.lsp.transport import serve

    daemon = Daemon(data_dir=_data_dir(args))
    if args.resume:
        from agentd.adapters.lsp.sessions import open_resume

        daemon.resume = open_resume(daemon, args.resume)
    return serve(daemon, socket_path=args.socket, port=args.tcp, idle_s=args.exit_when_idle)


def _workspace(raw: str) -> Path:
    ws = Path(raw).expanduser()
    if not ws.is_dir():
        raise ConfigError(
            f"workspace {raw} does not exist or is not a directory; pass an existing --workspace DIR"
        )
    return ws.resolve()


def _run(args: argparse.Namespace) -> int:
    from agentd.config import load_settings

    if args.provider and args.provider not in ("anthropic", "openai", "scripted"):
        raise ConfigError(f"unknown provider '{args.provider}'; use anthropic, openai or scripted")
    from agentd.tools.registry import default_tools

    known = ["todo_write", *(t.name for t in default_tools())]
    for tool in args.allow:
        if tool not in known:
            raise ConfigError(f"--allow {tool}: no such tool; use one of {', '.join(known)}")
    workspace = _workspace(args.workspace)
    if args.run_resume:  # the session's own workspace decides its config (rules, limits), not the cwd
        from agentd.persistence.index import read_meta

        meta = read_meta(_data_dir(args), args.run_resume) or {}
        cwd = meta.get("cwd")
        if isinstance(cwd, str) and Path(cwd).is_dir():
            workspace = Path(cwd)
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
        sys.stderr.write(f"agentd: warning: {w}\n")
    return asyncio.run(_run_turn(args, workspace, settings, _data_dir(args)))


async def _run_turn(
    args: argparse.Namespace, workspace: Path, settings: Any, data_dir: Any, banner: str | None = None
) -> int:
    from agentd.core.factory import create_session, open_session
    from agentd.core.session import clean_prompt
    from agentd.permissions.approver import PresetApprover, TerminalApprover
    from agentd.persistence.index import newest_session
    from agentd.providers.factory import make_provider

    clean_prompt(
        [{"type": "text", "text": args.prompt}]
    )  # an empty prompt is refused before any session exists
    provider = make_provider(
        settings.provider,
        model=settings.model,
        base_url=settings.base_url,
        api_key_env=settings.api_key_env,
        scenario=settings.scenario,
        openai_options=settings.openai,
    )
    approver = PresetApprover(yes=args.yes, allow=set(args.allow), fallback=TerminalApprover())
    printer = _Printer()
    session_id = getattr(args, "run_resume", None)
    if getattr(args, "cont", False):
        session_id = newest_session(data_dir, workspace)
        if session_id is None:
            sys.stderr.write("agentd: no earlier session in this workspace; starting a new one\n")
    common: dict[str, Any] = {
        "settings": settings,
        "provider": provider,
        "data_dir": data_dir,
        "approver": approver,
        "sink": printer.update,
        "lines": printer.line,
    }
    if session_id:
        session = open_session(session_id=session_id, **common)
        cwd = session.p.cwd
        if not cwd.is_dir():
            session.close()
            raise ConfigError(
                f"session {session_id} belongs to {cwd}, which no longer exists; restore that folder, or start "
                "a new session with --workspace DIR"
            )
        if getattr(args, "workspace", ".") != "." and workspace != cwd:
            sys.stderr.write(
                f"agentd: warning: session {session_id} works in {cwd}; --workspace is ignored\n"
            )
    else:
        session = create_session(cwd=workspace, **common)
    if banner:
        sys.stderr.write(banner)
    sys.stderr.write(f"[session {session.id}]\n")
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_sigint() -> None:
        nonlocal interrupted
        interrupted = True
        session.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        stop = await session.prompt([{"type": "text", "text": args.prompt}])
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        printer.end()
        session.close()
        await provider.aclose()
    if interrupted or stop == "cancelled":
        return EXIT_SIGINT
    sys.stderr.write(f"[stop · {stop}]\n")
    return EXIT_OK if stop == "end_turn" else EXIT_STOP


class _Printer:
    """stdout: the assistant's text only; a retried reply is marked on stderr."""

    def __init__(self) -> None:
        self.open_line = False
        self.message_id: str | None = None

    def update(self, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") != "agent_message_chunk":
            return
        meta = update.get("_meta", {}).get("agentd", {})
        if meta.get("retracts"):
            sys.stderr.write("\n[retry · the partial reply above was discarded]\n")
        elif self.message_id not in (None, meta.get("messageId")) and self.open_line:
            sys.stdout.write("\n")
        self.message_id = meta.get("messageId")
        sys.stdout.write(update["content"]["text"])
        sys.stdout.flush()
        self.open_line = not update["content"]["text"].endswith("\n")

    def line(self, text: str) -> None:
        """An operator line on stderr; on a terminal, first end the assistant's open line on stdout."""
        if self.open_line and sys.stdout.isatty() and sys.stderr.isatty():
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.open_line = False
        stderr_line(text)

    def end(self) -> None:
        if self.open_line:
            sys.stdout.write("\n")
            sys.stdout.flush()


DEMO_BANNER = (
    "agentd demo: the model is SCRIPTED (a bundled scenario, no network, no API key). It runs the real loop,\n"
    "tools, permissions and session store on a temporary copy of an example workspace; approvals are\n"
    "answered 'allow' automatically (as with --yes).\n"
)


def _demo(args: argparse.Namespace) -> int:
    from importlib import resources

    from agentd.config import load_settings

    base = resources.files("agentd") / "examples"
    tmp = Path(tempfile.mkdtemp(prefix="agentd-demo-"))
    workspace = tmp / "workspace"
    with resources.as_file(base / "demo-workspace") as src:
        shutil.copytree(src, workspace)
    with resources.as_file(base / "demo-scenario.json") as scenario:
        scenario_path = tmp / "scenario.json"
        shutil.copyfile(scenario, scenario_path)
    data = args.data_dir or os.environ.get("AGENTD_DATA_DIR") or str(tmp / "data")
    settings = load_settings(None, cli={"provider": "scripted", "scenario": str(scenario_path)})
    ns = argparse.Namespace(
        yes=True,
        allow=[],
        cont=False,
        run_resume=None,
        prompt="Add a --shout flag to greet.py, test it, and keep a TODO list.",
    )
    from agentd.persistence.paths import DataDir

    sys.stderr.write(f"[workspace {workspace}]\n")
    code = asyncio.run(_run_turn(ns, workspace, settings, DataDir(Path(data)), banner=DEMO_BANNER))
    sys.stderr.write(f"[demo finished: the workspace is {workspace}; inspect it, or delete {tmp}]\n")
    return code


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


if __name__ == "__main__":  # pragma: no cover
    main()
