"""The dependency rule of ARCHITECTURE.md, checked by parsing imports with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentd import failpoints

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "agentd"
TRANSPORT = ("pygls", "lsprotocol", "acp")


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "examples" not in p.relative_to(PKG).parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module name, at module level) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    for node in tree.body:  # imports guarded by `if TYPE_CHECKING:` count as module level too
        if isinstance(node, ast.If):
            top |= {id(n) for n in node.body}
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, id(node) in top))
    return out


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _first(name: str) -> str:
    return name.split(".")[0]


def test_core_never_imports_a_transport_library_or_an_adapter() -> None:
    bad = [
        (_rel(p), m)
        for p in _modules()
        if not _rel(p).startswith("agentd/adapters/") and _rel(p) != "agentd/cli.py"
        for m, _ in _imports(p)
        if _first(m) in TRANSPORT or m.startswith("agentd.adapters")
    ]
    assert bad == []


def test_protocol_is_a_leaf() -> None:
    bad = [
        (_rel(p), m)
        for p in (PKG / "protocol").rglob("*.py")
        for m, _ in _imports(p)
        if _first(m) == "agentd" and not m.startswith("agentd.protocol")
    ]
    assert bad == []


def test_testing_package_is_isolated_both_ways() -> None:
    inside = [
        (_rel(p), m)
        for p in (PKG / "testing").rglob("*.py")
        for m, _ in _imports(p)
        if _first(m) == "agentd" and not m.startswith("agentd.testing")
    ]
    outside = [
        (_rel(p), m)
        for p in _modules()
        if not _rel(p).startswith("agentd/testing/")
        for m, _ in _imports(p)
        if m.startswith("agentd.testing")
    ]
    assert (inside, outside) == ([], [])


@pytest.mark.parametrize(
    "sdk,owner",
    [("anthropic", "agentd/providers/anthropic.py"), ("openai", "agentd/providers/openai_compat.py")],
)
def test_sdks_are_imported_lazily_and_only_by_their_provider(sdk: str, owner: str) -> None:
    users = sorted(
        {
            _rel(p)
            for p in _modules()
            if not _rel(p).startswith("agentd/testing/")
            for m, _ in _imports(p)
            if _first(m) == sdk
        }
    )
    at_module_level = sorted(
        {_rel(p) for p in _modules() for m, top in _imports(p) if _first(m) == sdk and top}
    )
    assert (users, at_module_level) == ([owner], [])


def test_nothing_in_agentd_calls_print() -> None:
    calls = [
        (_rel(p), n.lineno)
        for p in _modules()
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "print"
        and not _rel(p).startswith("agentd/testing/")
    ]
    assert calls == []


def test_no_module_level_session_state() -> None:
    singletons = [
        (_rel(p), n.lineno)
        for p in _modules()
        for n in ast.parse(p.read_text(encoding="utf-8")).body
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and n.value.func.id in ("TodoTracker", "Context", "Session", "AuditLog", "Gate", "Grants", "Hooks")
    ]
    assert singletons == []


def test_every_failpoint_named_in_code_and_tests_is_registered() -> None:
    named: set[str] = set()
    for path in [*_modules(), *(ROOT / "tests").rglob("*.py")]:
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("hit", "action")
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id == "failpoints"
                and n.args
                and isinstance(n.args[0], ast.Constant)
            ):
                named.add(str(n.args[0].value))
    assert named - failpoints.POINTS == set()


def test_the_clock_is_a_leaf_and_providers_never_reach_into_the_core() -> None:
    """Issue 10 Part 1: the clock lives below the core; providers import it without importing agentd.core
    (the scripted provider's request validator, a leaf that imports nothing of agentd, excepted)."""
    clock = [m for m, _ in _imports(PKG / "clock.py") if _first(m) == "agentd"]
    providers = [
        (_rel(p), m)
        for p in (PKG / "providers").rglob("*.py")
        for m, _ in _imports(p)
        if m.startswith("agentd.core") and m != "agentd.core.validate"
    ]
    assert (clock, providers) == ([], [])


def _eager_imports(path: Path) -> list[str]:
    """Modules a file imports when it is imported: module level, not under `if TYPE_CHECKING:`, with
    `from pkg import name` also naming `pkg.name` (it may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return out


def _module_file(name: str) -> Path | None:
    base = ROOT / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_the_start_up_path_imports_no_lsp_library_or_sdk() -> None:
    """Issue 16: `initialize` is answered before pygls and lsprotocol are imported (`lsprotocol.types` alone
    takes ~0.3 s): what `agentd` imports up to that answer (cli, the transport, the front door, the
    connection state, the configuration) never imports them, an SDK or the core's session."""
    seen: set[str] = set()
    todo = ["agentd.cli", "agentd.adapters.lsp.transport", "agentd.config", "agentd.providers.models"]
    external: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(name)
        if path is None:
            continue
        for m in _eager_imports(path):
            if _first(m) == "agentd":
                todo.append(m)
            else:
                external.add(_first(m))
    heavy = {"pygls", "lsprotocol", "cattrs", "attrs", "anthropic", "openai", "httpx2"}
    assert (sorted(external & heavy), "agentd.core.session" in seen) == ([], False)


def _session_attributes(path: Path) -> list[tuple[str, int, str]]:
    """Attributes read or written on a Session in `path`: `session.X`, `<expr>.session.X`, and in the adapters
    (whose handlers name it so: `s = hosted.session`) `s.X`."""
    names = ("session", "s") if _rel(path).startswith("agentd/adapters/") else ("session",)
    out = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(n, ast.Attribute):
            continue
        base = n.value
        if (isinstance(base, ast.Name) and base.id in names) or (
            isinstance(base, ast.Attribute) and base.attr == "session"
        ):
            out.append((_rel(path), n.lineno, n.attr))
    return out


def test_adapters_and_the_cli_use_only_the_session_api() -> None:
    """Issue 10 Part 1: adapters and the command line's front ends ask the Session (its documented public API),
    never reach into its parts (`session.p`, the Context, the store, private attributes)."""
    from agentd.core.session import Session

    fronts = ("agentd/cli.py", "agentd/terminal.py", "agentd/demo.py")
    front = [p for p in _modules() if _rel(p).startswith("agentd/adapters/") or _rel(p) in fronts]
    bad = [a for p in front for a in _session_attributes(p) if a[2] not in Session.PUBLIC]
    assert bad == []


def test_only_the_journal_appends_to_a_session_log() -> None:
    """Issue 10 Part 1: one writer owned by the session. Outside the store itself, only agentd/core/journal.py
    calls a store's `append` / `append_many`."""
    writers = sorted(
        {
            _rel(p)
            for p in _modules()
            if _rel(p) != "agentd/persistence/store.py"
            for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("append", "append_many")
            and "store" in ast.unparse(n.func.value).lower()
        }
    )
    assert writers == ["agentd/core/journal.py"]


def _runtime_graph() -> dict[str, set[str]]:
    """Module -> the agentd modules it imports when it runs (module level or inside functions; imports under
    `if TYPE_CHECKING:` left out)."""

    def name(p: Path) -> str:
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    mods = {name(p): p for p in _modules()}
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = {
            id(x)
            for n in ast.walk(tree)
            if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
            for x in ast.walk(n)
        }
        found: set[str] = set()
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            if isinstance(n, ast.Import):
                found |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                found |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
        graph[mod] = {m for m in found if m in mods and m != mod}
    return graph


def test_no_import_cycle_anywhere_in_agentd() -> None:
    """STYLE.md: no import cycles. No module of agentd imports (at run time, module level or inside a
    function) something that imports it back. Issue 12 follow-up, item 5: the cycles tools.base <->
    tools.workspace, agentd.sandbox <-> sandbox.status and cli <-> demo <-> terminal are gone (the refusal
    in agentd.tools.refusal, the exit codes in agentd.errors, the data dir in agentd.persistence.paths)."""
    graph = _runtime_graph()
    mine = ("agentd",)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m == goal:
                return True
            if m not in seen:
                seen.add(m)
                todo.extend(graph.get(m, ()))
        return False

    cycles = sorted(m for m in graph if m.startswith(mine) and reaches(m, m))
    assert cycles == []


def test_the_terminal_libraries_stay_in_the_terminal_client() -> None:
    """prompt_toolkit and rich are imported only by agentd/adapters/tui/, which only the command line imports,
    lazily: an editor's `agentd` never loads them (issue 14)."""
    users = sorted(
        {_rel(p) for p in _modules() for m, _ in _imports(p) if _first(m) in ("prompt_toolkit", "rich")}
    )
    assert users and all(u.startswith("agentd/adapters/tui/") for u in users)
    importers = sorted({
        (_rel(p), top)
        for p in _modules()
        if not _rel(p).startswith("agentd/adapters/tui/")
        for m, top in _imports(p)
        if m.startswith("agentd.adapters.tui")
    })  # fmt: skip
    assert importers == [("agentd/cli.py", False)]


_AT_INITIALIZE = """
import json, runpy, sys
import agentd.adapters.lsp.front as front
answer, out = front.Link._initialize, sys.argv[1]
def initialize(self, *args):
    answer(self, *args)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(sorted(sys.modules), fh)
front.Link._initialize = initialize
sys.argv = ["agentd"]
runpy.run_module("agentd", run_name="__main__", alter_sys=True)
"""
# Modules the daemon needs only for a session, a turn or the LSP server after `initialize` (issue 16).
HEAVY_AT_START = ("pygls", "lsprotocol", "cattrs", "anthropic", "openai", "httpx2", "httpx", "mcp", "rich",
                  "prompt_toolkit", "agentd.core", "agentd.checkpoints", "agentd.mcp", "agentd.providers.anthropic",
                  "agentd.providers.openai_compat", "agentd.tools.ripgrep", "agentd.tools.shell")  # fmt: skip


def test_the_daemon_answers_initialize_before_importing_the_core_the_sdks_or_pygls(tmp_path: Path) -> None:
    """Issue 16 (`initialize_ms` <= 500): what `python -m agentd` has imported when it writes the
    `initialize` answer, read from the running process (function-level imports count too: building the
    argument parser once imported the whole core through `agentd.checkpoints_cli`)."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "modules.json"
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_CONFIG_DIR": str(home / ".config/agentd")}  # fmt: skip
    params = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()
    stop = json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()
    frames = b"".join(b"Content-Length: %d\r\n\r\n" % len(b) + b for b in (body, stop))
    subprocess.run([sys.executable, "-c", _AT_INITIALIZE, str(out)], input=frames, env=env, cwd=tmp_path,
                   capture_output=True, timeout=120, check=False)  # fmt: skip
    loaded = json.loads(out.read_text(encoding="utf-8"))
    assert "agentd.adapters.lsp.front" in loaded
    assert [
        m for m in loaded if m in HEAVY_AT_START or m.startswith(tuple(h + "." for h in HEAVY_AT_START))
    ] == []
