"""Permission rules: a tool name, or a tool name with a command prefix or a path pattern (CONTRACTS.md §5;
issue 12 §2; PROTOCOL.md §4.3 `permissions.rules`).

Owns: `Rule`, `DEFAULT_RULES`, `parse_target()`, `Subject` (what the rules of one call match: its parts),
`verdicts()` (deny > ask > allow over every form, part by part), `names()` (a rule's name covers a tool: exactly, or `mcp__<server>__*` for every tool of
one MCP server; MCP tools have no default rule, so they ask), `strictest()` and `rule_label()`.

Forms of `tool`:
- `run_command`: the exact tool name: every call of the tool, every part of a command;
- `run_command(npm test)`: a command prefix, word by word after quote removal; `*` inside a word is a
  glob, a last word `*` (or Claude Code's `:*`) means "and any arguments", which a prefix already allows.
  It matches one simple command of a compound line; a compound line (`;`, `&&`, `||`, `|`, `$(...)`,
  backticks, redirections to files) is allowed only if every part is (agentd.permissions.shellwords),
  and the commands a part starts (`sudo rm`, `xargs rm`, `sh -c "rm f"`) are parts (break12). A deny or
  ask pattern matches a program by its name (`rm` matches `/bin/rm`) and a word known only at run time
  as "might" (`match()`: `maybe`, an ask labelled `unknowable:`); an allow pattern matches exactly
  (`covers()`), never a command that cannot be known (`(None,)` words), and needs not cover a
  transparent wrapper (`timeout 5`, `sh -c`);
- `read_file(**/.env)`, `write_file(src/**)`, `edit_file(...)`, `list_dir(...)`: a path pattern,
  relative to the workspace root (`**` any folders, `*` within a name) or absolute (`/...`, `~/...`).
  A redirection `> path` in a command is a write of that path, `< path` a read, matched by the
  `write_file(...)` / `read_file(...)` patterns (never outside the workspace).
What "always" offers for a command is agentd.permissions.prefix. Imports pydantic, the standard library,
`agentd.permissions.shellwords`, `agentd.permissions.argv` and `agentd.mcpnames`; never pygls,
lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentd.mcpnames import SERVER
from agentd.permissions.argv import command_name, without_global_options
from agentd.permissions.shellwords import Outer, Part, split_command

Action = Literal["allow", "ask", "deny"]

_STRENGTH: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
# `mcp__<server>__<tool>`: the server's name has no `__` (agentd.mcpnames owns that rule, break11)
_TARGET = re.compile(rf"^(mcp__{SERVER}__\*|[A-Za-z_][\w.-]*)(?:\((.*)\))?$", re.S)
MCP_TOOL = re.compile(rf"mcp__{SERVER}__(?:[A-Za-z0-9_.-]+|\*)")  # a name or every tool of a server
PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir"})
SAFE_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


@functools.lru_cache(maxsize=4096)
def parse_target(text: str) -> tuple[str, str | None]:
    """`run_command(npm test)` -> `("run_command", "npm test")`; `read_file` -> `("read_file", None)`.
    Raises ValueError with what to write instead for `run_command(`, `x()` or a pattern on a tool that
    takes none."""
    m = _TARGET.match(text.strip())
    if m is None:
        raise ValueError(
            f"{text!r} is not a tool name or tool(pattern); write e.g. run_command, "
            "run_command(npm test) or read_file(**/.env)"
        )
    name, pattern = m.group(1), m.group(2)
    if pattern is not None and not pattern.strip():
        raise ValueError(f"{text!r}: the pattern in parentheses is empty; write {name} for every call")
    return name, pattern.strip() if pattern is not None else None


class Rule(BaseModel):
    """One `permissions.rules` entry: `{"tool": "run_command(npm test)", "action": "allow"}`.
    `network`: an allow that also covers a sandboxed command asking for the network."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1, description="A tool name, or tool(pattern).")
    action: Action
    network: bool = False

    @field_validator("tool")
    @classmethod
    def _valid(cls, value: str) -> str:
        parse_target(value)
        return value.strip()

    @property
    def name(self) -> str:
        return parse_target(self.tool)[0]

    @property
    def pattern(self) -> str | None:
        return parse_target(self.tool)[1]


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(tool="read_file", action="allow"),
    Rule(tool="list_dir", action="allow"),
    Rule(tool="grep", action="allow"),
    Rule(tool="glob", action="allow"),
    Rule(tool="todo_write", action="allow"),
    Rule(tool="write_file", action="ask"),
    Rule(tool="edit_file", action="ask"),
    Rule(tool="run_command", action="ask"),
)


def is_mcp_target(name: str) -> bool:
    """`name` (without a pattern) names an MCP tool, `mcp__<server>__<tool>`, or all of a server's,
    `mcp__<server>__*`: what config rules, hooks and `agentd run --allow` accept (one syntax, break11)."""
    return MCP_TOOL.fullmatch(name) is not None


def names(rule_name: str, tool_name: str) -> bool:
    """A rule's tool name covers `tool_name`: the same name, or `mcp__<server>__*` for every tool of that
    MCP server (issue 11)."""
    if rule_name.startswith("mcp__") and rule_name.endswith("__*"):
        return tool_name.startswith(rule_name[:-1])
    return rule_name == tool_name


def strictest(rules: Iterable[Rule], tool_name: str) -> Rule | None:
    """The exact-name rule for `tool_name` with the strongest action (deny > ask > allow), or None.
    Among equally strong rules the first one wins."""
    best: Rule | None = None
    for rule in rules:
        if names(rule.tool, tool_name) and (best is None or _STRENGTH[rule.action] > _STRENGTH[best.action]):
            best = rule
    return best


def rule_label(rule: Rule, default: bool = False) -> str:
    """The `rule` value of a decision: `run_command=ask`, `run_command(npm test)=allow`, or
    `default:run_command=ask` for a default rule."""
    label = f"{rule.tool}={rule.action}"
    return f"default:{label}" if default else label


# ---- what one call offers to the rules ---------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    """One thing to allow: a command part, a file a redirection writes or reads, or a path tool's path.
    `tool`: the tool whose rules match it (`write_file` for a `>` redirection); `words`: a command's words
    (`(None,)`: a command that cannot be known before it runs); `path`: a real absolute path; `inside`:
    the path lies inside a workspace root (its relative form in `rel`); `transparent`, `outer`: as
    `shellwords.Part` (a wrapper an allow need not cover; the outer forms of a started command)."""

    tool: str
    words: tuple[str | None, ...] = ()
    path: str | None = None
    rel: str | None = None
    text: str = ""
    transparent: bool = False
    outer: Outer = ()


@dataclass(frozen=True)
class Subject:
    """The items of one call: `items` (never empty for a known form), `complete` (False: the parser could
    not vouch for the line; one more unknowable item is added), `owner`: the called tool (its exact-name
    rules match every item)."""

    owner: str
    items: tuple[Item, ...]
    complete: bool = True


def subject_of(tool: str, *, command: str | None, path: str | None, roots: Sequence[Path]) -> Subject:
    """The subject of a call: a command is split into parts, a path tool's path is one item, any other
    call is one item with nothing to match but the tool name."""
    if tool == "run_command" and command is not None:
        parsed = split_command(command)
        items = tuple(_item(p, roots) for p in parsed.parts)
        if not parsed.complete:  # what the parser could not see: a command nobody can name
            items += (Item(tool, words=(None,), text=f"(what agentd could not check: {parsed.problem})"),)
        return Subject(tool, items or (Item(tool, text=command),), parsed.complete)
    if path is not None:
        return Subject(tool, (_path_item(tool, path, roots),))
    return Subject(tool, (Item(tool),))


def _item(part: Part, roots: Sequence[Path]) -> Item:
    if part.kind == "command":
        return Item("run_command", part.words, text=part.text, transparent=part.transparent, outer=part.outer)
    target = part.words[0]
    tool = "write_file" if part.kind == "write" else "read_file"
    if target is None:
        return Item(tool, text=part.text)
    return _path_item(
        tool, os.path.join(str(roots[0]), os.path.expanduser(target)) if roots else target, roots, part.text
    )


def _path_item(tool: str, path: str, roots: Sequence[Path], text: str = "") -> Item:
    real = os.path.realpath(os.path.abspath(os.path.expanduser(path)))
    for root in roots:
        r = os.path.realpath(str(root))
        if real == r or real.startswith(r.rstrip(os.sep) + os.sep):
            return Item(tool, path=real, rel=os.path.relpath(real, r), text=text or path)
    return Item(tool, path=real, text=text or path)


# ---- matching ------------------------------------------------------------------------------------------
Match = Literal["yes", "no", "maybe"]


def match(rule: Rule, item: Item, owner: str, *, loose: bool = False) -> Match:
    """Whether `rule` covers `item` of a call of `owner`: an exact-name rule covers every item of its
    tool's calls; a pattern rule the items of its tool that its pattern matches. `loose` (deny and ask
    rules): a command word matches by its name (`rm` matches `/bin/rm`), and a word only known when the
    command runs (`$X`, `(None,)`) gives "maybe" instead of "no"."""
    name, pattern = parse_target(rule.tool)
    if pattern is None:
        return "yes" if names(name, owner) else "no"
    if name != item.tool:
        return "no"
    if item.tool == "run_command":
        return _command_match(pattern, item.words, loose)
    if item.path is None:
        return "no"
    return "yes" if _path_matches(pattern, item) else "no"


def matches(rule: Rule, item: Item, owner: str) -> bool:
    """`match()` for an allow: only a literal match counts."""
    return match(rule, item, owner) == "yes"


def covers(rule: Rule, item: Item, owner: str) -> bool:
    """An allow `rule` covers `item`: it matches the item, or an outer form of it through the started
    command's name (`run_command(sudo apt install *)` covers the `apt install x` of `sudo apt install x`;
    `run_command(sudo *)` does not)."""
    if matches(rule, item, owner):
        return True
    pattern = parse_target(rule.tool)[1]
    if pattern is None or not item.outer:
        return False
    want = _wanted(pattern)
    for words, start in item.outer:
        if (
            len(want) > start
            and not _GLOB.search(want[start])
            and _command_match(pattern, words, False) == "yes"
        ):
            return True
    return False


_GLOB = re.compile(r"[*?\[]")


@functools.lru_cache(maxsize=1024)
def _pattern_words(pattern: str) -> tuple[str, ...]:
    """A pattern's words after the shell's quote removal (`'npm' "test"` -> `npm test`); `*` stays."""
    text = pattern[:-2] + " *" if pattern.endswith(":*") else pattern
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return tuple(text.split())


def _wanted(pattern: str) -> tuple[str, ...]:
    want = _pattern_words(pattern)
    return want[:-1] if want and want[-1] == "*" else want  # "and any arguments": a prefix allows them


def _command_match(pattern: str, words: tuple[str | None, ...], loose: bool) -> Match:
    """`loose` (deny, ask): also the words without a known tool's global options, so that
    `run_command(git push *)` matches `git -C . --no-pager push` (argv.without_global_options)."""
    found = _words_match(pattern, words, loose)
    if not loose or found == "yes":
        return found
    bare = without_global_options(words)[0]
    if bare is words:
        return found
    other = _words_match(pattern, bare, loose)
    return "yes" if other == "yes" else "maybe" if "maybe" in (found, other) else "no"


def _words_match(pattern: str, words: tuple[str | None, ...], loose: bool) -> Match:
    for i, p in enumerate(_wanted(pattern)):
        if i >= len(words):
            return "no"
        w = words[i]
        if w is None:
            return "maybe" if loose else "no"  # `$X` may be (or split into) anything, even nothing
        if not fnmatch.fnmatchcase(w, p) and not (
            loose and i == 0 and "/" not in p and fnmatch.fnmatchcase(command_name(w), p)
        ):
            return "no"
    return "yes"


@functools.lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.S)


def _path_matches(pattern: str, item: Item) -> bool:
    if pattern.startswith(("/", "~")):
        absolute = (
            os.path.realpath(os.path.expanduser(pattern))
            if "*" not in pattern
            else os.path.expanduser(pattern)
        )
        return item.path is not None and _glob_regex(absolute).match(item.path) is not None
    return item.rel is not None and _glob_regex(pattern.removeprefix("./")).match(item.rel) is not None


# ---- the verdict ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartVerdict:
    """The answer for one item: `action`, `source` (`rule`, `grant` or `default`), `label` (the rule that
    decided, as in `Decision.rule`), `explicit` (a configured rule or a grant, not a default)."""

    action: Action
    source: Literal["rule", "grant", "default"]
    label: str | None
    item: Item


def item_verdict(
    item: Item,
    owner: str,
    rules: Sequence[Rule],
    allow_grants: Sequence[Rule],
    reject_grants: Sequence[Rule],
    *,
    network: bool = False,
) -> PartVerdict:
    """One item through the order of CONTRACTS.md §5 for rules and grants: a deny rule, a reject grant,
    a deny or ask rule that the item might match (a word known only when it runs: ask, `unknowable:`), an
    allow grant, an ask rule, an allow rule, the default. `network`: the call asks for the network, which
    only an allow rule with `network = true` covers (grants never do)."""
    found = [(r, match(r, item, owner, loose=r.action != "allow")) for r in rules]
    for r, m in found:
        if r.action == "deny" and m == "yes":
            return PartVerdict("deny", "rule", rule_label(r), item)
    for g in reject_grants:
        if match(g, item, owner, loose=True) == "yes":
            return PartVerdict("deny", "grant", _grant_label("reject_always", g), item)
    unsure = [r for r, m in found if m == "maybe"]
    if unsure:  # deny before ask: the label names the strongest rule the command might be
        r = max(unsure, key=lambda r: _STRENGTH[r.action])
        return PartVerdict("ask", "rule", f"unknowable:{rule_label(r)}", item)
    if not network:
        for g in allow_grants:
            if covers(g, item, owner):
                return PartVerdict("allow", "grant", _grant_label("allow_always", g), item)
    for r, m in found:
        if r.action == "ask" and m == "yes":
            return PartVerdict("ask", "rule", rule_label(r), item)
    for r, _ in found:
        if r.action == "allow" and (r.network or not network) and covers(r, item, owner):
            return PartVerdict("allow", "rule", rule_label(r), item)
    return _default(item, owner)


def _grant_label(kind: str, grant: Rule) -> str:
    return kind if grant.pattern is None else f"{kind}:{grant.tool}"


@functools.lru_cache(maxsize=256)
def _default_rule(owner: str) -> Rule | None:
    return strictest(DEFAULT_RULES, owner)


def _default(item: Item, owner: str) -> PartVerdict:
    if item.tool in ("write_file", "read_file") and owner == "run_command":
        if item.path in SAFE_TARGETS:
            return PartVerdict("allow", "default", "default:redirect=allow", item)
        if item.tool == "read_file" and item.rel is not None:
            return PartVerdict("allow", "default", "default:read_file=allow", item)
        return PartVerdict("ask", "default", f"default:{item.tool}=ask", item)
    default = _default_rule(owner)
    if default is None:
        return PartVerdict("ask", "default", None, item)  # a tool no rule names: ask (safe side)
    return PartVerdict(default.action, "default", rule_label(default, default=True), item)


def verdicts(
    subject: Subject,
    rules: Sequence[Rule],
    allow_grants: Sequence[Rule] = (),
    reject_grants: Sequence[Rule] = (),
    *,
    network: bool = False,
) -> list[PartVerdict]:
    """One verdict per item that decides something. A transparent wrapper (`timeout 5`, `sh -c`) is
    left out unless a deny or ask rule names it: what it runs has its own verdict. An item that cannot be
    known before it runs (`$R f`, `| sh`, `python -c`, a line the parser could not vouch for) is never
    allowed by a pattern, and asks when any deny or ask pattern for its tool exists."""
    out = []
    for item in subject.items:
        v = item_verdict(item, subject.owner, rules, allow_grants, reject_grants, network=network)
        if not item.transparent or v.action == "deny" or (v.action == "ask" and v.source == "rule"):
            out.append(v)
    return out
