"""A folder's snapshot in a checkpoint (issue 13): entries, what is not covered, encoding, comparing.

Owns: `DirNode` (one folder: its stat key, the stat key of its `.gitignore`, its entries by name, the names
not covered with the reason, and the Ref of its encoded form), the entry tuples, `encode` / `load` (the
tree object: compact JSON, names sorted, so the same snapshot always yields the same object) and `diff`
(what differs between two snapshots, skipping subtrees with the same object).

Entries (tuples: light enough for a 100,000-file tree kept between checkpoints):
- file `("f", mode, size, mtime_ns, ctime_ns, ino, ref, racy)`; link `("l", mode, size, mtime_ns,
  ctime_ns, ino, target, racy)`; folder `("d", node)`.
- `racy`: the file changed so close to the walk that a later change could keep the same stat (git's "racily
  clean"); the next walk reads it again instead of trusting the stat.
Names are `os.fsdecode`d (undecodable bytes as surrogates; JSON keeps them as escapes).
Reasons a name is not covered (`SKIP_REASONS`): `ignored` (.gitignore), `git` (the `.git` folder),
`too_large` (over `checkpoints.max_file_bytes`), `special` (a FIFO, socket or device), `unreadable`,
`data_dir` (agentd's own data dir inside the root).
Imports the standard library and `agentd.checkpoints.objects` only.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple

from agentd.checkpoints.objects import ObjectStore, Ref, StoreError

Entry = tuple[Any, ...]
Key = tuple[int, int, int, int]  # a folder's (mode, mtime_ns, ctime_ns, ino)
SKIP_REASONS = ("ignored", "git", "too_large", "special", "unreadable", "data_dir")
FIXED_SKIPS = (
    "ignored",
    "git",
    "data_dir",
)  # decided by the name and the ignore rules, not by the entry's state


class DirNode:
    """One folder of a snapshot (see the module docstring)."""

    __slots__ = ("entries", "files", "ignore", "key", "nskip", "racy", "ref", "size", "skipped")

    def __init__(
        self,
        key: Key,
        racy: bool = False,
        ignore: tuple[int, ...] | None = None,
        entries: dict[str, Entry] | None = None,
        skipped: dict[str, str] | None = None,
        ref: Ref | None = None,
    ) -> None:
        self.key = key
        self.racy = racy
        self.ignore = ignore
        self.entries: dict[str, Entry] = entries if entries is not None else {}
        self.skipped: dict[str, str] = skipped if skipped is not None else {}
        self.ref = ref
        self.files = self.size = self.nskip = 0  # in the whole subtree: see tally()

    def tally(self) -> DirNode:
        """Count the files and links, their bytes and the names not covered in this subtree (the children
        are tallied already). Returns self."""
        files = size = nskip = 0
        for e in self.entries.values():
            if e[0] == "d":
                files, size, nskip = files + e[1].files, size + e[1].size, nskip + e[1].nskip
            else:
                files += 1
                size += e[2] if e[0] == "f" else 0
        self.files, self.size, self.nskip = files, size, nskip + len(self.skipped)
        return self

    @property
    def mode(self) -> int:
        return stat.S_IMODE(self.key[0])


def encode(node: DirNode) -> bytes:
    """The tree object of `node`; every child folder must already have its `ref`."""
    rows: list[list[Any]] = []
    for name in sorted(node.entries):
        e = node.entries[name]
        if e[0] == "d":
            assert e[1].ref is not None, "child folders are encoded first"
            rows.append([name, "d", list(e[1].ref)])
        elif e[0] == "f":
            rows.append([name, "f", e[1], e[2], e[3], e[4], e[5], list(e[6]), int(e[7])])
        else:
            rows.append([name, "l", e[1], e[2], e[3], e[4], e[5], e[6], int(e[7])])
    doc = {
        "k": list(node.key),
        "r": int(node.racy),
        "g": list(node.ignore) if node.ignore is not None else None,
        "e": rows,
        "x": sorted([n, why] for n, why in node.skipped.items()),
    }
    return json.dumps(doc, separators=(",", ":")).encode("ascii")


def load(store: ObjectStore, ref: Ref) -> DirNode:
    """The snapshot stored at `ref`, its subfolders loaded too. Raises StoreError."""
    try:
        doc = json.loads(store.read(ref))
        entries: dict[str, Entry] = {}
        for row in doc["e"]:
            name, kind = row[0], row[1]
            if kind == "d":
                entries[name] = ("d", load(store, Ref.of(row[2])))
            elif kind == "f":
                entries[name] = ("f", *row[2:7], Ref.of(row[7]), bool(row[8]))
            else:
                entries[name] = ("l", *row[2:8], bool(row[8]))
        key = tuple(doc["k"])
        ignore = tuple(doc["g"]) if doc["g"] is not None else None
        skipped = {n: why for n, why in doc["x"]}
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise StoreError(f"checkpoint tree {ref.sha[:12]} is damaged ({exc})") from None
    return DirNode(key, bool(doc["r"]), ignore, entries, skipped, ref).tally()  # type: ignore[arg-type]


def same_content(a: Entry, b: Entry) -> bool:
    """Whether two entries hold the same thing: type, permission bits and bytes (or link target); for
    folders, the same object (callers compare folders entry by entry instead)."""
    if a[0] != b[0]:
        return False
    if a[0] == "f":
        return bool(a[6].sha == b[6].sha and stat.S_IMODE(a[1]) == stat.S_IMODE(b[1]))
    if a[0] == "l":
        return bool(a[6] == b[6])
    return bool(a[1].ref == b[1].ref and a[1].ref is not None)


ChangeKind = Literal["added", "modified", "deleted"]


class Change(NamedTuple):
    """One path that differs: `path` relative to the root (`/`-separated), `what`, and `kind` of the entry
    (`f` file, `l` link, `d` folder) on the side that has it (the new side for `modified`)."""

    path: str
    what: ChangeKind
    kind: str


def diff(old: DirNode | None, new: DirNode | None, prefix: str = "") -> Iterator[Change]:
    """What differs from `old` to `new` (either may be None: an absent folder), in path order. A folder that
    appears or goes is listed with everything in it; a folder whose mode changed is `modified`."""
    if old is not None and new is not None and old.ref is not None and old.ref == new.ref:
        return
    olds = old.entries if old is not None else {}
    news = new.entries if new is not None else {}
    for name in sorted(olds.keys() | news.keys()):
        path = f"{prefix}{name}"
        a, b = olds.get(name), news.get(name)
        if a is not None and b is not None and a[0] == b[0] == "d":
            if a[1].mode != b[1].mode:
                yield Change(path, "modified", "d")
            yield from diff(a[1], b[1], path + "/")
        elif a is None:
            assert b is not None
            yield from _whole(b, path, "added")
        elif b is None:
            yield from _whole(a, path, "deleted")
        elif not same_content(a, b):
            if a[0] == "d" or b[0] == "d":
                yield from _whole(a, path, "deleted")
                yield from _whole(b, path, "added")
            else:
                yield Change(path, "modified", b[0])


def _whole(e: Entry, path: str, what: ChangeKind) -> Iterator[Change]:
    yield Change(path, what, e[0])
    if e[0] == "d":
        for name in sorted(e[1].entries):
            yield from _whole(e[1].entries[name], f"{path}/{name}", what)


def skipped_paths(node: DirNode, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(path, reason) of everything not covered, in path order; a folder that is not covered is one path.
    Only folders that hold such a path are visited (`nskip`)."""
    if not node.nskip:
        return
    for name in sorted(node.entries.keys() | node.skipped.keys()):
        if name in node.skipped:
            yield f"{prefix}{name}", node.skipped[name]
        e = node.entries.get(name)
        if e is not None and e[0] == "d" and e[1].nskip:
            yield from skipped_paths(e[1], f"{prefix}{name}/")


def lookup(node: DirNode, path: str) -> Entry | None:
    """The entry at `path` (relative, `/`-separated), or None."""
    parts = path.split("/")
    for part in parts[:-1]:
        e = node.entries.get(part)
        if e is None or e[0] != "d":
            return None
        node = e[1]
    return node.entries.get(parts[-1])
