"""What a sandboxed process may touch (issue 12 §1): one `SandboxPolicy` per session, for every backend.

Owns: `SandboxPolicy` and `build_policy()`. Inside the sandbox the workspace roots (and `sandbox.writable`)
are writable; `.git`, `.agentd` and shell start-up files inside them are read-only; agentd's data dir, the
user config dir and the credential stores (`agentd.permissions.protected`) are not visible; the rest of the
file system is read-only; `/tmp` is private, except the `visible` paths (`sandbox.readable`, and per launch
the program's own installation: `agentd.sandbox.visible`), shown read-only; the network is off unless
`network` is true.
Imports only the standard library and `agentd.permissions.protected`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentd.permissions.protected import ProtectedPaths


@dataclass(frozen=True)
class SandboxPolicy:
    """Real, existing paths. `writable`: folders bound read-write; `readonly`: paths inside them bound
    read-only again; `hidden`: folders replaced by an empty folder; `hidden_files`: files replaced by an
    empty file; `network`: whether the process shares agentd's network; `visible`: paths shown read-only
    even under a private folder (`/tmp`, `/run`), below the writable and hidden ones."""

    writable: tuple[Path, ...]
    readonly: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    hidden_files: tuple[Path, ...] = ()
    network: bool = False
    visible: tuple[Path, ...] = ()

    def with_network(self, network: bool) -> SandboxPolicy:
        return dataclasses.replace(self, network=network)

    def with_visible(self, paths: Iterable[Path]) -> SandboxPolicy:
        """This policy with `paths` (real, existing) shown read-only too."""
        more = tuple(p for p in paths if p not in self.visible)
        return dataclasses.replace(self, visible=self.visible + more) if more else self


def _real_existing(paths: Iterable[Path | str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        real = Path(os.path.realpath(os.path.expanduser(str(raw))))
        if real.exists() and real not in out:
            out.append(real)
    return out


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


def build_policy(
    roots: Iterable[Path | str],
    protected: ProtectedPaths,
    *,
    extra_writable: Iterable[Path | str] = (),
    readable: Iterable[Path | str] = (),
    network: bool = False,
) -> SandboxPolicy:
    """The policy for a session whose workspace roots are `roots`; `readable` (`sandbox.readable`): paths
    shown read-only even under a private folder. A hidden path that contains a writable root is left
    visible (hiding it would hide the workspace); one inside a root, or inside a readable path, is still
    hidden."""
    writable = _real_existing([*roots, *extra_writable])
    readonly = _real_existing(p for root in writable for p in protected.readonly_inside(root))
    hidden = [h for h in _real_existing(protected.hidden()) if not any(_contains(h, w) for w in writable)]
    dirs = tuple(h for h in hidden if h.is_dir())
    files = tuple(h for h in hidden if not h.is_dir())
    shown = tuple(_real_existing(readable))
    return SandboxPolicy(tuple(writable), tuple(readonly), dirs, files, network, shown)
