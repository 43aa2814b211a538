"""The composition root: builds a Session and everything it owns (CONTRACTS.md §1).

Owns: `create_session()` and `open_session()`, and `built_off_loop()`, which runs either in a
worker thread for a server's event loop (issue 16 §1). Every per-session object (Context, TodoTracker, Hooks,
Gate, grants, AuditLog, SessionStore and its Journal, ToolContext and the Toolbox) is created here, per
session, and injected; nothing is a module-level singleton, so session A's stale rounds can never remind
session B. `open_session` replays the log into the fresh session (agentd.core.replay).
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd import failpoints
from agentd.audit import AuditLog
from agentd.clock import Clock, default_clock
from agentd.config import HooksSettings, Settings, user_config_path
from agentd.core.checkpoints import CHECKPOINTS_DIR, Checkpointer
from agentd.core.context import Context
from agentd.core.hooks import Hooks
from agentd.core.instructions import Instructions, NestedInstructions, latest_record, user_instructions_dir
from agentd.core.instructions import load as load_instructions
from agentd.core.journal import Journal
from agentd.core.prompts import system_blocks
from agentd.core.replay import resume
from agentd.core.rewind import recover
from agentd.core.session import EventSink, Session
from agentd.core.todos import TodoTracker
from agentd.core.toolbox import Toolbox
from agentd.core.user_hooks import POINTS, HookSpec, UserHooks
from agentd.errors import ConfigError
from agentd.log import LineWriter, stderr_line
from agentd.permissions.approver import Approver
from agentd.permissions.gate import Gate, Grants
from agentd.permissions.protected import ProtectedPaths
from agentd.permissions.rules import Rule
from agentd.permissions.signing import GrantKey, GrantKeyError, RecordSigner
from agentd.permissions.trust import TRUST_FILE, TrustStore, definitions_digest
from agentd.persistence.branches import on_branch
from agentd.persistence.paths import DataDir, new_session_id
from agentd.persistence.records import GrantRecord
from agentd.persistence.store import SessionStore
from agentd.providers.base import Provider
from agentd.providers.models import context_window
from agentd.sandbox import Launcher, launcher_for, say_missing_once
from agentd.sandbox.env import child_env, key_vars
from agentd.sandbox.standins import sweep_left
from agentd.tools.base import ToolContext
from agentd.tools.registry import ToolRegistry, default_tools
from agentd.tools.todo import TodoWrite


def secrets_of(settings: Settings) -> list[str]:
    """Secret values to redact from the audit log (the API keys in the environment)."""
    return [v for n in key_vars(settings.api_key_env) if (v := os.environ.get(n)) and len(v) >= 8]


def protected_paths(settings: Settings, data_dir: DataDir) -> ProtectedPaths:
    """The user's protected paths (agentd.permissions.protected): home, config dir, data dir, `sandbox.hide`."""
    return ProtectedPaths.of(
        Path.home(), user_config_path().parent, data_dir.root, extra_hidden=settings.sandbox.hide
    )


_GRANT_KEY_MUTEX = threading.Lock()  # sessions are built in worker threads: one creates the key, others wait


def grant_key() -> bytes:
    """The per-user key that signs grants and mode changes (agentd.permissions.signing): `grant.key` in
    the user config dir. Raises ConfigError (exit 2) when it cannot be used. Thread-safe."""
    path = user_config_path().parent / "grant.key"
    try:
        with _GRANT_KEY_MUTEX:
            return GrantKey.load_or_create(path)
    except OSError as exc:
        raise ConfigError(str(exc) if isinstance(exc, GrantKeyError) else f"{path}: {exc}") from None


def trust_store() -> TrustStore:
    """The user's trusted workspaces (agentd.permissions.trust): `trust.json` in the user config dir."""
    return TrustStore(user_config_path().parent / TRUST_FILE, grant_key())


def workspace_definitions(settings: Settings) -> dict[str, Any]:
    """What the workspace config defines that runs code, which trust is bound to (its digest): its hooks,
    and its MCP servers when it defines any (so a digest of hooks alone stays what it was)."""
    out: dict[str, Any] = {"hooks": settings.workspace_hooks.model_dump()}
    if settings.workspace_mcp_servers:
        out["mcp"] = {n: s.model_dump() for n, s in sorted(settings.workspace_mcp_servers.items())}
    return out


def workspace_code(settings: Settings) -> list[str]:
    """What the workspace config defines that would run code: `["hooks"]`, `["mcp"]`, both or none."""
    return [w for w, on in (("hooks", settings.workspace_hooks.any()), ("mcp", bool(settings.workspace_mcp_servers)))
            if on]  # fmt: skip


def untrusted_notice(settings: Settings, root: Path) -> str | None:
    """None when the workspace at `root` defines nothing that runs code (hooks, MCP servers) or the user
    trusts it with exactly these definitions; else the one text (terminal, editors, status) that says what
    does not run, why, and how to trust it (issue 12 §5; docs/security.md §7)."""
    what = workspace_code(settings)
    if not what or trust_store().is_trusted(root, definitions_digest(workspace_definitions(settings))):
        return None
    named = " and ".join({"hooks": "hooks", "mcp": "MCP servers"}[w] for w in what)
    return (
        f"the {named} of {root}/.agentd/config.toml do not run: this workspace is not trusted (or they "
        f"changed since you trusted it). Read that file; to let them run, use `agentd trust {root}` in a "
        "terminal, then start a new session (or reopen this one)"
    )


def user_hooks(settings: Settings, root: Path, lines: LineWriter, session_id: str = "") -> UserHooks:
    """The session's hooks: the user's, then the workspace's when the user trusts this workspace with
    exactly these definitions (otherwise `untrusted_notice` is written as one `[Hook]` line and kept for
    the status and the editors)."""
    specs = _specs(settings.hooks, "user")
    notice = untrusted_notice(settings, root)
    if settings.workspace_hooks.any() and notice is None:
        specs += _specs(settings.workspace_hooks, str(root))
    elif notice is not None:
        lines(f"[Trust] {notice}")
    return UserHooks(specs, root, api_key_env=settings.api_key_env, write=lines, session_id=session_id,
                     untrusted=notice, ignored=workspace_code(settings) if notice else [])  # fmt: skip


def _specs(hooks: HooksSettings, origin: str) -> list[HookSpec]:
    out: list[HookSpec] = []
    for point in POINTS:
        for h in getattr(hooks, point):
            name = h.name or (h.command.split() or ["hook"])[0]
            out.append(HookSpec(point, name, h.command, h.matcher, h.timeout_s, origin))
    return out


def launcher(settings: Settings, root: Path, protected: ProtectedPaths) -> Launcher:
    """The session's launcher for `run_command` (issue 12): `sandbox.*` over the workspace `root`."""
    box = settings.sandbox
    return launcher_for(
        box.mode, [root], protected, network=box.network, writable=box.writable, readable=box.readable
    )


def session_mcp_specs(settings: Settings, cwd: Path) -> list[Any]:
    """The MCP servers a session at `cwd` starts (agentd.mcp.manager.specs_from_settings): the user's and
    the editor's, and the workspace file's once the user trusts the workspace with them."""
    from agentd.mcp.manager import specs_from_settings

    root = Path(os.path.realpath(cwd))
    trusted = bool(settings.workspace_mcp_servers) and untrusted_notice(settings, root) is None
    return specs_from_settings(settings, workspace_trusted=trusted)


def session_launcher(settings: Settings, cwd: Path, data_dir: DataDir) -> Launcher:
    """The launcher a session at `cwd` gets, for the MCP servers started before it is built (the same
    sandbox policy as its `run_command`: agentd.mcp.connection)."""
    root = Path(os.path.realpath(cwd))
    return launcher(settings, root, protected_paths(settings, data_dir))


def _build(
    session_id: str,
    cwd: Path,
    settings: Settings,
    provider: Provider,
    store: SessionStore,
    data_dir: DataDir,
    approver: Approver,
    clock: Clock,
    lines: LineWriter,
    instructions: Instructions,
    mcp: Any,
    sink: EventSink | None,
) -> Session:
    sweep_left(data_dir.root)  # stand-ins a killed process left in a workspace go before anything runs
    todos = TodoTracker(max_items=settings.todos.max_items, stale_rounds=settings.todos.stale_rounds)
    hooks = Hooks(line_writer=lines)
    hooks.add_before_model("todo_reminder", todos.before_model)
    root = Path(os.path.realpath(cwd))
    context = Context(prompt_caching=settings.prompt_caching, ttl=settings.cache.ttl, now=clock.now)
    nested = NestedInstructions(root, context.view)
    hooks.add_after_tool("nested_instructions", nested.after_tool, prepare=nested.prepare)
    registry = ToolRegistry([TodoWrite(), *default_tools(), *(mcp.tools() if mcp is not None else [])])
    rules = [Rule(tool=r.tool, action=r.action, network=r.network) for r in settings.permissions.rules]
    root = Path(os.path.realpath(cwd))
    protected = protected_paths(settings, data_dir)
    hooks_of_user = user_hooks(settings, root, lines, session_id)
    hooks_of_user.register(hooks)
    journal = Journal(store, settings.store.blob_min_bytes)

    def persist_grant(tool: str, kind: str) -> None:
        journal.write(GrantRecord(**gate.permission_record("grant", {"tool": tool, "grant": kind})))

    gate = Gate(
        rules=rules,
        grants=Grants(),
        mode=settings.permissions.default_mode,
        hooks=hooks,
        approver=approver,
        approval_timeout_s=settings.permissions.approval_timeout_s,
        clock=clock,
        session_id=session_id,
        line_writer=lines,
        on_grant=persist_grant,
        roots=[root],
        protected=protected,
        signer=RecordSigner(grant_key(), session_id),
        user_hooks=hooks_of_user,
    )
    secrets = secrets_of(settings)
    audit = AuditLog(data_dir.audit_path(session_id), secrets=secrets, write_blob=journal.blob)
    tool_ctx = ToolContext(
        root=root,
        read_max_bytes=settings.tools.read_max_bytes,
        output_max_bytes=settings.tools.output_max_bytes,
        run_timeout_s=settings.tools.run_timeout_s,
        env=child_env(os.environ, settings.api_key_env, settings.sandbox.pass_env),
        state={"todos": todos, "api_key_env": settings.api_key_env, "pass_env": settings.sandbox.pass_env},
        launcher=launcher(settings, root, protected),
    )
    say_missing_once(tool_ctx.launcher, lines)
    checkpointer = Checkpointer(
        store_root=data_dir.session_dir(session_id) / CHECKPOINTS_DIR, workspace=lambda: tool_ctx.workspace,
        settings=settings.checkpoints, exclude=data_dir.root, journal=journal, lines=lines,
    )  # fmt: skip
    return Session(
        session_id=session_id,
        cwd=root,
        settings=settings,
        provider=provider,
        clock=clock,
        window_tokens=settings.window_tokens(context_window(provider.model)),
        system=system_blocks(root, instructions.text),
        tool_defs=registry.definitions(settings.tools.terse_descriptions),
        context=context,
        tracker=todos,
        hooks=hooks,
        toolbox=Toolbox(registry, tool_ctx, gate, audit, hooks, session_id),
        journal=journal,
        checkpointer=checkpointer,
        lines=lines,
        secrets=secrets,
        instructions=instructions,
        mcp=mcp,
        sink=sink,
    )


def create_session(
    *,
    cwd: Path,
    settings: Settings,
    provider: Provider,
    data_dir: DataDir,
    approver: Approver,
    sink: EventSink | None = None,
    clock: Clock | None = None,
    lines: LineWriter = stderr_line,
    mcp: Any = None,
) -> Session:
    """A new session for workspace `cwd`: store created and locked, `meta` record written, the project
    instructions read once and stored in it (`agentd.core.instructions`)."""
    session_id = new_session_id()
    meta: dict[str, Any] = {
        "cwd": os.path.realpath(cwd),
        "provider": provider.name,
        "model": provider.model,
        "directories": [],
    }
    instructions = load_instructions(cwd, user_instructions_dir())
    meta["instructions"] = instructions.record()
    store = SessionStore.create(data_dir, session_id, meta)
    try:
        return _build(
            session_id,
            cwd,
            settings,
            provider,
            store,
            data_dir,
            approver,
            clock or default_clock(),
            lines,
            instructions,
            mcp,
            sink,
        )
    except BaseException:
        store.close()
        raise


def open_session(
    *,
    session_id: str,
    settings: Settings,
    provider: Provider,
    data_dir: DataDir,
    approver: Approver,
    sink: EventSink | None = None,
    clock: Clock | None = None,
    lines: LineWriter = stderr_line,
    mcp: Any = None,
) -> Session:
    """Open an existing session: lock it, replay its log into fresh per-session objects, check and repair
    it, and run the validator (CONTRACTS.md §9). Its system prompt is rebuilt from the instructions stored
    in its log (the meta record, or the last `instructions` record of a reload), never from the files, so the cached prefix stays byte-identical. Raises SessionNotFound, SessionLocked, StorageError."""
    store = SessionStore.open(data_dir, session_id)
    try:
        cwd = Path(store.meta.get("cwd") or os.getcwd())
        branch = store.active_branch()  # the instructions of the conversation's branch (issue 13)
        said = [store.read_sparse(x) for x in store.tally.sparse if x.kind in ("meta", "instructions")]
        instructions = latest_record(r for r in said if on_branch(r, branch)) or Instructions()
        session = _build(
            session_id,
            cwd,
            settings,
            provider,
            store,
            data_dir,
            approver,
            clock or default_clock(),
            lines,
            instructions,
            mcp,
            sink,
        )
        rewinds = [store.read_sparse(x) for x in store.tally.sparse if x.kind == "rewind"]
        recover(session, rewinds)  # a rewind a crash interrupted is finished first (replay reads its record)
        resume(session, store)
    except BaseException:
        store.close()
        raise
    return session


async def built_off_loop(build: Callable[..., Session], /, **kwargs: Any) -> Session:
    """`build(**kwargs)` (`create_session` or `open_session`) in a worker thread, so a server's event loop
    goes on while the session's files are read, locked, written and fsynced and its log replayed (issue 16
    §1: 6-14 ms of CPU per session). What `build` gets must not touch the loop: its sink and line writer are
    called from the thread only before the adapter attaches the session to its connection, when they drop
    updates and write lines to stderr. The session is returned once built, so its first records are durable
    before any id is answered. If the awaiting task is cancelled (a cancelled request, a client gone) the
    thread is waited for and the session it built is closed (its lock released) before CancelledError is
    raised: nothing is left locked or leaked. Raises what `build` raises (SessionNotFound, SessionLocked,
    StorageError, ConfigError)."""
    job = asyncio.get_running_loop().run_in_executor(None, lambda: _in_worker(build, kwargs))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        while not job.done():  # the thread cannot be stopped: its session must not outlive the request
            try:
                await asyncio.wait({job})
            except asyncio.CancelledError:
                continue
        if not job.cancelled() and job.exception() is None:
            job.result().close()
        raise


def _in_worker(build: Callable[..., Session], kwargs: dict[str, Any]) -> Session:
    failpoints.hit("session.build")  # tests hold the thread here (`gate`) to cancel or disconnect meanwhile
    return build(**kwargs)
