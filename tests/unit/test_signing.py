"""Grants and mode changes are honoured only if agentd wrote them (issue 12 §3): the per-user key, the
signature, the order."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentd.permissions.signing import KEY_BYTES, GrantKey, GrantKeyError, RecordSigner


def test_the_key_is_made_once_private_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "grant.key"
    key = GrantKey.load_or_create(path)
    assert (len(key), GrantKey.load_or_create(path)) == (KEY_BYTES, key)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    os.chmod(path, 0o644)
    with pytest.raises(GrantKeyError, match="readable by other users; delete"):
        GrantKey.load_or_create(path)
    path.unlink()
    os.symlink("/etc/passwd", path)
    with pytest.raises(GrantKeyError, match="cannot open the grant key"):
        GrantKey.load_or_create(path)


def test_signed_records_are_accepted_in_order_only() -> None:
    writer = RecordSigner(b"k" * 32, "sess_a")
    first = writer.sign("grant", {"tool": "run_command(npm test)", "grant": "allow_always"})
    second = writer.sign("mode", {"mode": "auto"})
    reader = RecordSigner(b"k" * 32, "sess_a")
    log = [{"v": 1, "seq": 9, "kind": "grant", **first}, {"v": 1, "seq": 10, "kind": "mode", **second}]
    assert [reader.accept(r["kind"], r) for r in log] == [True, True]
    copied = RecordSigner(b"k" * 32, "sess_a")
    assert [copied.accept("grant", first), copied.accept("grant", first)] == [True, False]  # a replayed copy


def test_forged_and_foreign_records_are_refused() -> None:
    good = RecordSigner(b"k" * 32, "sess_a").sign("grant", {"tool": "run_command", "grant": "allow_always"})
    forged = {**good, "tool": "run_command(rm *)"}
    unsigned = {"tool": "run_command", "grant": "allow_always"}
    assert RecordSigner(b"k" * 32, "sess_a").accept("grant", forged) is False
    assert RecordSigner(b"k" * 32, "sess_a").accept("grant", unsigned) is False
    assert RecordSigner(b"k" * 32, "sess_b").accept("grant", good) is False  # another session's grant
    assert RecordSigner(b"x" * 32, "sess_a").accept("grant", good) is False  # another user's key
    assert RecordSigner(b"k" * 32, "sess_a").accept("mode", good) is False  # another kind
