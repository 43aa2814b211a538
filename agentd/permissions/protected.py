"""Protected paths: what no rule, mode, grant or hook may write without asking (issue 12 §3).

Owns: the path classes and their lists, one place for every user:
- `agentd_config`: the user config dir (`config.toml`, `trust.json`) and any `.agentd/` folder;
- `agentd_data`: the data dir (session logs, audit logs, the grant key);
- `git_internals`: anything under a `.git` folder (or a `.git` file): hooks and config run code later;
- `editor_config`: an editor's workspace configuration, which the editor runs or obeys when it opens the
  folder (`.vscode/`: tasks, launch configurations, settings, MCP servers; `.idea/` run configurations;
  `.zed/`, `.helix/` language-server commands; Neovim's `exrc` files `.nvim.lua`, `.nvimrc`, `.exrc`);
- `shell_startup`: the shell start-up files in the home folder (`.bashrc`, `.profile`, `.zshrc`, ...);
- `credentials`: the user's credential stores (`~/.ssh`, `~/.aws`, `~/.config/gcloud`, keyrings, `.netrc`, ...).
The names of `ANYWHERE` are protected at any depth; `fixed_inside()` lists the protected paths at fixed
places inside a folder the sandbox makes writable. The permission gate asks for every write (and every
read of `agentd_data` and `credentials`) in these classes whatever the mode or rules say; the sandbox
(`agentd.sandbox.guard`) takes both lists from here: it hides `agentd_config` (user dir), `agentd_data`
and `credentials`, and makes every other protected path inside the workspace unwritable, also one that
does not exist yet.
`named_in()`: the protected path a command line names in any word (the gate asks for such a command when
it runs outside the sandbox, break12 P1).
Imports only the standard library; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

PathClass = Literal[
    "agentd_config", "agentd_data", "git_internals", "editor_config", "shell_startup", "credentials"
]
Kind = Literal["dir", "file"]  # what stands in for a protected path that does not exist yet

CLASS_TEXT: dict[str, str] = {
    "agentd_config": "agentd's own configuration",
    "agentd_data": "agentd's data dir (session and audit logs)",
    "git_internals": "git internals (.git/)",
    "editor_config": "an editor's workspace configuration (.vscode/, .idea/, .nvim.lua, ...)",
    "shell_startup": "a shell start-up file",
    "credentials": "a credential store",
}

# Protected wherever they appear in a path, at any depth: name -> (class, what stands in when absent).
ANYWHERE: dict[str, tuple[PathClass, Kind]] = {
    ".agentd": ("agentd_config", "dir"),
    ".git": ("git_internals", "dir"),  # an empty folder: git skips it and looks further up
    ".vscode": ("editor_config", "dir"),
    ".idea": ("editor_config", "dir"),
    ".zed": ("editor_config", "dir"),
    ".helix": ("editor_config", "dir"),
    ".nvim.lua": ("editor_config", "file"),
    ".nvimrc": ("editor_config", "file"),
    ".exrc": ("editor_config", "file"),
}
_RANK: tuple[PathClass, ...] = ("agentd_config", "git_internals", "editor_config")  # first match wins

SHELL_STARTUP_DIRS = (".config/fish",)
SHELL_STARTUP = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".config/fish",
    ".kshrc",
    ".tcshrc",
    ".cshrc",
    ".login",
)

CREDENTIAL_DIRS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".password-store",
    ".local/share/keyrings",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".config/rclone",
    ".terraform.d",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".codex",
    ".claude",
    ".gem/credentials",
)

CREDENTIAL_FILES = (
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".vault-token",
    ".boto",
    ".s3cfg",
    ".claude.json",
)

_TOKENS = re.compile(r"[\s'\"=:;,|&<>()`]+")  # a command line's words, values after `=`, PATH-like lists
_HOME_VAR = re.compile(r"^(\$HOME|\$\{HOME\}|~)(?=/|$)")
READ_PROTECTED: frozenset[str] = frozenset({"agentd_data", "credentials"})


def _startup_kind(name: str) -> Kind:
    return "dir" if name in SHELL_STARTUP_DIRS else "file"


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


@dataclass(frozen=True)
class ProtectedPaths:
    """The protected paths of one user. `home`, `config_dir` (the user config dir) and `data_dir` are
    resolved to real paths; `extra_hidden`: more folders or files to treat as credential stores
    (`sandbox.hide`)."""

    home: Path
    config_dir: Path
    data_dir: Path | None = None
    extra_hidden: tuple[Path, ...] = field(default_factory=tuple)

    @classmethod
    def of(
        cls,
        home: Path | str,
        config_dir: Path | str,
        data_dir: Path | str | None = None,
        extra_hidden: Iterable[Path | str] = (),
    ) -> ProtectedPaths:
        return cls(
            home=_real(home),
            config_dir=_real(config_dir),
            data_dir=_real(data_dir) if data_dir is not None else None,
            extra_hidden=tuple(_real(p) for p in extra_hidden),
        )

    def credential_paths(self) -> list[Path]:
        """Every credential store path (folders and files, existing or not), real paths."""
        names = (*CREDENTIAL_DIRS, *CREDENTIAL_FILES)
        return [self.in_home(n) for n in names] + list(self.extra_hidden)

    def in_home(self, name: str) -> Path:
        """The real path of `name` (relative, `/`-separated) under the home folder. `home` is real already,
        so when the first component of `name` does not exist no link can redirect it: one `lstat` instead
        of a `realpath` (issue 16: the gate classified every tool call's path against ~40 of these, 14 ms of
        the event loop per call under load)."""
        first = name.split("/", 1)[0]
        if not os.path.lexists(self.home / first):
            return self.home / name
        return _real(self.home / name)

    def classify(self, path: Path | str) -> PathClass | None:
        """The class of an absolute path (resolved here), or None when it is not protected."""
        real = _real(path)
        parts = set(Path(os.path.abspath(os.path.expanduser(str(path)))).parts) | set(real.parts)
        named = {ANYWHERE[p][0] for p in parts if p in ANYWHERE}
        if _under(real, self.config_dir) or "agentd_config" in named:
            return "agentd_config"
        if self.data_dir is not None and _under(real, self.data_dir):
            return "agentd_data"
        for cls in _RANK:
            if cls in named:
                return cls
        if any(_under(real, self.in_home(n)) for n in SHELL_STARTUP):
            return "shell_startup"
        if any(_under(real, c) for c in self.credential_paths()):
            return "credentials"
        return None

    def named_in(self, command: str, cwd: Path | str) -> PathClass | None:
        """The class of the first protected path a command line names, or None (break12 P1). Every word
        counts, also a value after `=` (`--output=.git/hooks/x`) or attached to a short option
        (`-o.git/x`); `~`, `$HOME` and `${HOME}` are the home folder; a relative word is taken from
        `cwd`. Only words that look like paths (a `/`, or a leading `.` or `~`) are resolved."""
        seen: set[str] = set()
        for token in _TOKENS.split(command):
            for word in (token, token[2:] if token.startswith("-") and not token.startswith("--") else ""):
                word = _HOME_VAR.sub(lambda _m: str(self.home), word)
                if not word or word in seen or not ("/" in word or word[0] in ".~"):
                    continue
                seen.add(word)
                cls = self.classify(os.path.join(str(cwd), os.path.expanduser(word)))
                if cls is not None:
                    return cls
        return None

    def hidden(self) -> list[Path]:
        """What the sandbox hides: the user config dir, the data dir and the credential stores that exist."""
        found = [self.config_dir, *([self.data_dir] if self.data_dir else []), *self.credential_paths()]
        return [p for p in dict.fromkeys(found) if os.path.lexists(p)]

    def fixed_inside(self, root: Path) -> list[tuple[Path, Kind]]:
        """The protected paths at fixed places inside the folder `root` (a real path), existing or not,
        with what stands in for each when absent: every `ANYWHERE` name at its top and, when they lie
        inside `root`, the shell start-up files, the user config dir, the data dir and the credential
        stores. The sandbox keeps each unwritable (docs/security.md, "Protected paths in the sandbox")."""
        found: list[tuple[Path, Kind]] = [(root / name, kind) for name, (_, kind) in ANYWHERE.items()]
        found += [(self.home / n, _startup_kind(n)) for n in SHELL_STARTUP]
        dirs = [self.config_dir, *([self.data_dir] if self.data_dir else []), *self.extra_hidden]
        found += [(p, "dir") for p in dirs] + [(self.in_home(n), "dir") for n in CREDENTIAL_DIRS]
        found += [(self.in_home(n), "file") for n in CREDENTIAL_FILES]
        out = [(p, k) for p, k in found if _under(p, root) and p != root]
        return list(dict.fromkeys(out))
