"""The `glob` filter of the search tools: which files of the searched folder a glob selects (issue 11).

Owns: `GlobFilter` (gitignore-style glob matching on paths relative to the searched folder, with `{a,b}`
alternatives, as ripgrep's `--glob`), `expand_braces()`, `names_hidden()` and `InvalidGlob`.
Imports the standard library; never pygls, lsprotocol, acp or `agentd.adapters`.

Matching takes time linear in the pattern times the path (break11: pathspec's translation to a Python
regex backtracked without end on `*a*a*a*a*a*a*a*aX/**`, freezing the event loop): a name is matched
by the greedy one-star-backtrack wildcard algorithm, a path by a table over (pattern part, path part). The
rules are gitignore's: a pattern with no `/` but a trailing one matches a name at any depth, else it is
anchored at the searched folder; `*` and `?` and `[...]` stay within a name; `**` is any number of
folders (a trailing `/**` everything inside); a pattern that matches a folder selects the files in it; a
trailing `/` matches folders only; a backslash escapes the next character.

Why not ripgrep's own `--glob`: its globs are *overrides* that win over every ignore rule, so `*` or `**`
would bring back `.git`, `node_modules` and every other ignored or hidden folder. Here a glob only narrows
ripgrep's default view: ripgrep is given a file-type filter for the file-name part (`--type-add`, which
respects ignore files and hidden folders, and keeps the walk cheap), and every path it returns is matched
against the whole glob (a hidden file is dropped there unless the glob names hidden files). A glob that names a hidden file or folder (`.github/**`, `**/.env`) turns on
`--hidden` (`.git` stays excluded) and the glob then decides which hidden files are kept.
"""

from __future__ import annotations

from functools import lru_cache

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
        self._patterns = [_Pattern(alt) for alt in self.alternatives]
        self.hidden = names_hidden(glob)

    def matches(self, rel: str) -> bool:
        """Whether the glob selects `rel`; a hidden file only when the glob names hidden files (ripgrep's
        `--type` filter lets hidden files through)."""
        if not self.hidden and any(part.startswith(".") for part in rel.split("/")):
            return False
        parts = tuple(p for p in rel.split("/") if p)
        return any(p.selects(parts) for p in self._patterns)

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


Token = tuple[str, str]  # ("lit", c) | ("any", "") | ("star", "") | ("set", "!" or "" + chars/ranges)


@lru_cache(maxsize=256)
def _tokens(part: str) -> tuple[Token, ...]:
    """One `/`-free part of a pattern as tokens."""
    out: list[Token] = []
    i = 0
    while i < len(part):
        ch = part[i]
        if ch == "\\" and i + 1 < len(part):
            out.append(("lit", part[i + 1]))
            i += 2
            continue
        if ch == "*":
            if not (out and out[-1][0] == "star"):  # `**` inside a name is `*`
                out.append(("star", ""))
        elif ch == "?":
            out.append(("any", ""))
        elif ch == "[":
            end = part.find("]", i + 2 if part[i + 1 : i + 2] in ("!", "^") else i + 1)
            end = part.find("]", end + 1) if end == i + 1 else end  # `[]...]`: the first `]` is literal
            if end < 0:  # an unclosed `[` is itself (ripgrep's run says the glob is bad)
                out.append(("lit", ch))
                i += 1
                continue
            body = part[i + 1 : end]
            neg = body[:1] in ("!", "^")
            out.append(("set", ("!" if neg else "=") + (body[1:] if neg else body)))
            i = end + 1
            continue
        else:
            out.append(("lit", ch))
        i += 1
    return tuple(out)


def _in_set(spec: str, ch: str) -> bool:
    body, hit, i = spec[1:], False, 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            hit = hit or body[i] <= ch <= body[i + 2]
            i += 3
        else:
            hit = hit or body[i] == ch
            i += 1
    return hit != (spec[0] == "!")


def _one(tok: Token, ch: str) -> bool:
    kind, val = tok
    return kind == "any" or (kind == "lit" and val == ch) or (kind == "set" and _in_set(val, ch))


def name_matches(tokens: tuple[Token, ...], name: str) -> bool:
    """Whether a name matches a part's tokens: greedy, back to the last `*` only, so at most
    len(tokens) * len(name) steps whatever the pattern."""
    t = n = 0
    star_t, star_n = -1, 0
    while n < len(name):
        if t < len(tokens) and tokens[t][0] == "star":
            star_t, star_n = t, n
            t += 1
        elif t < len(tokens) and _one(tokens[t], name[n]):
            t += 1
            n += 1
        elif star_t >= 0:
            star_n += 1
            t, n = star_t + 1, star_n
        else:
            return False
    return all(tok[0] == "star" for tok in tokens[t:])


class _Pattern:
    """One gitignore-style pattern (no `{}`), matched part by part."""

    def __init__(self, glob: str) -> None:
        self.dir_only = glob.endswith("/")
        body = glob.rstrip("/")
        if not body:
            raise InvalidGlob("an empty pattern")
        anchored = "/" in body
        parts = [p for p in body.lstrip("/").split("/") if p]
        if not anchored:
            parts = ["**", *parts]
        self.parts = tuple(parts)
        self.tokens = tuple(() if p == "**" else _tokens(p) for p in self.parts)

    def selects(self, path: tuple[str, ...]) -> bool:
        """The path, or a folder it is in, matches (gitignore: a matched folder holds matched files)."""
        return any(
            self._matches(path[:k]) for k in range(1, len(path) + 1) if k < len(path) or not self.dir_only
        )

    def _matches(self, path: tuple[str, ...]) -> bool:
        """A table over (pattern part, path part): len(parts) * len(path) cells."""
        m = len(self.parts)
        ok = [False] * (len(path) + 1)  # ok[j]: pattern parts so far match path[:j]
        ok[0] = True
        for i in range(m):
            nxt = [False] * (len(path) + 1)
            if self.parts[i] == "**":
                trailing = i == m - 1
                seen = False
                for j in range(len(path) + 1):
                    nxt[j] = seen if trailing else (seen or ok[j])  # a trailing `**` is one part or more
                    seen = seen or ok[j]
            else:
                for j in range(len(path)):
                    nxt[j + 1] = ok[j] and name_matches(self.tokens[i], path[j])
            ok = nxt
        return ok[len(path)]
