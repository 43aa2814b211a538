"""The `glob` filter of the search tools: which files of the searched folder a glob selects (issue 11).

Owns: `GlobFilter` (gitignore-style glob matching on paths relative to the searched folder, with `{a,b}`
alternatives, as ripgrep's `--glob`), `expand_braces()`, `names_hidden()` and `InvalidGlob`.
Imports the standard library and pathspec; never pygls, lsprotocol, acp or `agentd.adapters`.

Why not ripgrep's own `--glob`: its globs are *overrides* that win over every ignore rule, so `*` or `**`
would bring back `.git`, `node_modules` and every other ignored or hidden folder. Here a glob only narrows
ripgrep's default view: ripgrep is given a file-type filter for the file-name part (`--type-add`, which
respects ignore files and hidden folders, and keeps the walk cheap), and every path it returns is matched
against the whole glob (a hidden file is dropped there unless the glob names hidden files). A glob that names a hidden file or folder (`.github/**`, `**/.env`) turns on
`--hidden` (`.git` stays excluded) and the glob then decides which hidden files are kept.
"""

from __future__ import annotations

import pathspec

TYPE_NAME = "agentdglob"
MAX_ALTERNATIVES = 256


class InvalidGlob(ValueError):
    """A glob that cannot be used; `str()` says why."""


def names_hidden(glob: str | None) -> bool:
    """True when the glob names a hidden file or folder (a component starting with `.`, e.g. `.github/**`,
    `**/.env`, `.*`)."""
    if not glob:
        return False
    return any(part.startswith(".") and part not in (".", "..") for part in glob.split("/"))


def expand_braces(glob: str) -> list[str]:
    """`src/*.{ts,tsx}` -> `["src/*.ts", "src/*.tsx"]`; nested groups expand too. Raises `InvalidGlob` on
    an unbalanced brace or more than `MAX_ALTERNATIVES` alternatives."""
    open_at = glob.find("{")
    if open_at < 0:
        if "}" in glob:
            raise InvalidGlob("unmatched '}'")
        return [glob]
    depth, parts, start = 0, [], open_at + 1
    for i in range(open_at, len(glob)):
        ch = glob[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                parts.append(glob[start:i])
                out = [x for part in parts for x in expand_braces(glob[:open_at] + part + glob[i + 1 :])]
                if len(out) > MAX_ALTERNATIVES:
                    raise InvalidGlob(f"more than {MAX_ALTERNATIVES} alternatives")
                return out
        elif ch == "," and depth == 1:
            parts.append(glob[start:i])
            start = i + 1
    raise InvalidGlob("unclosed '{'")


class GlobFilter:
    """A compiled glob. `matches(rel)` for a `/`-separated path relative to the searched folder;
    `rg_flags()` the ripgrep flags that narrow the walk without overriding any ignore rule."""

    def __init__(self, glob: str) -> None:
        if glob.startswith("!"):
            raise InvalidGlob("a leading '!' (exclusion) is not supported; name the files to search")
        self.glob = glob
        self.alternatives = expand_braces(glob)
        try:
            self._spec = pathspec.GitIgnoreSpec.from_lines(self.alternatives)
        except (ValueError, TypeError) as exc:
            raise InvalidGlob(str(exc)) from None
        self.hidden = names_hidden(glob)

    def matches(self, rel: str) -> bool:
        """Whether the glob selects `rel`; a hidden file only when the glob names hidden files (ripgrep's
        `--type` filter lets hidden files through)."""
        if not self.hidden and any(part.startswith(".") for part in rel.split("/")):
            return False
        return bool(self._spec.match_file(rel))

    def rg_flags(self) -> list[str]:
        """`--type-add`/`--type` for the file-name part of every alternative, when each has one that can
        be matched on the name alone (no `**`, not a folder pattern); else nothing (the walk is not
        narrowed, the filter still applies)."""
        names = []
        for alt in self.alternatives:
            last = alt.rsplit("/", 1)[-1]
            if not last or "**" in last or ":" in last or "," in last:
                return []
            names.append(last)
        return [*(f"--type-add={TYPE_NAME}:{n}" for n in dict.fromkeys(names)), f"--type={TYPE_NAME}"]
