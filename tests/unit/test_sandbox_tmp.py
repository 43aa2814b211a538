"""sandbox-tmp: a program agentd starts in the sandbox stays runnable when it is installed under a private
folder (`/tmp`, `/var/tmp`, `/run`, which the sandbox replaces with empty ones). Found from outside: with
the checkout cloned under /tmp, every MCP server started from its virtualenv vanished from its own
sandbox. The pure parts: which paths a program needs (`agentd.sandbox.visible`), how bubblewrap binds them
back, and that a workspace config cannot show private paths."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from agentd.config import load_settings
from agentd.sandbox import SandboxPolicy
from agentd.sandbox.bwrap import bwrap_argv
from agentd.sandbox.visible import program_paths


def venv(top: Path) -> Path:
    """A virtualenv-shaped tree: `bin/python` (a link to this interpreter), `pyvenv.cfg`, `lib/`."""
    (top / "bin").mkdir(parents=True)
    (top / "lib").mkdir()
    os.symlink(sys.executable, top / "bin" / "python")
    base = Path(os.path.realpath(sys.executable)).parent
    (top / "pyvenv.cfg").write_text(f"home = {base}\ninclude-system-site-packages = false\n")
    return top / "bin" / "python"


def test_a_venv_python_brings_its_venv_and_its_base(tmp_path: Path) -> None:
    """sandbox-tmp: the venv (sys.prefix of the interpreter used), as named, and the base installation."""
    python = venv(tmp_path / "proj" / ".venv")
    paths = program_paths([str(python), "-m", "tool"])
    base = Path(os.path.realpath(sys.executable)).parent
    assert tmp_path / "proj" / ".venv" in paths and python in paths
    assert (base.parent if base.name == "bin" else base) in paths
    assert tmp_path / "proj" not in paths  # only the installation, not the folder around it


def test_a_script_brings_its_interpreter_and_a_plain_folder_itself(tmp_path: Path) -> None:
    """sandbox-tmp: a console script's `#!` interpreter, found on PATH; a tool outside any `bin` folder
    brings its own folder."""
    python = venv(tmp_path / "venv")
    tools = tmp_path / "tools"
    tools.mkdir()
    script = tools / "serve"
    script.write_text(f"#!{python}\nprint('hi')\n")
    script.chmod(0o755)
    paths = program_paths(["serve"], {"PATH": str(tools)})
    assert {script, tools, python, tmp_path / "venv"} <= set(paths)
    assert program_paths(["serve"]) == ()  # not on agentd's PATH, and no PATH configured


def test_arguments_and_search_paths_count_only_for_configured_command_lines(tmp_path: Path) -> None:
    """sandbox-tmp: an MCP server's configured script, folders and PYTHONPATH/NODE_PATH entries stay
    visible; a command line the model wrote (run_command) brings only its executable's installation.
    Sockets never count (a bound socket stays connectable, read-only or not)."""
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "server.py").write_text("")
    (tmp_path / "lib").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "agent.sock"))
    try:
        argv = [sys.executable, str(tmp_path / "srv" / "server.py"), "--repo", str(tmp_path / "lib"),
                str(tmp_path / "agent.sock"), "/nonexistent/x"]  # fmt: skip
        env = {"PYTHONPATH": f"{tmp_path / 'lib'}{os.pathsep}relative", "NODE_PATH": str(tmp_path / "srv")}
        configured = set(program_paths(argv, env))
        assert {tmp_path / "srv" / "server.py", tmp_path / "srv", tmp_path / "lib"} <= configured
        assert tmp_path / "agent.sock" not in configured
        assert not {tmp_path / "srv", tmp_path / "lib"} & set(program_paths(argv))
        assert program_paths(["/bin/sh", "-c", str(tmp_path / "lib")]) == program_paths(["/bin/sh"])
    finally:
        sock.close()


def test_bwrap_binds_private_visible_paths_back_read_only() -> None:
    """sandbox-tmp: after the private tmpfs and before the workspace; never a private folder itself
    (`/tmp` would bring every socket under it back); not twice, nor inside the workspace; a hidden path
    inside a shown one is still hidden."""
    policy = SandboxPolicy(
        writable=(Path("/tmp/ws"),),
        hidden=(Path("/tmp/tool/secrets"), Path("/tmp/other/data")),
        visible=(Path("/tmp/tool"), Path("/tmp/tool/venv"), Path("/tmp"), Path("/run/user/1/node"),
                 Path("/tmp/ws/.venv"), Path("/usr/lib/python3"), Path("/")),
    )  # fmt: skip
    argv = bwrap_argv("/usr/bin/bwrap", policy, Path("/tmp/ws"), ["/tmp/tool/venv/bin/python"])
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 1] != "/"]
    assert binds == ["/tmp/tool", "/run/user/1/node"]
    joined = " ".join(argv)
    order = [
        "--tmpfs /tmp",
        "--ro-bind /tmp/tool /tmp/tool",
        "--bind /tmp/ws /tmp/ws",
        "--tmpfs /tmp/tool/secrets",
    ]
    positions = [joined.index(part) for part in order]
    assert positions == sorted(positions)
    assert "/tmp/other/data" not in joined  # under /tmp and nothing shows it: already invisible


def test_a_workspace_config_cannot_show_private_paths(tmp_path: Path) -> None:
    """sandbox-tmp: `sandbox.readable` loosens the sandbox, so only the user's config may set it."""
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").write_text('[sandbox]\nreadable = ["/run/user"]\n')
    warnings: list[str] = []
    settings = load_settings(ws, warnings=warnings)
    assert settings.sandbox.readable == []
    assert any("sandbox.readable ignored" in w for w in warnings), warnings
