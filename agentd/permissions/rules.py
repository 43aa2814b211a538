"""Permission rules: a tool name, or a tool name with a command prefix or a path pattern (CONTRACTS.md §5;
issue 12 §2; PROTOCOL.md §4.3 `permissions.rules`).

Owns: `Rule`, `DEFAULT_RULES`, `parse_target()`, `Subject` (what the rules of one call match: its parts),
`verdict()` (deny > ask > allow over every form, part by part), `command_prefix()` (what "always" offers
for a command), `names()` (a rule's name covers a tool: exactly, or `mcp__<server>__*` for every tool of
one MCP server; MCP tools have no default rule, so they ask), `strictest()` and `rule_label()`.

Forms of `tool`:
- `run_command`: the exact tool name: every call of the tool, every part of a command;
- `run_command(npm test)`: a command prefix, word by word after quote removal; `*` inside a word is a
  glob, a last word `*` (or Claude Code's `:*`) means "and any arguments", which a prefix already allows.
  It matches one simple command of a compound line; a compound line (`;`, `&&`, `||`, `|`, `$(...)`,
  backticks, redirections to files) is allowed only if every part is (agentd.permissions.shellwords);
- `read_file(**/.env)`, `write_file(src/**)`, `edit_file(...)`, `list_dir(...)`: a path pattern,
  relative to the workspace root (`**` any folders, `*` within a name) or absolute (`/...`, `~/...`).
  A redirection `> path` in a command is a write of that path, `< path` a read, matched by the
  `write_file(...)` / `read_file(...)` patterns (never outside the workspace).
Imports pydantic, the standard library and `agentd.permissions.shellwords`; never pygls, lsprotocol, acp
or agentd.adapters.
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

from agentd.permissions.shellwords import Part, split_command

Action = Literal["allow", "ask", "deny"]

_STRENGTH: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
_TARGET = re.compile(r"^(mcp__[\w-]+__\*|[A-Za-z_][\w.-]*)(?:\((.*)\))?$", re.S)
PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir"})
SAFE_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


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
    `tool`: the tool whose rules match it (`write_file` for a `>` redirection); `words`: a command's words;
    `path`: a real absolute path; `inside`: the path lies inside a workspace root (its relative form in
    `rel`)."""

    tool: str
    words: tuple[str | None, ...] = ()
    path: str | None = None
    rel: str | None = None
    text: str = ""


@dataclass(frozen=True)
class Subject:
    """The items of one call: `items` (never empty for a known form), `complete` (False: only exact-name
    rules and deny patterns decide), `owner`: the called tool (its exact-name rules match every item)."""

    owner: str
    items: tuple[Item, ...]
    complete: bool = True


def subject_of(tool: str, *, command: str | None, path: str | None, roots: Sequence[Path]) -> Subject:
    """The subject of a call: a command is split into parts, a path tool's path is one item, any other
    call is one item with nothing to match but the tool name."""
    if tool == "run_command" and command is not None:
        parsed = split_command(command)
        items = tuple(_item(p, roots) for p in parsed.parts)
        return Subject(tool, items or (Item(tool, text=command),), parsed.complete)
    if path is not None:
        return Subject(tool, (_path_item(tool, path, roots),))
    return Subject(tool, (Item(tool),))


def _item(part: Part, roots: Sequence[Path]) -> Item:
    if part.kind == "command":
        return Item("run_command", words=part.words, text=part.text)
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
def matches(rule: Rule, item: Item, owner: str) -> bool:
    """Whether `rule` covers `item` of a call of `owner`: an exact-name rule covers every item of its
    tool's calls; a pattern rule covers the items of its tool that its pattern matches."""
    name, pattern = parse_target(rule.tool)
    if pattern is None:
        return names(name, owner)
    if name != item.tool:
        return False
    if item.tool == "run_command":
        return _command_matches(pattern, item.words)
    if item.path is None:
        return False
    return _path_matches(pattern, item)


@functools.lru_cache(maxsize=1024)
def _pattern_words(pattern: str) -> tuple[str, ...]:
    text = pattern[:-2] + " *" if pattern.endswith(":*") else pattern
    parsed = split_command(text)
    if len(parsed.parts) == 1 and parsed.parts[0].kind == "command":
        words = parsed.parts[0].words
        if all(w is not None for w in words):
            return tuple(w for w in words if w is not None)
    return tuple(text.split())  # globs (`git log*`) are not literal words for the parser; plain split


def _command_matches(pattern: str, words: tuple[str | None, ...]) -> bool:
    want = list(_pattern_words(pattern))
    if want and want[-1] == "*":
        want.pop()  # "and any arguments": a prefix allows them already
    if not want or len(words) < len(want):
        return not want
    return all(w is not None and fnmatch.fnmatchcase(w, p) for w, p in zip(words, want, strict=False))


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
    an allow grant, an ask rule, an allow rule, the default. `network`: the call asks for the network, which
    only an allow rule with `network = true` covers (grants never do)."""
    mine = [r for r in rules if matches(r, item, owner)]
    for r in mine:
        if r.action == "deny":
            return PartVerdict("deny", "rule", rule_label(r), item)
    for g in reject_grants:
        if matches(g, item, owner):
            return PartVerdict("deny", "grant", _grant_label("reject_always", g), item)
    if not network:
        for g in allow_grants:
            if matches(g, item, owner):
                return PartVerdict("allow", "grant", _grant_label("allow_always", g), item)
    for r in mine:
        if r.action == "ask":
            return PartVerdict("ask", "rule", rule_label(r), item)
    for r in mine:
        if r.action == "allow" and (r.network or not network):
            return PartVerdict("allow", "rule", rule_label(r), item)
    return _default(item, owner)


def _grant_label(kind: str, grant: Rule) -> str:
    return kind if grant.pattern is None else f"{kind}:{grant.tool}"


def _default(item: Item, owner: str) -> PartVerdict:
    if item.tool in ("write_file", "read_file") and owner == "run_command":
        if item.path in SAFE_TARGETS:
            return PartVerdict("allow", "default", "default:redirect=allow", item)
        if item.tool == "read_file" and item.rel is not None:
            return PartVerdict("allow", "default", "default:read_file=allow", item)
        return PartVerdict("ask", "default", f"default:{item.tool}=ask", item)
    default = strictest(DEFAULT_RULES, owner)
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
    """One verdict per item. An incomplete subject gets one more `ask` item unless an exact-name rule or
    grant of the tool answers it, so no pattern allow ever covers what the parser could not see."""
    out = [
        item_verdict(i, subject.owner, rules, allow_grants, reject_grants, network=network)
        for i in subject.items
    ]
    if not subject.complete:
        whole = Item(subject.owner, text="(the parts agentd could not check)")
        exact = [r for r in rules if r.tool == subject.owner]
        grants_a = [g for g in allow_grants if g.tool == subject.owner]
        grants_r = [g for g in reject_grants if g.tool == subject.owner]
        out.append(item_verdict(whole, subject.owner, exact, grants_a, grants_r, network=network))
    return out


def command_prefix(command: str) -> str | None:
    """The prefix "always" offers for a command (PROTOCOL.md §6.10): its first words, when the command is
    one literal simple command. `npm test -- --watch` -> `npm test`; `git log -5` -> `git log`;
    `python3 -m pytest x` -> `python3 -m pytest`; `ls -la` -> `ls`. None for a compound command, an
    expansion in the first words, a wrapper that runs any command (`sudo`, `env`, `xargs`, `find`,
    `bash -c`, `python -c`), or leading variable assignments."""
    parsed = split_command(command)
    if not parsed.complete or len(parsed.parts) != 1 or parsed.parts[0].kind != "command":
        return None
    words = parsed.parts[0].words
    if not words or words[0] is None or "=" in words[0] or words[0] in _WRAPPERS:
        return None
    first = words[0]
    rest = list(words[1:])
    if os.path.basename(first) in _INTERPRETERS:
        if rest and rest[0] == "-m" and len(rest) > 1 and rest[1]:
            return _join([first, "-m", rest[1]])
        if rest and rest[0] is not None and not rest[0].startswith("-"):
            return _join([first, rest[0]])
        return None
    out = [first]
    for w in rest[:2]:
        if w is None or not _SUBCOMMAND.match(w):
            break
        out.append(w)
        if w not in _RUNNERS:
            break
    return _join(out)


_SUBCOMMAND = re.compile(r"^[A-Za-z][\w:.-]*$")
_RUNNERS = frozenset({"run", "exec", "x", "dlx", "tool"})  # `npm run test`, `uv run pytest`: keep one more
_WRAPPERS = frozenset(
    {"sudo", "doas", "su", "env", "xargs", "nohup", "nice", "ionice", "timeout", "time", "watch", "exec", "eval",
     "command", "builtin", "stdbuf", "chroot", "setsid", "strace", "ltrace", "gdb", "source", ".",
     "find", "fd", "parallel"}
)  # fmt: skip
# find/fd/parallel run the commands in their arguments (`find . -exec sh -c … ;`, `find . -delete`): an
# "always" for `find` after `find . -name x` would allow those without asking (break14)
_INTERPRETERS = frozenset(
    {"python", "python3", "python2", "node", "bash", "sh", "zsh", "dash", "ksh", "fish", "perl", "ruby", "php",
     "deno", "bun", "lua", "tclsh", "Rscript", "pwsh", "osascript", "awk", "gawk", "sed"}
)  # fmt: skip


def _join(words: Sequence[str | None]) -> str:
    return " ".join(shlex.quote(w) for w in words if w is not None)
