"""A shell command line as the parts a permission rule must each allow (issue 12 §2; CONTRACTS.md §5).

Owns: `Part`, `Parsed` and `split_command()`. The command is parsed with tree-sitter's bash grammar (the
parser Codex uses for the same purpose), never with string splitting. Every simple command is a part,
wherever it sits: joined by `;`, `&&`, `||`, `|`, `&` or newlines, in a subshell or `{ ...; }`, in a
condition or a loop body, inside `$(...)`, backticks, `<(...)`, `>(...)`, a here-document, a here-string
or a `${...}` default. A redirection to a file (`>`, `>>`, `&>`, `<`, ...) is a part too: a write or read
of that path (`2>&1` and other descriptor copies are not). What the parser cannot vouch for makes the
result incomplete, and then no pattern rule may allow it: a syntax error, a function definition (it would
redefine `git` for a later `git log`), or a node type this module does not know.

Words are the shell's values after quote removal (`"a b"` -> `a b`); a word with an expansion (`$X`,
`$(...)`, a glob, a brace expansion `{r,}m`) has no literal value (`None`): a rule's literal word never
allows it, and a deny or ask rule treats it as "might be" (agentd.permissions.rules).

The commands a simple command starts are parts too (agentd.permissions.wrappers, break12): `sudo rm f`,
`timeout 5 rm f`, `env X=1 rm f`, `X=1 rm f`, `xargs rm`, `find -exec rm {} ;` have a part `rm ...`; the
string of `sh -c`, `bash -c`, `eval`, `su -c`, `trap` is parsed as a command line of its own (up to
`MAX_DEPTH` deep); `find -delete` is a part `rm`. What cannot be known before it runs (`$R f`, `| sh`,
`python -c`, a string nested too deep) is a part whose command word is None. A wrapper part says whether it
is `transparent` (an allow needs to cover only what it runs) and an inner part its `outer` forms (a rule
that allows `sudo apt install *` also allows the `apt install x` that it names).
Imports only the standard library, tree_sitter / tree_sitter_bash and agentd.permissions.wrappers.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Literal

from agentd.permissions.evaluates import assigns_code, evaluated
from agentd.permissions.wrappers import Run, unwrap

PartKind = Literal["command", "write", "read"]

_STRUCTURE = frozenset(
    {
        "program", "list", "pipeline", "redirected_statement", "subshell", "compound_statement",
        "negated_command", "if_statement", "elif_clause", "else_clause", "while_statement", "for_statement",
        "c_style_for_statement", "do_group", "case_statement", "case_item", "test_command",
        "binary_expression", "unary_expression", "parenthesized_expression", "ternary_expression",
        "postfix_expression", "arithmetic_expansion", "string", "concatenation", "expansion",
        "simple_expansion", "heredoc_body", "herestring_redirect", "heredoc_redirect", "array",
        "subscript", "translated_string", "number", "word", "raw_string", "ansi_c_string",
        "string_content", "heredoc_content", "heredoc_start", "heredoc_end", "comment", "variable_name",
        "special_variable_name", "regex", "extglob_pattern", "brace_expression", "expansion_flags",
        "test_operator", "file_descriptor", "command_name", "word_content",
    }
)  # fmt: skip
_TOKENS = frozenset(
    {
        "&&", "||", ";", ";;", ";&", ";;&", "|", "|&", "&", "\n", "(", ")", "{", "}", "!", "if", "then",
        "else", "elif", "fi", "while", "until", "do", "done", "for", "in", "case", "esac", "$", "${", "`",
        "$(", "$((", "((", "))", "[", "]", "[[", "]]", "=", '"', "<<", "<<-", "<<<", "-", "+", "*", "/", "%",
        "==", "!=", "<", ">", "<=", ">=", "=~", "?", ":", ",", "++", "--", "+=", "-=", "select", "file_descriptor",
        "#", ":-", ":=", ":?", ":+", "**",
    }
)  # fmt: skip
_WRITE_OPS = frozenset({">", ">>", "&>", "&>>", ">|", "<>", ">&"})
_READ_OPS = frozenset({"<", "<&"})
_UNSAFE = frozenset({"function_definition"})
_EXPANDS = re.compile(r"[*?\[]|^~|\{[^{}]*(,|\.\.)[^{}]*\}")  # a glob, a tilde, a brace expansion
_OPENERS = frozenset({"{", "!", "(", "}"})
_RESERVED = frozenset({"if", "then", "elif", "else", "fi", "while", "until", "for", "do", "done", "case", "esac",
                       "select", "function", "[[", "((", "coproc", "time"})  # fmt: skip
_EVALUATING = frozenset({"arithmetic_expansion", "c_style_for_statement", "compound_statement", "subscript",
                         "binary_expression", "expansion"})  # fmt: skip
_ARITH_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_INDIRECT = re.compile(r"^\$\{!|@P\}$")
_SAFE_SPECIAL = frozenset({"#", "?", "$", "!", "-"})
MAX_DEPTH = 6  # `sh -c` strings inside `sh -c` strings: deeper ones are unknowable
Words = tuple[str | None, ...]
Outer = tuple[tuple[Words, int], ...]


@dataclass(frozen=True)
class Part:
    """One thing a rule must allow. `kind`: a simple command, or a redirection that writes or reads a file.
    `words`: for a command its words (assignments first, then the name and arguments), each the literal
    value or None; for a redirection one word, the target. `text`: the source text. `transparent`: a
    wrapper whose own words no allow needs to cover (`timeout 5`, `sh -c`, `xargs`); `outer`: for a
    command another one starts, the outer commands' words with the index where this one's words begin in
    them; `why`: for a command that cannot be known before it runs (words `(None,)`), the reason."""

    kind: PartKind
    words: Words
    text: str
    transparent: bool = False
    outer: Outer = ()
    why: str = ""

    @property
    def literal(self) -> bool:
        return all(w is not None for w in self.words)


@dataclass(frozen=True)
class Parsed:
    """`parts` in source order; `complete` False when something could not be vouched for (then only an
    exact tool-name rule, or a deny pattern on the parts found, decides); `problem` says what."""

    parts: tuple[Part, ...]
    complete: bool
    problem: str = ""


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


@functools.lru_cache(maxsize=512)
def split_command(command: str) -> Parsed:
    """Parse `command` (a `bash -c` string) into its parts. Pure; results are cached."""
    tree = _parser().parse(command.encode("utf-8", "surrogateescape"))
    walker = _Walker()
    walker.visit(tree.root_node)
    if tree.root_node.has_error:
        walker.problem = walker.problem or "the command does not parse as shell syntax"
    return Parsed(tuple(walker.parts), not walker.problem, walker.problem)


class _Walker:
    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.problem = ""
        self.depth = 0

    def visit(self, node: Any) -> None:
        kind = node.type
        if kind in _EVALUATING:
            self._evaluates(node)
        if kind == "command":
            self._command(node)
        elif kind in ("file_redirect",):
            self._redirect(node)
        elif kind in ("command_substitution", "process_substitution"):
            for child in node.named_children:
                self.visit(child)
        elif kind in ("variable_assignment", "variable_assignments", "declaration_command", "unset_command"):
            self._statement_words(node)
        elif kind in _UNSAFE:  # its body's commands are parts too; the definition makes the line unsure
            self.problem = self.problem or f"it defines a shell function ({_text(node)[:60]})"
            for child in node.children:
                self.visit(child)
        elif kind == "ERROR" or node.is_missing:
            self.problem = self.problem or "the command does not parse as shell syntax"
        elif kind in _STRUCTURE or kind in _TOKENS or not node.is_named:
            for child in node.children:
                self.visit(child)
        else:
            self.problem = self.problem or f"it uses shell syntax agentd does not check ({kind})"

    def _command(self, node: Any) -> None:
        words: list[str | None] = []
        assigned: list[str] = []
        end = -1  # where the last word ended: `r\<newline>m` is one word `rm` to bash (break12)
        for child in node.children:
            joins = end == child.start_byte - 2 and bytes(node.text)[end - node.start_byte :][:2] == b"\\\n"
            if (
                joins
                and words
                and child.type not in ("file_redirect", "herestring_redirect", "heredoc_redirect")
            ):
                last, value = words.pop(), _value(child)
                words.append(None if last is None or value is None else last + value)
                end = child.end_byte
                self._nested(child)
                continue
            end = child.end_byte
            if child.type == "command_name":
                words.append(_value(child.named_children[0]) if child.named_children else None)
            elif child.type == "variable_assignment":
                words.append(_value(child))
                name = child.child_by_field_name("name")
                assigned.append(_text(name) if name is not None else "")
            elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.visit(child)
                continue
            else:
                words.append(_value(child))
            self._nested(child)
        self._emit(tuple(words), _text(node), assigned)

    def _emit(self, words: Words, text: str, assigned: list[str] | tuple[()] = (), outer: Outer = ()) -> None:
        """A command part, then the parts of what it starts (wrappers, `sh -c`, `find -exec`...)."""
        found = unwrap(words, assigned)
        transparent = found.transparent and bool(found.runs)
        self.parts.append(Part("command", words, text, transparent, outer))
        self.parts.extend(Part("write", (path,), text) for path in found.writes)
        for run in found.runs:
            self._run(run, words, text, outer)

    def _run(self, run: Run, words: Words, text: str, outer: Outer) -> None:
        if run.script is not None and self.depth < MAX_DEPTH:
            self._script(run.script)
        elif run.words and run.words[0] in _OPENERS:  # `time { rm f; }`, `time ! rm f`: the grammar's
            self._run(Run(words=run.words[1:]), words, text, outer)  # words; bash runs the inner list
        elif run.words and run.words[0] in _RESERVED:
            self.parts.append(Part("command", (None,), text, why=f"`{text[:60]}` runs a compound command"))
        elif run.words is not None and run.words and run.words[0] is not None:
            inner: Outer = ()
            if run.offset is not None:
                inner = ((words, run.offset), *((w, k + run.offset) for w, k in outer))
            self._emit(run.words, text, (), inner)
        else:
            why = run.why or (f"{text[:60]} nests shell strings too deep" if run.script else "")
            self.parts.append(Part("command", (None,), text, why=why or "its command is not known"))

    def _script(self, script: str) -> None:
        """The commands of a string a shell runs (`sh -c STRING`, `eval STRING`): parsed as a line."""
        tree = _parser().parse(script.encode("utf-8", "surrogateescape"))
        self.depth += 1
        try:
            self.visit(tree.root_node)
        finally:
            self.depth -= 1
        if tree.root_node.has_error:
            self.problem = self.problem or "a string the command runs does not parse as shell syntax"

    def _statement_words(self, node: Any) -> None:
        """`X=1`, `export X=1`, `unset X`: a part like a command (PATH=... changes what runs next); a
        declaration or assignment bash re-reads as code is an unknowable part too (agentd.permissions.evaluates)."""
        if node.type == "variable_assignment":
            words: Words = (_value(node),)
        else:  # `export`, `local`, `unset`...: the keyword, then its words
            words = tuple(_text(c) if not c.is_named else _value(c) for c in node.children)
        for child in node.children:
            self._nested(child)
        self.parts.append(Part("command", words, _text(node)))
        if node.type == "variable_assignments":
            for child in node.named_children:
                self._statement_words(child)
            return
        if node.type == "variable_assignment":
            name = node.child_by_field_name("name")
            why = (
                "it sets a prompt, which bash expands as code"
                if name is not None and assigns_code(_text(name))
                else ""
            )
        else:
            why = evaluated(words[0] or "", words) or ""
        if why:
            self.parts.append(Part("command", (None,), _text(node), why=why))

    def _evaluates(self, node: Any) -> None:
        """A part of the syntax that evaluates a variable's value as code: arithmetic (`$((x))`, `((x))`,
        `[[ $x -eq 1 ]]`, a subscript `${a[$i]}`, `for ((...))`), whose `a[$(cmd)]` runs cmd; indirect
        `${!x}` and prompt `${x@P}` expansion. Unknowable (break12 R2)."""
        kind, text = node.type, _text(node)
        if kind == "expansion":
            why = "an indirect or prompt expansion can run code" if _INDIRECT.search(text) else ""
        elif kind == "subscript":
            index = node.children[2:] if node.child_count > 2 else []
            why = "an array subscript is arithmetic on values" if any(map(_has_variable, index)) else ""
        elif kind == "binary_expression":
            arith = any(c.type == "test_operator" and _text(c) in _ARITH_TESTS for c in node.children)
            why = "an arithmetic test on a value can run code" if arith and _has_variable(node) else ""
        elif kind == "compound_statement" and (node.child_count == 0 or node.children[0].type != "(("):
            why = ""
        else:
            why = "arithmetic on a variable's value can run code (a[$(cmd)])" if _has_variable(node) else ""
        if why:
            self.parts.append(Part("command", (None,), text, why=why))

    def _redirect(self, node: Any) -> None:
        op = next((c.type for c in node.children if not c.is_named), "")
        target = node.child_by_field_name("destination") or (
            node.named_children[-1] if node.named_children else None
        )
        if target is not None:
            self._nested(target)
        if target is None or target.type == "file_descriptor":
            return
        value = _value(target)
        if op in (">&", "<&") and value is not None and (value.isdigit() or value == "-"):
            return  # a descriptor copy or close, not a file
        if op in _WRITE_OPS:
            self.parts.append(Part("write", (value,), _text(node)))
        elif op in _READ_OPS:
            self.parts.append(Part("read", (value,), _text(node)))
        else:
            self.problem = self.problem or f"it uses a redirection agentd does not check ({op})"

    def _nested(self, node: Any) -> None:
        """Commands inside a word: `$(...)`, backticks, `<(...)`, `${X:-$(...)}`."""
        if node.child_count == 0:
            return
        if node.type in _EVALUATING:
            self._evaluates(node)
        if node.type in ("command_substitution", "process_substitution") or node.type in _UNSAFE:
            self.visit(node)
            return
        for child in node.children:
            self._nested(child)


def _has_variable(node: Any) -> bool:
    """`node` holds a variable's value or a command's output (what arithmetic would evaluate again)."""
    kind = node.type
    if kind in ("variable_name", "command_substitution"):
        return True
    if kind == "special_variable_name":
        return _text(node) not in _SAFE_SPECIAL
    return any(_has_variable(c) for c in node.children)


def _text(node: Any) -> str:
    return bytes(node.text).decode("utf-8", "surrogateescape")


def _value(node: Any) -> str | None:
    """The literal value of a word node after quote removal, or None when it expands at run time."""
    kind = node.type
    if kind == "variable_name":
        return _text(node)
    if kind in ("word", "number"):
        raw = _text(node)
        if _EXPANDS.search(raw):
            return None  # a glob, a tilde, `{a,b}`: its value depends on the file system, the user, splitting
        return _unescape(raw)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        pieces = [c for c in node.named_children]
        if any(c.type != "string_content" for c in pieces):
            return None
        return "".join(_unescape_dq(_text(c)) for c in pieces)
    if kind == "concatenation":
        if _EXPANDS.search(_text(node)):
            return None  # `rm{,}`: the grammar splits a brace expansion into words; bash expands it
        values = [_value(c) for c in node.named_children]
        return None if any(v is None for v in values) else "".join(v for v in values if v is not None)
    if kind == "variable_assignment":
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        rhs = "" if value is None else _value(value)
        return None if name is None or rhs is None else f"{_text(name)}={rhs}"
    return None


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


def _unescape_dq(raw: str) -> str:
    """Inside double quotes a backslash escapes only `$`, backquote, `"`, `\\` and a newline."""
    if "\\" not in raw:
        return raw
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw) and raw[i + 1] in '$`"\\\n':
            out.append("" if raw[i + 1] == "\n" else raw[i + 1])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)
