"""The Tool protocol, tool results, and the `invalid_arguments` text (CONTRACTS.md §2, §5, §11).

Owns: `Tool` (abstract base), `ToolContext`, `ToolOutput`, `format_validation_error`, `validate_input`.
Imports only pydantic, `agentd.text` (re-exports its `visible`), `agentd.tools.refusal` (re-exports
`PathRefused`) and `agentd.tools.workspace`; never a transport library.

A tool's input is a pydantic model with `extra="forbid"`; invalid input never reaches `run()` (the loop
validates first and answers the model with an `is_error` result naming each bad field).
"""

from __future__ import annotations

import abc
import copy
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from agentd.text import scrub_surrogates
from agentd.text import visible as visible  # re-exported; the escaping rule lives in agentd.text
from agentd.tools.refusal import PathRefused as PathRefused  # re-exported; owned by agentd.tools.refusal
from agentd.tools.workspace import Workspace

Effect = Literal["read", "write", "exec"]
# ACP ToolKind values (PROTOCOL.md §7.3).
ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]


class StrictInput(BaseModel):
    """Base of every tool input model: unknown keys are rejected (`extra="forbid"`)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class DocumentOverlay(Protocol):
    """Open editor buffers (LSP adapter, PROTOCOL.md §8; ACP adapter, §4.5). Optional; `None` in the CLI.
    An overlay that must ask the editor for a file's text (ACP `fs/read_text_file`) also defines
    `async fetch_text(path) -> str | None`, which the file tools await instead of `read_text`
    (`agentd.tools.fs.editor_buffer`)."""

    def read_text(self, path: Path) -> str | None:
        """The unsaved text of `path` if it is open in the editor, else None."""
        ...

    def open_paths(self) -> list[Path]:
        """Real paths of the documents open in the editor (the search tools check each for unsaved text)."""
        ...


class EditorBridge(Protocol):
    """Edits through the editor (LSP `workspace/applyEdit`, PROTOCOL.md §8.2; ACP `fs/write_text_file`, §4.5).
    Optional; `None` in the CLI."""

    async def apply_edit(
        self, path: Path, old_text: str | None, new_text: str, label: str = ""
    ) -> tuple[bool, str | None] | None:
        """None: `path` is not open in the editor, write to disk. `(True, note)`: applied in the buffer
        (`note`: text for the model, e.g. that it is not saved yet). `(False, reason)`: not applied."""
        ...

    def unsaved_paths(self) -> list[str]:
        """Paths with agentd edits applied in the editor but not saved to disk yet (PROTOCOL.md §8.2)."""
        ...


@dataclass
class ToolContext:
    """What a tool may use while it runs. One per session; never a module-level object.

    `root`: the workspace root (absolute, real path); `roots`: every allowed root, `root` first;
    `workspace`: the same roots pinned (held open) since they were set (`agentd.tools.workspace`, H18).
    `read_max_bytes`, `output_max_bytes` in bytes; `run_timeout_s` in seconds (PROTOCOL.md §4.3 `tools.*`).
    `env`: the child environment for `run_command` (provider API keys already removed by the factory).
    `state`: session-owned objects a tool may need (e.g. `"todos"`: the TodoTracker).
    `launcher`: the session's `agentd.sandbox.Launcher` for processes the model starts (None: no sandbox,
    the process-lifetime helper only).
    """

    root: Path
    roots: list[Path] = field(default_factory=list)
    workspace: Workspace = field(init=False, repr=False, compare=False)
    read_max_bytes: int = 262144
    output_max_bytes: int = 32768
    run_timeout_s: float = 120.0
    env: Mapping[str, str] = field(default_factory=dict)
    documents: DocumentOverlay | None = None
    editor: EditorBridge | None = None
    state: dict[str, Any] = field(default_factory=dict)
    launcher: Any = None

    def __post_init__(self) -> None:
        if not self.roots:
            self.roots = [self.root]

    def __setattr__(self, name: str, value: Any) -> None:
        """Setting `roots` pins them (H18): `workspace` holds each root open from now on; roots pinned
        before keep their pin."""
        super().__setattr__(name, value)
        if name == "roots" and value:
            super().__setattr__("workspace", Workspace(value, self.__dict__.get("workspace")))


@dataclass
class ToolOutput:
    """The outcome of one tool call.

    `content`: the text the model sees as the tool_result; `is_error`: the tool failed (the model's
    problem, not the operator's). For the editor: `title`, `locations` (`[{"path", "line"?}]`, 1-based),
    `diff` (`{"path", "oldText", "newText"}`) and `raw_output` (a short JSON-able summary). `images`:
    image blocks that follow the text in the tool_result (an MCP tool's pictures).
    """

    content: str
    is_error: bool = False
    title: str = ""
    locations: list[dict[str, Any]] = field(default_factory=list)
    diff: dict[str, Any] | None = None
    raw_output: dict[str, Any] | None = None
    images: list[dict[str, Any]] = field(default_factory=list)  # Messages API image blocks (MCP results)


@dataclass
class Preview:
    """What an approval request shows (CONTRACTS.md §5): the path and a unified diff for writes, the
    command line and cwd for commands. `summary` is one line of text. For a command, `sandboxed`: it would
    run inside the sandbox; `escalation`: what it asks beyond the sandbox (`network`, `outside the
    sandbox`), which the `auto` mode never grants without asking (issue 12)."""

    summary: str
    path: str | None = None
    diff: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    command: str | None = None
    cwd: str | None = None
    sandboxed: bool = False
    escalation: str | None = None

    def sandbox_note(self) -> str | None:
        """How a question about a command says where it runs: `asks for: outside the sandbox` (or
        `asks for: network`) when it asks for more than the sandbox, `runs in the sandbox` when it runs
        inside; None for what is no sandboxed command (an edit, an MCP call, no sandbox here). The one
        wording of every front end that asks (the terminal client, `agentd run`; new-user R2)."""
        if self.escalation:
            return f"asks for: {self.escalation}"
        return "runs in the sandbox" if self.sandboxed else None


class Tool(abc.ABC):
    """One tool. Subclasses set the class attributes and implement `run`.

    `name`: exact tool name (permission rules match it, CONTRACTS.md §5); `effect`: read/write/exec;
    `kind`: the ACP tool kind; `Input`: the strict pydantic input model whose `Field(description=...)`
    texts the model reads; `description` / `terse_description`: model-facing texts.

    Every subclass's `title()` is display text: its result passes through `visible(one_line=True)` (the
    base class wraps it, H20), so a path or command with bidi controls or invisible characters cannot make
    a title in an approval, the editor or a `[Tool]` line look like another.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("title")
        if own is not None and not getattr(own, "_visible", False):

            @functools.wraps(own)
            def title(self: Tool, args: Any) -> str:
                return visible(own(self, args), one_line=True)

            title._visible = True  # type: ignore[attr-defined]
            cls.title = title  # type: ignore[method-assign]

    name: ClassVar[str]
    description: ClassVar[str]
    terse_description: ClassVar[str] = ""
    effect: ClassVar[Effect]
    kind: ClassVar[ToolKind] = "other"
    Input: ClassVar[type[StrictInput]]

    def definition(self, terse: bool = False) -> dict[str, Any]:
        """The Messages API tool definition `{"name", "description", "input_schema"}`; deterministic bytes."""
        desc = self.terse_description if terse and self.terse_description else self.description
        return {"name": self.name, "description": desc, "input_schema": _schema(self.Input)}

    def title(self, args: Any) -> str:
        """A short human title for the editor (`Read src/app.py`)."""
        return self.name

    def validate(self, raw: Any, ctx: ToolContext) -> tuple[StrictInput | None, str | None]:
        """Validate a tool_use `input` for this session without running anything: `(args, None)` or
        `(None, "invalid_arguments: ...")`. The loop calls this, not `validate_input`, so a tool whose limits
        live in session state can apply them (todo_write: the tracker's `todos.max_items`).
        Default: `validate_input(self, raw)`."""
        return validate_input(self, raw)

    def check(self, args: Any, ctx: ToolContext) -> None:
        """Check path containment before the permission gate; raise `PathRefused`. Default: nothing."""
        return None

    async def preview(self, args: Any, ctx: ToolContext) -> Preview:
        """What an approval shows. Default: the tool name and its input as JSON."""
        return Preview(summary=f"{self.name} {json.dumps(args.model_dump(), ensure_ascii=False)}")

    @abc.abstractmethod
    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        """Run with validated `args`. Raise `PathRefused` for a path refused at open time. Cancellation is
        asyncio cancellation; a tool that starts processes must kill them on `CancelledError`."""


_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The input schema of `model`, generated once per class (pydantic takes ~2 ms a tool, on the event loop
    at every session start: issue 16); a fresh copy per call."""
    cached = _SCHEMAS.get(model)
    if cached is None:
        cached = model.model_json_schema()
        cached.pop("title", None)
        for prop in cached.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        _SCHEMAS[model] = cached
    return copy.deepcopy(cached)


def _loc(loc: Sequence[int | str]) -> str:
    return ".".join(str(p) for p in loc) if loc else "input"


def _problem(err: Mapping[str, Any]) -> str:
    etype = err.get("type", "")
    ctx = err.get("ctx") or {}
    if etype == "extra_forbidden":
        return "unknown key"
    if etype == "missing":
        return "required"
    if etype == "literal_error":
        expected = str(ctx.get("expected", ""))
        options = [o.strip().strip("'\"") for o in expected.replace(" or ", ", ").split(",") if o.strip()]
        return "must be one of " + ", ".join(options)
    if etype in ("string_type", "string_sub_type"):
        return "must be a string"
    if etype in ("int_type", "int_parsing", "int_from_float"):
        return "must be an integer"
    if etype in ("bool_type", "bool_parsing"):
        return "must be true or false"
    if etype in ("list_type",):
        return "must be a list"
    if etype in ("dict_type", "model_type", "model_attributes_type"):
        return "must be an object"
    if etype == "too_long":
        return f"at most {ctx.get('max_length')} items"
    if etype == "too_short":
        return f"at least {ctx.get('min_length')} items"
    if etype == "string_too_short":
        return "must not be empty"
    if etype == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if etype == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if etype == "greater_than":
        return f"must be > {ctx.get('gt')}"
    if etype == "value_error":
        return str(ctx.get("error", err.get("msg", "invalid value")))
    return str(err.get("msg", "invalid value")).lower()


def format_validation_error(exc: ValidationError) -> str:
    """`invalid_arguments: <loc>: <problem>; <loc>: <problem>` (CONTRACTS.md §11), one part per field.

    `<loc>` is dotted (`todos.1.status`); an input that is not an object gives `input: must be an object`.
    """
    parts = [f"{_loc(e['loc'])}: {_problem(e)}" for e in exc.errors(include_url=False)]
    return "invalid_arguments: " + "; ".join(parts)


def validate_input(tool: Tool, raw: Any) -> tuple[StrictInput | None, str | None]:
    """Validate a tool_use `input` against `tool.Input`. Returns `(args, None)` or `(None, error_text)`."""
    try:
        return tool.Input.model_validate(raw), None
    except ValidationError as exc:
        return None, format_validation_error(exc)


def truncation_marker(omitted: int, total: int) -> str:
    """CONTRACTS.md §11: `\\n[... <omitted> of <total> bytes omitted ...]\\n` (counts in bytes)."""
    return f"\n[... {omitted} of {total} bytes omitted ...]\n"


def model_text(text: str, *, secrets: Sequence[str] = (), max_bytes: int = 0) -> str:
    """A tool result as the model may see it (CONTRACTS.md §10, §11; cases C07):
    lone surrogates (undecodable file names) become U+FFFD, so the request can always be encoded; every
    known secret value (the API key, which a command could print from /proc) becomes `[redacted]`; text over
    `max_bytes` (0: no cap) keeps its head and tail around the truncation marker, with the size stated."""
    text = scrub_surrogates(text)
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "[redacted]")
    data = text.encode("utf-8")
    if max_bytes and len(data) > max_bytes:
        half = max_bytes // 2
        head = data[:half].decode("utf-8", "ignore")
        tail = data[len(data) - half :].decode("utf-8", "ignore")
        omitted = len(data) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
        text = head + truncation_marker(omitted, len(data)) + tail
    return text
