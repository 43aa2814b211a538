"""What a sandboxed process may touch (issue 12 §1): one `SandboxPolicy` per session, for every backend.

Owns: `SandboxPolicy` and `build_policy()`. Inside the sandbox the workspace roots (and `sandbox.writable`)
are writable, but not the protected paths inside them (`agentd.permissions.protected`: `.git`, `.agentd`,
editor configuration at any depth; shell start-up files; made unwritable per launch by
`agentd.sandbox.guard`, also when they do not exist yet); agentd's data dir, the user config dir and the
credential stores are not visible; the rest of the
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

from agentd.permissions.protected import Kind, ProtectedPaths


@dataclass(frozen=True)
class SandboxPolicy:
    """Real, existing paths. `writable`: folders bound read-write; `readonly`: paths inside them bound
    read-only again (filled per launch by `agentd.sandbox.guard`); `hidden`: folders replaced by an empty
    folder; `hidden_files`: files replaced by an empty file; `network`: whether the process shares
    agentd's network; `visible`: paths shown read-only even under a private folder (`/tmp`, `/run`),
    below the writable and hidden ones. `guarded`: the protected paths at fixed places inside the
    writable folders, existing or not, with what stands in for an absent one
    (`ProtectedPaths.fixed_inside`); `quarantine`: where a protected path a command created is moved
    (`<data dir>/quarantine`; None: a folder under the system's temporary folder)."""

    writable: tuple[Path, ...]
    readonly: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    hidden_files: tuple[Path, ...] = ()
    network: bool = False
    visible: tuple[Path, ...] = ()
    guarded: tuple[tuple[Path, Kind], ...] = ()
    quarantine: Path | None = None

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
    guarded = tuple(dict.fromkeys(g for root in writable for g in protected.fixed_inside(root)))
    hidden = [h for h in _real_existing(protected.hidden()) if not any(_contains(h, w) for w in writable)]
    dirs = tuple(h for h in hidden if h.is_dir())
    files = tuple(h for h in hidden if not h.is_dir())
    shown = tuple(_real_existing(readable))
    quarantine = protected.data_dir / "quarantine" if protected.data_dir else None
    return SandboxPolicy(tuple(writable), (), dirs, files, network, shown, guarded, quarantine)
