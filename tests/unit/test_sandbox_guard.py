"""The sandbox's protected-path guard without bubblewrap (issue 12 §3, break12): the walks that find
protected paths at any depth and those a command created, the empty stand-ins for absent ones (created,
shared, removed, never removing what someone else put there), the Seatbelt profile's denials by name, and
the model-facing lines. The behaviour inside bubblewrap is tests/integration/test_sandbox_protected.py."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import agentd.sandbox.guard as guard_module
from agentd.permissions.protected import ANYWHERE, ProtectedPaths
from agentd.sandbox import Launcher, SandboxStatus, build_policy
from agentd.sandbox.guard import LONG_PATH, STAND_INS, Guard, created, readonly_hint, survey
from agentd.sandbox.seatbelt import seatbelt_profile
from agentd.tools.base import ToolContext
from agentd.tools.shell import RunCommand, _launch
from tests.lsp.harness import wait_until


def make(root: Path, *paths: str) -> None:
    for p in paths:
        target = root / p
        if p.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x")


def test_survey_finds_protected_names_at_any_depth_without_entering_them(tmp_path: Path) -> None:
    """break12: every `ANYWHERE` name is found, shallow first; its inside and the skipped paths are not
    walked; symlinks are not followed."""
    make(tmp_path, ".git/hooks/", "a/b/c/.vscode/tasks.json", "a/.exrc", "hidden/.git/", "src/x.py")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    found = survey([tmp_path], skip=(tmp_path / "hidden",))
    assert [p.relative_to(tmp_path).as_posix() for p in found.found] == [".git", "a/.exrc", "a/b/c/.vscode"]
    assert found.complete


def test_created_tells_new_from_moved_and_from_unknown(tmp_path: Path) -> None:
    """break12: a protected entry made in a listed folder or in a new one is new; one in a folder the
    command renamed is not; a budget that runs out judges nothing it did not list."""
    make(tmp_path, "sub/.git/config", "keep/")
    before = survey([tmp_path], skip=())
    make(tmp_path, "keep/.vscode/settings.json", "n/e/w/.git/config")
    os.rename(tmp_path / "sub", tmp_path / "moved")
    made, whole = created(before, [tmp_path], skip=())
    assert ([p.relative_to(tmp_path).as_posix() for p in made], whole) == (
        ["keep/.vscode", "n/e/w/.git"],
        True,
    )
    assert created(before, [tmp_path], skip=(), budget_s=-1.0) == ([], False)
    partial = survey([tmp_path], skip=(), budget_s=-1.0)
    assert not partial.complete
    assert created(partial, [tmp_path], skip=()) == ([], True)  # the existing .vscode is not judged new


def test_stand_ins_are_shared_and_never_remove_someone_elses_file(tmp_path: Path) -> None:
    """break12: two launches share one stand-in; the last release removes it only while it is still the
    empty one agentd made."""
    spot = tmp_path / ".vscode"
    assert STAND_INS.hold(spot, "dir") == STAND_INS.hold(spot, "dir") is not None
    STAND_INS.release(spot)
    assert spot.is_dir()
    STAND_INS.release(spot)
    assert not spot.exists()
    STAND_INS.hold(spot, "dir")
    (spot / "settings.json").write_text("{}")  # the user's editor wrote it on the host meanwhile
    STAND_INS.release(spot)
    assert (spot / "settings.json").read_text() == "{}"
    rc = tmp_path / ".exrc"
    STAND_INS.hold(rc, "file")
    rc.unlink()
    rc.write_text("user's")  # replaced by another file: kept
    STAND_INS.release(rc)
    assert rc.read_text() == "user's"
    assert STAND_INS.hold(rc, "file") is None  # something exists there: no stand-in


def test_guard_binds_existing_and_stands_in_for_absent_paths(tmp_path: Path) -> None:
    """break12: an existing `.git` anywhere is bound read-only; every absent protected name at the top
    gets an empty stand-in (a folder, or a file), also a start-up file of a home folder inside the
    workspace; after the launch no stand-in is left."""
    home = tmp_path / "home"
    make(home, "ws/lib/.git/config", ".bashrc", ".config/")
    p = ProtectedPaths.of(home, home / ".config/agentd", tmp_path / "data")
    ws = home / "ws"
    guard = Guard(build_policy([home], p))
    ro = set(guard.policy().readonly)
    assert {ws / "lib/.git", home / ".bashrc", home / ".zshrc", home / ".git", home / ".nvim.lua"} <= ro
    assert (home / ".zshrc").is_file() and (home / ".vscode").is_dir() and (home / ".ssh").is_dir()
    assert guard.finish() == []
    assert sorted(os.listdir(home)) == [".bashrc", ".config", "ws"]
    assert sorted(os.listdir(home / ".config")) == []


def test_guard_moves_what_the_command_created_to_the_quarantine(tmp_path: Path) -> None:
    """break12: a protected path created where no stand-in could be is moved out and named."""
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    guard = Guard(build_policy([ws], ProtectedPaths.of(tmp_path / "home", tmp_path / "cfg", data)))
    make(ws, "pkg/.git/hooks/pre-commit", "pkg/src.py")
    notes = guard.finish()
    assert len(notes) == 1 and "pkg/.git" in notes[0] and "unsandboxed: true" in notes[0]
    assert guard.moved == 1 and sorted(os.listdir(ws)) == ["pkg"] and os.listdir(ws / "pkg") == ["src.py"]
    [stamp] = os.listdir(data / "quarantine")
    assert (data / "quarantine" / stamp / "pkg/.git/hooks/pre-commit").read_text() == "x"


def test_seatbelt_denies_protected_names_and_fixed_paths_even_when_absent() -> None:
    """break12: on macOS every `ANYWHERE` name is denied by a regex, the fixed paths by subpath."""
    home = Path("/Users/u")
    policy = build_policy([], ProtectedPaths.of(home, home / ".config/agentd"))
    policy = policy.__class__(writable=(home,), guarded=((home / ".bashrc", "file"),))
    profile = seatbelt_profile(policy)
    assert '(deny file-write* (subpath "/Users/u/.bashrc"))' in profile
    for name in ANYWHERE:
        assert f'(regex #"/{name.replace(".", chr(92) + ".")}(/|$)")' in profile


def test_the_readonly_hint_says_how_to_ask() -> None:
    assert "unsandboxed: true" in readonly_hint(False) and ".vscode" in readonly_hint(False)
    assert 'sandbox = "required"' in readonly_hint(True) and "ask the user" in readonly_hint(True)


def test_a_tree_beyond_the_budget_is_named_and_one_beyond_the_bind_cap_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """break12 (S1): a workspace too large to walk within the budget is not silently half-guarded (the
    result says so); one with more protected paths than bubblewrap can bind is refused, never run with
    some left writable; the fixed-place paths (.git at the top, start-up files) come first in the binds."""
    ws = tmp_path / "ws"
    make(ws, ".git/", "a/.git/", "b/.git/", "c/src/")
    p = ProtectedPaths.of(tmp_path / "home", tmp_path / "cfg", tmp_path / "data")
    first = Guard(build_policy([ws], p))
    fixed = len(first.policy().readonly) - 2  # all but a/.git and b/.git
    assert first.policy().readonly[0] == ws / ".git"  # fixed places first, the survey's finds after
    first.finish(ran=False)
    monkeypatch.setattr(guard_module, "MAX_BINDS", fixed + 1)
    with pytest.raises(guard_module.TooManyProtected) as refused:
        Guard(build_policy([ws], p))
    text = str(refused.value)
    assert f"holds {fixed + 2} protected paths (.git; e.g. " in text and str(ws / "a" / ".git") in text
    assert "unsandboxed: true" in text and sorted(os.listdir(ws)) == [".git", "a", "b", "c"]
    monkeypatch.setattr(guard_module, "MAX_BINDS", 512)
    monkeypatch.setattr(guard_module, "WALK_BUDGET_S", -1.0)
    slow = Guard(build_policy([ws], p))
    assert [n for n in slow.finish() if "could not be searched whole" in n]
    assert sorted(os.listdir(ws)) == [".git", "a", "b", "c"]


def _deep(ws: Path, levels: int = 24) -> int:
    """A chain of 200-byte folder names below `ws` (24 levels: beyond PATH_MAX, 4096), made one folder at a
    time; the open descriptor of the last."""
    fd = os.open(ws, os.O_RDONLY)
    for _ in range(levels):
        os.mkdir("d" * 200, dir_fd=fd)
        fd, old = os.open("d" * 200, os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    return fd


def test_paths_beyond_path_max_are_guarded(tmp_path: Path) -> None:
    """break12 (S2): os.scandir failed with ENAMETOOLONG on a folder deeper than PATH_MAX, the walk
    skipped it and still counted as complete, so a `.git/hooks/pre-commit` at a 4244-byte path stayed
    without a word. The walks reach such folders through folder descriptors: an existing deep `.git` is
    bound read-only, one the command made is moved to the quarantine (renameat) and named."""
    ws = tmp_path / "ws"
    ws.mkdir()
    fd = _deep(ws)
    p = ProtectedPaths.of(tmp_path / "home", tmp_path / "cfg", tmp_path / "data")
    try:
        os.mkdir(".vscode", dir_fd=fd)
        guard = Guard(build_policy([ws], p))
        # bwrap binds by path: the deep `.vscode` is kept read-only through its deepest folder a mount can name
        deep = [r for r in guard.policy().readonly if ws in r.parents and r.name == "d" * 200]
        assert deep and all(len(os.fsencode(str(r))) < LONG_PATH for r in guard.policy().readonly)
        os.makedirs(f"/proc/self/fd/{fd}/.git/hooks")
        with open(f"/proc/self/fd/{fd}/.git/hooks/pre-commit", "w") as f:
            f.write("evil\n")
        notes = guard.finish()
        assert not os.path.exists(f"/proc/self/fd/{fd}/.git"), notes
        assert [n for n in notes if "the command created " in n and "agentd moved it to" in n], notes
        assert not [n for n in notes if "could not be searched whole" in n], notes
        moved = list((tmp_path / "data" / "quarantine").rglob("pre-commit"))
        assert [m.read_text() for m in moved] == ["evil\n"]
    finally:
        os.close(fd)
        shutil.rmtree(ws / ("d" * 200))  # by folder fds: pytest's own clean-up walks by path


def test_empty_protected_entries_are_left_and_a_launch_that_never_ran_is_not_judged(tmp_path: Path) -> None:
    """break12: an empty `.git` folder or `.exrc` file a command made is harmless (and what another
    agentd's stand-in looks like): left in place; `finish(ran=False)` removes the stand-ins only."""
    ws = tmp_path / "ws"
    ws.mkdir()
    p = ProtectedPaths.of(tmp_path / "home", tmp_path / "cfg", tmp_path / "data")
    guard = Guard(build_policy([ws], p))
    make(ws, "a/.git/", "b/x")
    (ws / "b" / ".exrc").write_text("")
    assert guard.finish() == [] and (ws / "a" / ".git").is_dir() and (ws / "b" / ".exrc").exists()
    unused = Guard(build_policy([ws], p))
    make(ws, "c/.git/config")
    assert unused.finish(ran=False) == [] and (ws / "c" / ".git" / "config").exists()
    assert sorted(os.listdir(ws)) == ["a", "b", "c"]


async def test_a_cancelled_launch_leaves_no_stand_in(tmp_path: Path) -> None:
    """break12: run_command cancelled while the launch (its walk) runs in a thread: the launch finishes
    there and its stand-ins are removed."""
    ws = tmp_path / "ws"
    make(ws, "src/a.py")
    p = ProtectedPaths.of(tmp_path / "home", tmp_path / "cfg", tmp_path / "data")
    launcher = Launcher(
        "required", SandboxStatus("bubblewrap", True, "/usr/bin/bwrap", "0.8.0"), build_policy([ws], p)
    )
    args = RunCommand.Input.model_validate({"command": "true"})
    call = asyncio.ensure_future(_launch(launcher, ["/bin/sh", "-c", "true"], ToolContext(root=ws), args))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_until(lambda: sorted(os.listdir(ws)) == ["src"], "the stand-ins of the abandoned launch to go")


def test_stand_ins_left_by_a_kill_9_are_removed_by_the_next_launch(tmp_path: Path) -> None:
    """break12 (new-user trial): a stand-in left by agentd killed with SIGKILL mid-command stayed in the
    workspace for good (`git status` showed `?? .exrc`). The launch records what it creates; the next
    launch removes a dead process's leftovers that are still empty and of the recorded kind, and keeps
    one that something filled since."""
    ws = tmp_path / "ws"
    make(ws, "src/a.py")
    script = (
        "import os, sys; from pathlib import Path; from agentd.sandbox.guard import Guard;"
        "from agentd.sandbox.policy import build_policy; from agentd.permissions.protected import ProtectedPaths;"
        "t = Path(sys.argv[1]); Guard(build_policy([t / 'ws'], ProtectedPaths.of(t / 'home', t / 'cfg', t / 'data')));"
        "os.kill(os.getpid(), 9)"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=False, timeout=120)
    assert done.returncode == -9
    left = sorted(os.listdir(ws))
    assert (
        ".vscode" in left and ".exrc" in left and len(list((tmp_path / "data" / "standins").iterdir())) == 1
    )
    (ws / ".idea" / "workspace.xml").write_text("<x/>")  # filled since: kept
    p = ProtectedPaths.of(tmp_path / "home", tmp_path / "cfg", tmp_path / "data")
    Guard(build_policy([ws], p)).finish()
    assert sorted(os.listdir(ws)) == [".idea", "src"]
    assert list((tmp_path / "data" / "standins").iterdir()) == []


def test_stand_ins_left_by_a_kill_9_go_when_a_session_opens_and_records_are_private(tmp_path: Path) -> None:
    """break16 F7: `<data dir>/standins/<pid>.json` was 0644 (agentd's files are 0600), and the stand-ins a
    `kill -9` left stayed in the workspace through a resume that ran no command. The record is 0600 and
    building a session (create or open: agentd.core.factory) sweeps a dead process's leftovers."""
    from agentd.sandbox.standins import sweep_left

    ws = tmp_path / "ws"
    make(ws, "src/a.py")
    script = (
        "import os, sys, stat; from pathlib import Path; from agentd.sandbox.guard import Guard;"
        "from agentd.sandbox.policy import build_policy; from agentd.permissions.protected import ProtectedPaths;"
        "t = Path(sys.argv[1]); Guard(build_policy([t / 'ws'], ProtectedPaths.of(t / 'home', t / 'cfg', t / 'data')));"
        "[print(oct(stat.S_IMODE(r.stat().st_mode))) for r in (t / 'data' / 'standins').iterdir()];"
        "sys.stdout.flush(); os.kill(os.getpid(), 9)"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=False, timeout=120,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == -9 and done.stdout.split() == ["0o600"], done
    assert ".vscode" in os.listdir(ws)
    from agentd.core.factory import create_session
    from tests.integration.test_off_loop_sessions import _kwargs

    create_session(cwd=ws, **_kwargs(ws, tmp_path / "data")).close()  # no command runs
    assert sorted(os.listdir(ws)) == ["src"]
    assert sweep_left(tmp_path / "data") == 0
