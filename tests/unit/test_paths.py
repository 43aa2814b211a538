"""Workspace containment (CONTRACTS.md §11 "Path refused"; TESTING.md §4.5 "Path escapes").

Real temporary file systems with real symlinks: a `ws/` and a sibling `outside/` holding `secret.txt`.
Every refusal is compared with the exact text, and `outside/` must be unchanged afterwards.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentd import failpoints
from agentd.tools import paths
from agentd.tools.base import PathRefused
from agentd.tools.paths import (
    atomic_write,
    containing_root,
    display_path,
    open_dir,
    open_for_read,
    resolve_in_workspace,
)


@dataclass
class Layout:
    ws: Path
    outside: Path


def refused(raw: str, root: Path) -> str:
    return (
        f"Refused: {raw} is outside the workspace ({root}) or reached through a symbolic link;"
        " the call was not run."
    )


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Names, modes and sha256 of everything under `root` (links by their target)."""
    out: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = "link:" + os.readlink(p)
            else:
                digest = "dir"
            out[str(p.relative_to(root))] = (stat.S_IMODE(st.st_mode), digest)
    return out


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (ws / "a.txt").write_text("alpha\n")
    (ws / "a").mkdir()
    (ws / "sub").mkdir()
    (ws / "sub" / "b.txt").write_text("beta\n")
    os.symlink(outside, ws / "link")
    os.symlink(outside, ws / "outbox")
    os.symlink("/etc", ws / "etc-link")
    os.symlink(outside / "secret.txt", ws / "f")
    os.symlink(outside / "new.txt", ws / "notes.md")
    os.symlink(ws / "a.txt", ws / "alias.txt")
    os.symlink("d2", ws / "d1")
    os.symlink("../outside", ws / "d2")
    os.symlink("..", ws / "up")
    os.symlink("loop", ws / "loop")
    os.symlink("sub", ws / "sublink")
    return Layout(ws, outside)


def _read(raw: str, roots: list[Path]) -> Any:
    with open_for_read(raw, roots) as f:
        return f.read()


def _write(raw: str, roots: list[Path]) -> Any:
    return atomic_write(raw, b"pwned\n", roots)


def _list(raw: str, roots: list[Path]) -> Any:
    os.close(open_dir(raw, roots))


OPS: dict[str, Callable[[str, list[Path]], Any]] = {"read": _read, "write": _write, "list": _list}

# (case id, operation, raw path given the layout)
ESCAPES: list[tuple[str, str, Callable[[Layout], str]]] = [
    ("dotdot-read", "read", lambda L: "../outside/secret.txt"),
    ("dotdot-write", "write", lambda L: "../outside/new.txt"),
    ("dotdot-nested-write", "write", lambda L: "a/../../outside/x"),
    ("dotdot-missing-dir-read", "read", lambda L: "nope/../../outside/secret.txt"),
    ("dotdot-list", "list", lambda L: ".."),
    ("dotdot-slash-list", "list", lambda L: "../"),
    ("abs-etc-passwd", "read", lambda L: "/etc/passwd"),
    ("abs-outside-read", "read", lambda L: str(L.outside / "secret.txt")),
    ("abs-outside-write", "write", lambda L: str(L.outside / "new.txt")),
    ("abs-root-list", "list", lambda L: "/"),
    ("proc-self-root-secret", "read", lambda L: "/proc/self/root" + str(L.outside / "secret.txt")),
    ("proc-self-root-inside", "read", lambda L: "/proc/self/root" + str(L.ws / "a.txt")),
    ("proc-self-root-write", "write", lambda L: "/proc/self/root" + str(L.ws / "new.txt")),
    ("proc-self-cwd", "read", lambda L: "/proc/self/cwd/pyproject.toml"),
    ("dev-fd", "read", lambda L: "/dev/fd/0"),
    ("etc-link-read", "read", lambda L: "etc-link/passwd"),
    ("middle-link-read", "read", lambda L: "link/secret.txt"),
    ("middle-link-write", "write", lambda L: "link/new.txt"),
    ("middle-link-list", "list", lambda L: "link"),
    ("outbox-write", "write", lambda L: "outbox/x"),
    ("outbox-deep-write", "write", lambda L: "outbox/deeper/x"),
    ("final-link-read", "read", lambda L: "f"),
    ("final-link-write", "write", lambda L: "f"),
    ("dangling-link-write", "write", lambda L: "notes.md"),
    ("dangling-link-trailing-slash", "write", lambda L: "notes.md/"),
    ("inside-final-link-write", "write", lambda L: "alias.txt"),
    ("link-chain-read", "read", lambda L: "d1/secret.txt"),
    ("relative-up-link-read", "read", lambda L: "up/outside/secret.txt"),
    ("link-then-dotdot-read", "read", lambda L: "link/../outside/secret.txt"),
    ("symlink-loop-read", "read", lambda L: "loop"),
    ("symlink-loop-write", "write", lambda L: "loop/x"),
    ("nul-read", "read", lambda L: "a\x00b"),
    ("nul-write", "write", lambda L: "a.txt\x00.png"),
    ("nul-list", "list", lambda L: "\x00"),
    ("long-path-read", "read", lambda L: "/".join(["d" * 200] * 21)),
    ("long-component-write", "write", lambda L: "x" * 256),
    ("long-component-list", "list", lambda L: "sub/" + "y" * 300),
    ("lone-surrogate-write", "write", lambda L: "bad\ud800name"),
]


@pytest.mark.parametrize(("op", "make_raw"), [(op, f) for _, op, f in ESCAPES], ids=[c[0] for c in ESCAPES])
def test_escape_is_refused_with_the_exact_text(
    layout: Layout, op: str, make_raw: Callable[[Layout], str]
) -> None:
    raw = make_raw(layout)
    before_outside, before_etc = snapshot(layout.outside), os.listdir("/etc")
    with pytest.raises(PathRefused) as err:
        OPS[op](raw, [layout.ws])
    assert err.value.text() == refused(raw, layout.ws)
    assert snapshot(layout.outside) == before_outside
    assert os.listdir("/etc") == before_etc


def test_dangling_target_never_appears(layout: Layout) -> None:
    with pytest.raises(PathRefused):
        atomic_write("notes.md", b"x", [layout.ws])
    assert os.path.lexists(layout.outside / "new.txt") is False
    assert os.readlink(layout.ws / "notes.md") == str(layout.outside / "new.txt")


def test_refusals_happen_at_check_time_without_system_errors(layout: Layout) -> None:
    for raw in ("a\x00b", "x" * 5000, "y" * 256, "\udcff\ud800"):
        with pytest.raises(PathRefused) as err:
            resolve_in_workspace(raw, [layout.ws], for_write=False)
        assert err.value.text() == refused(raw, layout.ws)
    with pytest.raises(PathRefused) as long_err:
        resolve_in_workspace("z" * 300, [layout.ws], for_write=True)
    assert long_err.value.why == "ENAMETOOLONG"


ALLOWED = [
    ("relative", "read", "a.txt", b"alpha\n"),
    ("absolute-inside", "read", "{ws}/a.txt", b"alpha\n"),
    ("dotdot-staying-inside", "read", "sub/../a.txt", b"alpha\n"),
    ("dotdot-out-and-back", "read", "../ws/a.txt", b"alpha\n"),
    ("inside-final-link-read", "read", "alias.txt", b"alpha\n"),
    ("inside-middle-link-read", "read", "sublink/b.txt", b"beta\n"),
    ("dot-slash", "read", "./sub/./b.txt", b"beta\n"),
]


@pytest.mark.parametrize(("raw", "expected"), [(r, e) for _, _, r, e in ALLOWED], ids=[a[0] for a in ALLOWED])
def test_paths_inside_are_allowed(layout: Layout, raw: str, expected: bytes) -> None:
    assert _read(raw.format(ws=layout.ws), [layout.ws]) == expected


def test_write_through_inside_middle_link_lands_in_the_real_dir(layout: Layout) -> None:
    written = atomic_write("sublink/new.txt", b"n\n", [layout.ws])
    assert (written, (layout.ws / "sub" / "new.txt").read_bytes()) == (layout.ws / "sub" / "new.txt", b"n\n")


def test_symlinked_root_works_normally(layout: Layout, tmp_path: Path) -> None:
    alias = tmp_path / "ws-alias"
    os.symlink(layout.ws, alias)
    roots = [alias]
    assert _read("a.txt", roots) == b"alpha\n"
    assert _read(str(alias / "a.txt"), roots) == b"alpha\n"
    assert _read(str(layout.ws / "a.txt"), roots) == b"alpha\n"
    assert atomic_write("new/c.txt", b"c\n", roots) == layout.ws / "new" / "c.txt"
    assert (layout.ws / "new" / "c.txt").read_bytes() == b"c\n"
    with pytest.raises(PathRefused) as err:
        _read("../outside/secret.txt", roots)
    assert err.value.text() == refused("../outside/secret.txt", alias)
    assert resolve_in_workspace(".", roots, for_write=False) == layout.ws


def test_second_root_is_allowed(layout: Layout, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("o\n")
    assert _read(str(other / "o.txt"), [layout.ws, other]) == b"o\n"
    assert containing_root(other / "o.txt", [layout.ws, other]) == str(other)
    assert display_path(other / "o.txt", [layout.ws, other]) == str(other / "o.txt")
    assert display_path(layout.ws / "sub" / "b.txt", [layout.ws]) == "sub/b.txt"


def _swap_dir_for_link(layout: Layout, name: str) -> Callable[[str], None]:
    def hit(point: str) -> None:
        if point == "paths.after_check" and not os.path.islink(layout.ws / name):
            os.rename(layout.ws / name, layout.ws / f"{name}-moved")
            os.symlink(layout.outside, layout.ws / name)

    return hit


@pytest.mark.parametrize(
    ("op", "raw"),
    [("write", "sub/new.txt"), ("read", "sub/b.txt"), ("list", "sub")],
    ids=["write", "read", "list"],
)
def test_toctou_dir_swapped_for_symlink_is_refused(
    layout: Layout, monkeypatch: pytest.MonkeyPatch, op: str, raw: str
) -> None:
    (layout.outside / "b.txt").write_text("stolen\n")
    monkeypatch.setattr(failpoints, "hit", _swap_dir_for_link(layout, "sub"))
    before = snapshot(layout.outside)
    with pytest.raises(PathRefused) as err:
        OPS[op](raw, [layout.ws])
    assert err.value.text() == refused(raw, layout.ws)
    assert snapshot(layout.outside) == before


def test_toctou_after_the_recheck_is_caught_by_o_nofollow(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A swap after the second containment check still fails: the chain is opened with O_NOFOLLOW."""
    real_resolve = paths.resolve_in_workspace
    calls: list[str] = []

    def resolve_then_swap(raw: str, roots: Any, *, for_write: bool) -> Path:
        result = real_resolve(raw, roots, for_write=for_write)
        calls.append(raw)
        if len(calls) == 2:
            os.rename(layout.ws / "sub", layout.ws / "sub-moved")
            os.symlink(layout.outside, layout.ws / "sub")
        return result

    monkeypatch.setattr(paths, "resolve_in_workspace", resolve_then_swap)
    before = snapshot(layout.outside)
    with pytest.raises(PathRefused) as err:
        atomic_write("sub/new.txt", b"x", [layout.ws])
    assert (err.value.text(), calls) == (refused("sub/new.txt", layout.ws), ["sub/new.txt", "sub/new.txt"])
    assert snapshot(layout.outside) == before


def test_toctou_final_target_swapped_for_link(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    def hit(point: str) -> None:
        os.unlink(layout.ws / "a.txt")
        os.symlink(layout.outside / "secret.txt", layout.ws / "a.txt")

    monkeypatch.setattr(failpoints, "hit", hit)
    with pytest.raises(PathRefused) as err:
        atomic_write("a.txt", b"x", [layout.ws])
    assert err.value.text() == refused("a.txt", layout.ws)
    assert (layout.outside / "secret.txt").read_text() == "secret\n"


def test_failpoint_is_wired(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_FAILPOINTS", "paths.after_check=raise")
    with pytest.raises(failpoints.FailpointError):
        _read("a.txt", [layout.ws])
    with pytest.raises(failpoints.FailpointError):
        atomic_write("a.txt", b"x", [layout.ws])
    assert (layout.ws / "a.txt").read_text() == "alpha\n"


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("umask022")
def test_atomic_write_keeps_mode_and_leaves_no_temp(layout: Layout) -> None:
    script = layout.ws / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    private = layout.ws / "private.txt"
    private.write_text("p\n")
    private.chmod(0o600)
    atomic_write("run.sh", b"#!/bin/sh\necho hi\n", [layout.ws])
    atomic_write("private.txt", b"q\n", [layout.ws])
    atomic_write("deep/er/new.txt", b"n\n", [layout.ws])
    modes = {
        p: stat.S_IMODE((layout.ws / p).stat().st_mode) for p in ("run.sh", "private.txt", "deep/er/new.txt")
    }
    assert modes == {"run.sh": 0o755, "private.txt": 0o600, "deep/er/new.txt": 0o644}
    assert script.read_text() == "#!/bin/sh\necho hi\n"
    leftovers = [n for _, _, files in os.walk(layout.ws) for n in files if n.endswith(".tmp")]
    assert leftovers == []


def test_atomic_write_to_a_directory_is_an_os_error(layout: Layout) -> None:
    with pytest.raises(IsADirectoryError):
        atomic_write("sub", b"x", [layout.ws])
    with pytest.raises(IsADirectoryError):
        atomic_write(".", b"x", [layout.ws])
    assert sorted(os.listdir(layout.ws / "sub")) == ["b.txt"]


def test_open_for_read_refuses_non_regular_files(layout: Layout) -> None:
    os.mkfifo(layout.ws / "pipe")
    with pytest.raises(OSError) as err:
        _read("pipe", [layout.ws])
    with pytest.raises(IsADirectoryError):
        _read("sub", [layout.ws])
    with pytest.raises(FileNotFoundError):
        _read("missing.txt", [layout.ws])
    assert err.value.strerror == "Not a regular file"


COMPONENTS = ["..", ".", "a", "sub", "link", "d1", "up", "alias.txt", "f", "new", ""]


@given(parts=st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=6), for_write=st.booleans())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_resolved_paths_stay_inside(layout: Layout, parts: list[str], for_write: bool) -> None:
    """Any mix of `..`, links and names either is refused with the exact text or resolves inside."""
    raw = "/".join(parts)
    try:
        real = resolve_in_workspace(raw, [layout.ws], for_write=for_write)
    except PathRefused as exc:
        assert exc.text() == refused(raw, layout.ws)
    else:
        assert str(real) == os.path.realpath(layout.ws / raw)
        assert containing_root(real, [layout.ws]) == str(layout.ws)
