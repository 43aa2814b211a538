"""The checkpoint object store: content-addressed objects in append-once pack files (issue 13).

Owns: `Ref` (where one object lives: its sha256, pack, offset and stored length), `PackWriter` (the objects
one checkpoint adds, written to `packs/<ulid>.pack.tmp`, fsynced, then renamed: a pack is complete or
absent) and `ObjectStore` (`sessions/<id>/checkpoints/`: reading an object back and checking its sha256,
the store's size, linking its packs into a fork's store, removing temp files a crash left).

An object is one byte of encoding (0 raw, 1 zlib) and the bytes; its identity is the sha256 of the raw
bytes. A checkpoint writes one pack with only the objects it did not have (a file whose stat is unchanged
keeps its old ref), so its cost follows what changed, not the size of the tree. Packs are never changed
after the rename; a fork hard-links them (a copy where links fail). Folders 0700, files 0600.
Imports the standard library, `agentd.persistence.paths` and `agentd.failpoints` only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import IO, NamedTuple

from ulid import ULID

from agentd import failpoints
from agentd.persistence.paths import ensure_dir, fsync_dir, open_private

PACKS = "packs"
RAW, ZLIB = 0, 1
COMPRESS_MIN_BYTES = 64  # smaller objects are stored raw
MAX_OPEN_PACKS = 32


class StoreError(Exception):
    """An object is missing or damaged; the message names it and the pack."""


class Ref(NamedTuple):
    """Where an object is: `sha` (sha256 hex of its raw bytes), `pack` (file stem), `off` and `size` (bytes
    in the pack, the encoding byte included). Stored as a 4-item JSON list."""

    sha: str
    pack: str
    off: int
    size: int

    @classmethod
    def of(cls, value: object) -> Ref:
        """A Ref from its JSON list. Raises StoreError when it is not one."""
        if (
            isinstance(value, (list, tuple))
            and len(value) == 4
            and isinstance(value[0], str)
            and isinstance(value[1], str)
            and isinstance(value[2], int)
            and isinstance(value[3], int)
        ):
            return cls(value[0], value[1], value[2], value[3])
        raise StoreError(f"not an object reference: {value!r}")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class PackWriter:
    """The objects of one checkpoint. `put` returns a Ref at once; nothing is visible until `commit`."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.name = str(ULID()).lower()
        self._tmp = store.packs / f"{self.name}.pack.tmp"
        self._file: IO[bytes] | None = None
        self._off = 0
        self._written: dict[str, Ref] = {}  # sha -> ref: one copy per pack
        self.objects = 0
        self.bytes = 0  # raw bytes of the objects written

    def put(self, data: bytes, sha: str | None = None) -> Ref:
        """Add `data` (once per pack) and return its Ref. Raises OSError (disk full, ...)."""
        sha = sha or sha256(data)
        known = self._written.get(sha)
        if known is not None:
            return known
        body, kind = data, RAW
        if len(data) >= COMPRESS_MIN_BYTES:
            packed = zlib.compress(data, 1)
            if len(packed) < len(data):
                body, kind = packed, ZLIB
        f = self._open()
        f.write(bytes((kind,)))
        f.write(body)
        ref = Ref(sha, self.name, self._off, 1 + len(body))
        self._off += ref.size
        self._written[sha] = ref
        self.objects += 1
        self.bytes += len(data)
        return ref

    def _open(self) -> IO[bytes]:
        if self._file is None:
            ensure_dir(self.store.packs)
            fd = open_private(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            self._file = os.fdopen(fd, "wb", buffering=1 << 20)
        return self._file

    def commit(self) -> None:
        """Make the pack durable and visible (fsync, rename, folder fsync); a no-op when nothing was put.
        Raises OSError; the temp file is then removed."""
        f, self._file = self._file, None
        if f is None:
            return
        try:
            with f:
                f.flush()
                failpoints.hit("checkpoint.pack_written")
                os.fsync(f.fileno())
            os.replace(self._tmp, self.store.packs / f"{self.name}.pack")
            fsync_dir(self.store.packs)
        except BaseException:
            self._tmp.unlink(missing_ok=True)
            raise

    def abort(self) -> None:
        """Drop what was put (an error before `commit`)."""
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()
        self._tmp.unlink(missing_ok=True)


class ObjectStore:
    """One session's checkpoint store at `root` (`sessions/<id>/checkpoints`). Not thread-safe."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.packs = self.root / PACKS
        self._fds: OrderedDict[str, int] = OrderedDict()

    def writer(self) -> PackWriter:
        return PackWriter(self)

    def read(self, ref: Ref) -> bytes:
        """The raw bytes of `ref`, checked against its sha256. Raises StoreError."""
        try:
            fd = self._fd(ref.pack)
            stored = os.pread(fd, ref.size, ref.off)
        except OSError as exc:
            raise StoreError(f"checkpoint pack {ref.pack} cannot be read ({exc.strerror or exc})") from None
        if len(stored) != ref.size or not stored:
            raise StoreError(f"checkpoint pack {ref.pack} is shorter than expected (object {ref.sha[:12]})")
        try:
            data = zlib.decompress(stored[1:]) if stored[0] == ZLIB else stored[1:]
        except zlib.error:
            data = b""
        if sha256(data) != ref.sha:
            raise StoreError(f"checkpoint object {ref.sha[:12]} in pack {ref.pack} is damaged")
        return data

    def _fd(self, pack: str) -> int:
        fd = self._fds.get(pack)
        if fd is not None:
            self._fds.move_to_end(pack)
            return fd
        if "/" in pack or pack.startswith("."):
            raise OSError(0, f"invalid pack name {pack!r}")
        fd = os.open(self.packs / f"{pack}.pack", os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        self._fds[pack] = fd
        while len(self._fds) > MAX_OPEN_PACKS:
            _, old = self._fds.popitem(last=False)
            os.close(old)
        return fd

    def size_bytes(self) -> int:
        """Bytes of the packs on disk."""
        try:
            return sum(p.stat().st_size for p in self.packs.glob("*.pack"))
        except OSError:
            return 0

    def remove_temp_files(self) -> None:
        """Remove the `*.tmp` packs a crash left behind (only the session's holder calls this)."""
        for tmp in self.packs.glob("*.tmp") if self.packs.is_dir() else ():
            with contextlib.suppress(OSError):
                tmp.unlink()

    def link_into(self, other: ObjectStore) -> int:
        """Give `other` (a fork's store) every pack of this one: hard links, a copy where a link fails.
        Returns the number of packs. Raises OSError."""
        if not self.packs.is_dir():
            return 0
        ensure_dir(other.packs)
        n = 0
        for pack in sorted(self.packs.glob("*.pack")):
            target = other.packs / pack.name
            if not target.exists():
                try:
                    os.link(pack, target)
                except OSError:
                    shutil.copyfile(pack, target)
                    os.chmod(target, 0o600)
            n += 1
        fsync_dir(other.packs)
        return n

    def close(self) -> None:
        while self._fds:
            _, fd = self._fds.popitem()
            with contextlib.suppress(OSError):
                os.close(fd)
