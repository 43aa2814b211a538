"""The checkpoint store, walk and restore (agentd.checkpoints; issue 13): a snapshot and back, byte for byte
and mode for mode, with what is not covered left alone; the walk reads only what changed."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from agentd.checkpoints import restore
from agentd.checkpoints.objects import ObjectStore, Ref, StoreError
from agentd.checkpoints.scan import scan_root
from agentd.checkpoints.tree import DirNode, diff, load, lookup, skipped_paths
from agentd.checkpoints.watch import Watcher

CAP = 4096


def snap(
    ws: Path, store: ObjectStore, old: DirNode | None, watcher: Watcher | None = None, settled: bool = True
) -> tuple[DirNode, int]:
    """One walk; `settled`: as if the files were written seconds before it (not racy)."""
    w = store.writer()
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    start = time.time_ns() + (5_000_000_000 if settled else 0)
    try:
        node, stats = scan_root(fd, old, w, CAP, watcher=watcher, start_ns=start)
    finally:
        os.close(fd)
    w.commit()
    return node, stats.read


def state(ws: Path) -> dict[str, tuple[object, ...]]:
    """Every path under ws but .git: type, permission bits, bytes or link target."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirs, files in os.walk(ws):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, ws)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("f", stat.S_IMODE(st.st_mode), Path(p).read_bytes())
            else:
                out[rel] = ("special",)
    return out


def rewind(
    ws: Path, store: ObjectStore, current: DirNode, target: DirNode, keep: set[str] = frozenset()
) -> restore.Plan:  # type: ignore[assignment]
    p = restore.plan(str(ws), current, target, set(keep))
    restore.apply(p, lambda: os.open(ws, os.O_RDONLY | os.O_DIRECTORY), store, lambda *_: None)
    return p


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("x = 1\n")
    (root / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "run.sh", 0o755)
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "out.o").write_text("object")
    (root / "x.log").write_text("log")
    (root / "tree" / "sub").mkdir(parents=True)
    (root / "tree" / "t1").write_text("t1")
    (root / "tree" / "sub" / "t2").write_text("t2")
    (root / "empty").mkdir()
    os.symlink("a.txt", root / "link")
    os.mkfifo(root / "fifo")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "big.bin").write_bytes(b"x" * (CAP + 1))
    return root


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return ObjectStore(tmp_path / "data" / "checkpoints")


def test_snapshot_lists_what_is_not_covered(ws: Path, store: ObjectStore) -> None:
    node, _ = snap(ws, store, None)
    assert dict(skipped_paths(node)) == {
        ".git": "git", "big.bin": "too_large", "build": "ignored", "fifo": "special", "x.log": "ignored",
    }  # fmt: skip
    assert node.files == 8  # a.txt, src/m.py, bin.dat, run.sh, .gitignore, tree/t1, tree/sub/t2, link
    assert lookup(node, "tree/sub/t2") is not None and lookup(node, "build/out.o") is None


def test_rewind_restores_bytes_modes_created_deleted_and_types(ws: Path, store: ObjectStore) -> None:
    before = state(ws)
    then, _ = snap(ws, store, None)
    (ws / "a.txt").write_text("changed\n")
    os.chmod(ws / "run.sh", 0o600)
    (ws / "new.txt").write_text("created")
    shutil.rmtree(ws / "tree")
    (ws / "bin.dat").write_bytes(b"\x00\xff" * 700)
    os.unlink(ws / "link")
    os.symlink("src", ws / "link")
    (ws / "src" / "m.py").unlink()
    (ws / "src" / "m.py").mkdir()
    (ws / "src" / "m.py" / "inner").write_text("i")
    os.rmdir(ws / "empty")
    (ws / "build" / "out2.o").write_text("ignored, never touched")
    now, _ = snap(ws, store, then)
    rewind(ws, store, now, load(store, then.ref))
    after = state(ws)
    assert after.pop("build/out2.o") == ("f", 0o644, b"ignored, never touched")
    assert after == before


def test_a_kept_path_is_left_alone_and_reported(ws: Path, store: ObjectStore) -> None:
    then, _ = snap(ws, store, None)
    (ws / "a.txt").write_text("the user's edit\n")
    (ws / "tree" / "t1").write_text("agent")
    (ws / "tree" / "mine").write_text("user's new file")
    now, _ = snap(ws, store, then)
    plan = rewind(ws, store, now, then, {"a.txt", "tree/mine"})
    assert (ws / "a.txt").read_text() == "the user's edit\n"
    assert (ws / "tree" / "mine").exists() and (ws / "tree" / "t1").read_text() == "t1"
    assert ("a.txt", "changed_by_user") in plan.kept and ("tree/mine", "changed_by_user") in plan.kept


def test_a_file_not_covered_then_but_covered_now_is_reported(ws: Path, store: ObjectStore) -> None:
    """issue 13 (break13): a file over the size cap at the checkpoint that the agent then shrank under it was
    left as the agent made it (right: its old bytes were never stored) but the rewind did not say so, so the
    user believed it restored. It is now kept and listed as `not_covered`."""
    then, _ = snap(ws, store, None)
    (ws / "big.bin").write_bytes(b"tiny")
    now, _ = snap(ws, store, then)
    plan = rewind(ws, store, now, then)
    assert (ws / "big.bin").read_bytes() == b"tiny"
    assert ("big.bin", "not_covered") in plan.kept


def test_a_removed_folder_holding_uncovered_files_stays(ws: Path, store: ObjectStore) -> None:
    then, _ = snap(ws, store, None)
    (ws / "gen").mkdir()
    (ws / "gen" / "code.py").write_text("generated")
    (ws / "gen" / "trace.log").write_text("ignored")
    now, _ = snap(ws, store, then)
    plan = rewind(ws, store, now, then)
    assert not (ws / "gen" / "code.py").exists() and (ws / "gen" / "trace.log").exists()
    assert ("gen", "holds_files_not_covered") in plan.kept


def test_the_plan_runs_again_after_a_partial_run(ws: Path, store: ObjectStore) -> None:
    """A crash between two operations: running the whole plan again finishes it (idempotent steps)."""
    before = state(ws)
    then, _ = snap(ws, store, None)
    shutil.rmtree(ws / "tree")
    (ws / "tree").write_text("a file where a folder was")
    (ws / "a.txt").unlink()
    now, _ = snap(ws, store, then)
    p = restore.plan(str(ws), now, then, set())
    half = restore.Plan(p.root, p.ops[: len(p.ops) // 2])
    opener = lambda: os.open(ws, os.O_RDONLY | os.O_DIRECTORY)  # noqa: E731
    restore.apply(half, opener, store, lambda *_: None)
    again = restore.plans_from_json(restore.plans_to_json([p]))[0]
    restore.apply(again, opener, store, lambda *_: None)
    assert state(ws) == before


def test_a_link_in_the_tree_never_leads_a_restore_outside(
    ws: Path, store: ObjectStore, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    then, _ = snap(ws, store, None)
    shutil.rmtree(ws / "tree")
    os.symlink(outside, ws / "tree")
    now, _ = snap(ws, store, then)
    rewind(ws, store, now, then)
    assert list(outside.iterdir()) == []
    assert (ws / "tree" / "sub" / "t2").read_text() == "t2" and not (ws / "tree").is_symlink()


def test_unchanged_files_are_not_read_again(ws: Path, store: ObjectStore) -> None:
    first, read = snap(ws, store, None)
    assert read == 7  # every file but the link
    second, read = snap(ws, store, first)
    assert second is first and read == 0  # the same snapshot object: nothing changed
    os.utime(ws / "a.txt", ns=(1, 1))  # a new stat, the same bytes: read, not stored again
    third, read = snap(ws, store, second)
    assert read == 1 and list(diff(second, third)) == []


def test_a_change_with_the_same_size_and_time_is_found(ws: Path, store: ObjectStore) -> None:
    """The racy rule: a file written within the timestamp granularity of the walk is read again next time."""
    first, _ = snap(ws, store, None, settled=False)
    st = os.stat(ws / "a.txt")
    (ws / "a.txt").write_text("HELLO\n")  # same size
    os.utime(ws / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    second, _ = snap(ws, store, first, settled=False)
    assert [c.path for c in diff(first, second)] == ["a.txt"]


def test_the_watcher_reports_only_what_changed(ws: Path, store: ObjectStore) -> None:
    watcher = Watcher()
    if watcher.broken:
        pytest.skip("inotify is not available here")
    try:
        first, _ = snap(ws, store, None, watcher)
        watcher.primed = True
        second, read = snap(ws, store, first, watcher)
        assert second is first and read == 0
        (ws / "tree" / "sub" / "t2").write_text("changed in place")
        os.chmod(ws / "run.sh", 0o700)
        (ws / "tree" / "sub" / "deeper").mkdir()
        (ws / "tree" / "sub" / "deeper" / "n").write_text("n")
        third, read = snap(ws, store, second, watcher)
        paths = {(c.path, c.what) for c in diff(second, third)}
        assert paths == {("tree/sub/t2", "modified"), ("run.sh", "modified"), ("tree/sub/deeper", "added"),
                         ("tree/sub/deeper/n", "added")}  # fmt: skip
        stat_walk, _ = snap(ws, store, third)  # a full stat walk agrees
        assert list(diff(third, stat_walk)) == []
    finally:
        watcher.close()


def test_a_damaged_object_is_refused(ws: Path, store: ObjectStore) -> None:
    node, _ = snap(ws, store, None)
    ref = node.ref
    assert ref is not None
    pack = store.packs / f"{ref.pack}.pack"
    data = bytearray(pack.read_bytes())
    data[ref.off + 1] ^= 0xFF
    pack.write_bytes(bytes(data))
    fresh = ObjectStore(store.root)
    with pytest.raises(StoreError):
        load(fresh, Ref(*ref))


def test_a_fork_store_shares_the_packs(ws: Path, store: ObjectStore, tmp_path: Path) -> None:
    node, _ = snap(ws, store, None)
    other = ObjectStore(tmp_path / "fork" / "checkpoints")
    assert store.link_into(other) == 1
    assert node.ref is not None and load(other, node.ref).files == node.files
