"""Layered configuration (PROTOCOL.md §4.3): one pydantic model validates every source.

Layers, lowest first: defaults < user `config.toml` (platformdirs user config dir, or `AGENTD_CONFIG_DIR`)
< workspace `.agentd/config.toml` (restricted) < editor `initializationOptions` (camelCase) < CLI flags.
A workspace file comes with the code it sits in, so it may not set `provider`, `base_url`, `api_key_env`,
`allow` rules or `permissions.default_mode = "acceptEdits"`; those are dropped with a warning.
A later layer replaces a key, except `permissions.rules` and `sandbox.hide`, which add up (`ADDITIVE`).
Invalid values in editor options fall back to their default with a warning (never a crash); invalid values
in a file stop with a `ConfigError` naming the file and key.
"""

from __future__ import annotations

import difflib
import os
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from agentd.errors import ConfigError
from agentd.mcpnames import SERVER, SERVER_MAX
from agentd.safe_read import UnsafeFile, read_regular


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Retries(_Section):
    max_total_s: float = Field(60.0, gt=0, alias="maxTotalS")
    request_timeout_s: float = Field(600.0, gt=0, alias="requestTimeoutS")
    read_timeout_s: float = Field(300.0, gt=0, alias="readTimeoutS")


class ContextSettings(_Section):
    window_tokens: int | None = Field(None, gt=0, alias="windowTokens")
    compress_threshold_tokens: int | None = Field(None, gt=0, alias="compressThresholdTokens")
    keep_recent_messages: int = Field(8, ge=2, alias="keepRecentMessages")
    summary_max_tokens: int = Field(512, gt=0, alias="summaryMaxTokens")


class CacheSettings(_Section):
    ttl: Literal["auto", "5m", "1h"] = "auto"  # the TTL policy of agentd.core.breakpoints


class TodoSettings(_Section):
    max_items: int = Field(50, gt=0, alias="maxItems")
    stale_rounds: int = Field(3, ge=0, alias="staleRounds")


class ToolSettings(_Section):
    read_max_bytes: int = Field(262144, gt=0, alias="readMaxBytes")
    run_timeout_s: float = Field(120.0, gt=0, alias="runTimeoutS")
    output_max_bytes: int = Field(32768, gt=0, alias="outputMaxBytes")
    terse_descriptions: bool = Field(False, alias="terseDescriptions")


class StoreSettings(_Section):
    blob_min_bytes: int = Field(262144, gt=0, alias="blobMinBytes")


class CheckpointSettings(_Section):
    """`[checkpoints]` (issue 13; docs/checkpoints.md): the workspace before each prompt and `run_command`."""

    enabled: bool = True
    max_file_bytes: int = Field(10 * 1024 * 1024, gt=0, alias="maxFileBytes")


class RuleSetting(_Section):
    """`{tool, action, network?}`: `tool` is a tool name or `tool(pattern)` (agentd.permissions.rules)."""

    tool: str
    action: Literal["allow", "ask", "deny"]
    network: bool = False

    @field_validator("tool")
    @classmethod
    def _target(cls, value: str) -> str:
        from agentd.permissions.rules import parse_target

        parse_target(value)  # ValueError names the form to use
        return value.strip()


class PermissionSettings(_Section):
    rules: list[RuleSetting] = Field(default_factory=list)
    default_mode: Literal["default", "acceptEdits", "readOnly", "auto"] = Field(
        "default", alias="defaultMode"
    )
    approval_timeout_s: int = Field(120, gt=0, alias="approvalTimeoutS")


class SandboxSettings(_Section):
    """`[sandbox]` (issue 12; docs/security.md). `sandbox = "required"` is short for `[sandbox] mode = ...`."""

    mode: Literal["auto", "required", "off"] = "auto"
    network: bool = False
    writable: list[str] = Field(default_factory=list)
    readable: list[str] = Field(
        default_factory=list
    )  # shown read-only even under /tmp, /run (docs/security.md)
    hide: list[str] = Field(default_factory=list)
    pass_env: list[str] = Field(default_factory=list, alias="passEnv")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"mode": data} if isinstance(data, str) else data


class HookSetting(_Section):
    """One `[[hooks.<point>]]` entry (issue 12 §4; docs/hooks.md)."""

    command: str = Field(min_length=1)
    name: str | None = None
    matcher: str | None = None
    timeout_s: float = Field(10.0, gt=0, alias="timeoutS")

    @field_validator("matcher")
    @classmethod
    def _matcher(cls, value: str | None) -> str | None:
        if value not in (None, "", "*"):
            from agentd.permissions.rules import parse_target

            parse_target(value)
        return value


class HooksSettings(_Section):
    """`[[hooks.before_tool]]`, `after_tool`, `before_model`, `turn_end`: commands run at those points."""

    before_tool: list[HookSetting] = Field(default_factory=list, alias="beforeTool")
    after_tool: list[HookSetting] = Field(default_factory=list, alias="afterTool")
    before_model: list[HookSetting] = Field(default_factory=list, alias="beforeModel")
    turn_end: list[HookSetting] = Field(default_factory=list, alias="turnEnd")

    def any(self) -> bool:
        return bool(self.before_tool or self.after_tool or self.before_model or self.turn_end)


MCP_NAME = rf"^{SERVER}$"  # agentd.mcpnames owns the rule (break11)
SECRET_ENV_NAMES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")


class MCPServerSettings(_Section):
    """One `[mcp.servers.NAME]` table: a stdio server (`command`, `args`, `env`) or a Streamable HTTP one
    (`url`, `headers`). `env` is all the environment the server gets besides HOME, LOGNAME, PATH, SHELL,
    TERM and USER (the MCP SDK's safe defaults); `timeout_s`: per call (default `tools.run_timeout_s`).
    `sandbox`: a stdio server runs inside the session's sandbox when it is active (false: outside, which
    `sandbox = "required"` refuses); `network`: inside it, the server may use the network."""

    command: str | None = Field(None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float | None = Field(None, gt=0, alias="timeoutS")
    sandbox: bool = True  # a stdio server runs inside the sandbox when it is active (docs/mcp.md)
    network: bool = False  # inside the sandbox: it may use the network

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either command (a stdio server) or url (Streamable HTTP), not both or neither"
            )
        return self


class MCPSettings(_Section):
    servers: dict[
        Annotated[str, StringConstraints(pattern=MCP_NAME, max_length=SERVER_MAX)], MCPServerSettings
    ] = Field(default_factory=dict)
    start_timeout_s: float = Field(30.0, gt=0, alias="startTimeoutS")
    # bytes agentd accepts from a server in one message (a tool result); larger ones are an error result
    max_message_bytes: int = Field(16 << 20, ge=1 << 16, alias="maxMessageBytes")


class OpenAISettings(_Section):
    temperature: float | None = None
    seed: int | None = None
    reminder_role: Literal["system", "user"] = Field("system", alias="reminderRole")


class Settings(_Section):
    """Every setting of PROTOCOL.md §4.3. Field names are the `config.toml` keys; aliases the camelCase
    `initializationOptions` keys. `model=None` means the provider's default model."""

    provider: Literal["anthropic", "openai", "scripted"] = "anthropic"
    model: str | None = None
    base_url: str | None = Field(None, alias="baseUrl")
    api_key_env: str | None = Field(None, alias="apiKeyEnv")
    scenario: str | None = None
    max_output_tokens: int = Field(8192, gt=0, alias="maxOutputTokens")
    max_turn_requests: int = Field(50, gt=0, alias="maxTurnRequests")
    prompt_caching: bool = Field(True, alias="promptCaching")
    images: bool | None = (
        None  # prompts may carry images; None: the model table decides (providers/models.py)
    )
    retries: Retries = Field(default_factory=Retries)  # type: ignore[arg-type]
    cache: CacheSettings = Field(default_factory=CacheSettings)  # type: ignore[arg-type]
    context: ContextSettings = Field(default_factory=ContextSettings)  # type: ignore[arg-type]
    todos: TodoSettings = Field(default_factory=TodoSettings)  # type: ignore[arg-type]
    tools: ToolSettings = Field(default_factory=ToolSettings)  # type: ignore[arg-type]
    store: StoreSettings = Field(default_factory=StoreSettings)  # type: ignore[arg-type]
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)  # type: ignore[arg-type]
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)  # type: ignore[arg-type]
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)  # type: ignore[arg-type]
    hooks: HooksSettings = Field(default_factory=HooksSettings)  # type: ignore[arg-type]
    workspace_hooks: HooksSettings = Field(default_factory=HooksSettings, alias="workspaceHooks")  # type: ignore[arg-type]
    # the MCP servers a workspace file defines: started only once the user trusts it (issue 12 §5)
    workspace_mcp_servers: dict[
        Annotated[str, StringConstraints(pattern=MCP_NAME, max_length=SERVER_MAX)], MCPServerSettings
    ] = Field(default_factory=dict, alias="workspaceMcpServers")
    openai: OpenAISettings = Field(default_factory=OpenAISettings)  # type: ignore[arg-type]
    mcp: MCPSettings = Field(default_factory=MCPSettings)  # type: ignore[arg-type]
    auth_token: str | None = Field(None, alias="authToken")

    def accepts_images(self) -> bool:
        """Whether prompts may carry images: `images`, else the model table (`providers.models.accepts_images`)."""
        from agentd.providers.models import accepts_images

        return accepts_images(self.provider, self.model, self.images)

    def window_tokens(self, model_window: int) -> int:
        """`context.window_tokens`, else the model table's window (`model_window`, tokens)."""
        return self.context.window_tokens or model_window

    def compress_threshold(self, window: int) -> int:
        """`context.compress_threshold_tokens` (never above `window`), else 80 % of `window`, the session's
        window in tokens (`SessionParts.model_window`: configured, tabled or served; CONTRACTS.md §7)."""
        configured = self.context.compress_threshold_tokens
        return min(configured, window) if configured else int(window * 0.8)


WORKSPACE_FORBIDDEN = ("provider", "base_url", "api_key_env")
WORKSPACE_ONLY = ("workspace_hooks", "workspace_mcp_servers")  # set from a workspace file's hooks and servers


def known_tool_names() -> list[str]:
    """The built-in tool names, from the tool registry the composition root uses (todo_write first)."""
    from agentd.tools.registry import default_tools
    from agentd.tools.todo import TodoWrite

    return [TodoWrite.name, *(t.name for t in default_tools())]


def tool_name_problem(name: str) -> str | None:
    """None when `name` is a tool a rule (or `--allow`) can name: a built-in tool or `mcp__SERVER__TOOL`;
    else what is wrong, with a "did you mean" when a known name is close (H13). A pattern in parentheses
    (`run_command(npm test)`, issue 12) names the tool before it."""
    from agentd.permissions.rules import is_mcp_target, parse_target

    try:
        name = parse_target(name)[0]
    except ValueError as exc:
        return str(exc)
    known = known_tool_names()
    if name in known or is_mcp_target(name):
        return None
    hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    maybe = f"did you mean '{hint[0]}'? " if hint else ""
    return f"no tool is named '{name}' ({maybe}tools: {', '.join(known)}, or mcp__SERVER__TOOL)"


def user_config_path() -> Path:
    """The user `config.toml`: `$AGENTD_CONFIG_DIR/config.toml`, else platformdirs' user config dir."""
    override = os.environ.get("AGENTD_CONFIG_DIR")
    if override:
        return Path(override) / "config.toml"
    import platformdirs

    return Path(platformdirs.user_config_dir("agentd")) / "config.toml"


CONFIG_MAX_BYTES = 1 << 20


class UnsafeConfig(ConfigError):
    """A config file that may not be read (agentd.safe_read's rule: not a regular file, a link leading out
    of the workspace) or is larger than `CONFIG_MAX_BYTES`; `data["why"]` says which, without the path."""


def _read_toml(path: Path, root: Path | None = None) -> dict[str, Any]:
    """The TOML table of `path` ({} when absent). Read with `safe_read.read_regular` (a regular file, never
    blocking; with `root`, inside it and no link leading out) of at most `CONFIG_MAX_BYTES`. Raises
    `UnsafeConfig` for a file that may not be read, `ConfigError` for a bad one, each saying what to do."""
    try:
        data, size = read_regular(path, CONFIG_MAX_BYTES, root=root)
    except FileNotFoundError:
        return {}
    except UnsafeFile as exc:
        raise UnsafeConfig(
            f"{path}: {exc.strerror}; make it a regular file or remove it", why=exc.strerror
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc}); fix or remove the file") from exc
    if size > CONFIG_MAX_BYTES:
        why = f"larger than {CONFIG_MAX_BYTES} bytes ({size}); a config file is small"
        raise UnsafeConfig(f"{path}: {why}, fix it", why=why)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid UTF-8 (byte {exc.start}); save it as UTF-8 or remove it"
        ) from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read; fix or remove the file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or remove the file") from exc


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


ADDITIVE = (("permissions", "rules"), ("sandbox", "hide"))


def _merge_layer(below: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`layer` over `below` (both snake_case): a key of `layer` replaces the one below, except the lists of
    `ADDITIVE`, which add up across layers. So a rule, above all a deny, of any layer holds whatever a
    later layer says (rules decide deny > ask > allow whatever their order, agentd.permissions.rules), and
    a hidden path stays hidden: a later layer (the workspace file, or editor options a repository's
    `.vscode/settings.json` could feed) can add to them, never drop them."""
    merged = _merge(below, layer)
    for section, key in ADDITIVE:
        old, new = below.get(section), layer.get(section)
        if not (isinstance(old, dict) and isinstance(new, dict)):
            continue
        if isinstance(old.get(key), list) and isinstance(new.get(key), list):
            merged[section] = {**merged[section], key: [*old[key], *new[key]]}
    return merged


def _restrict_workspace(data: dict[str, Any], warnings: list[str], path: Path) -> dict[str, Any]:
    """Drop what a workspace file may not set, with one warning per dropped key (file, key, why, what to do).

    Wrongly typed sections are left as they are, for `_validate_file` to reject with the file and key."""
    raw = data
    data = _to_snake(data)  # `baseUrl` or `defaultMode` spellings must not slip past the checks below
    instead = f"set it in your user config ({user_config_path()}) or in the editor's settings instead"
    why = "a workspace config comes with the code it sits in"
    for key in WORKSPACE_FORBIDDEN:
        if key in data:
            data.pop(key)
            what = "choose the provider, its URL or the variable holding its API key"
            warnings.append(
                f"{path}: '{_spelled(raw, key, Settings)}' ignored: {why}, so it may not {what}; {instead}"
            )
    if isinstance(data.get("sandbox"), dict):
        data["sandbox"] = _restrict_sandbox(
            data["sandbox"], warnings, f"{path}: sandbox", f"{why}; {instead}"
        )
    if not isinstance(data.get("permissions"), dict):
        return data
    perms = dict(data["permissions"])
    mode = perms.get("default_mode")
    if mode in ("acceptEdits", "auto"):
        perms.pop("default_mode")
        warnings.append(
            f"{path}: permissions.{_spelled(raw.get('permissions'), 'default_mode', PermissionSettings)} = "
            f"{mode!r} ignored: {why}, so it may not turn on automatic approval of "
            f"{'edits' if mode == 'acceptEdits' else 'edits and commands'}; {instead}"
        )
    rules = perms.get("rules")
    if isinstance(rules, list):
        kept: list[Any] = []
        for i, rule in enumerate(rules):
            if isinstance(rule, dict) and rule.get("action") == "allow":
                warnings.append(
                    f"{path}: permissions.rules[{i}] (tool {rule.get('tool')!r}, action 'allow') ignored: "
                    f"{why}, so it may add 'ask' and 'deny' rules only; {instead}"
                )
            else:
                kept.append(rule)
        perms["rules"] = kept
    data["permissions"] = perms  # also when emptied: the original section must not survive
    return data


def _restrict_sandbox(section: dict[str, Any], warnings: list[str], where: str, why: str) -> dict[str, Any]:
    """A workspace may require the sandbox and hide more paths; it may not turn it off, open the network,
    add writable or readable paths or pass variables (issue 12 §5: tighten, never loosen)."""
    out = dict(section)
    if "mode" in out and out["mode"] != "required":
        warnings.append(
            f"{where}.mode = {out.pop('mode')!r} ignored: only 'required' may be set here ({why})"
        )
    for key, what in (("network", "open the network"), ("writable", "add writable paths"),
                      ("readable", "show private paths"), ("pass_env", "pass environment variables")):  # fmt: skip
        if key in out and out[key] not in (False, [], None):
            out.pop(key)
            warnings.append(f"{where}.{key} ignored: a workspace may not {what} to commands ({why})")
    return out


def _spelled(raw: Any, name: str, model: type[BaseModel]) -> str:
    """The key for field `name` as the file spells it: the field name, or its camelCase alias."""
    alias = model.model_fields[name].alias
    return alias if alias and isinstance(raw, dict) and alias in raw and name not in raw else name


def _to_snake(data: dict[str, Any]) -> dict[str, Any]:
    """Map camelCase editor keys to field names, recursively, using the models' aliases."""

    def conv(model: type[BaseModel], d: dict[str, Any]) -> dict[str, Any]:
        by_alias = {f.alias or n: n for n, f in model.model_fields.items()}
        out: dict[str, Any] = {}
        for k, v in d.items():
            name = by_alias.get(k, k)
            field = model.model_fields.get(name)
            ann = field.annotation if field else None
            if isinstance(v, dict) and isinstance(ann, type) and issubclass(ann, BaseModel):
                out[name] = conv(ann, v)
            else:
                out[name] = v
        return out

    if isinstance(data.get("sandbox"), str):  # `sandbox = "required"` is `[sandbox] mode = "required"`
        data = {**data, "sandbox": {"mode": data["sandbox"]}}
    return conv(Settings, data)


def _drop_unknown(
    data: dict[str, Any], where: str, warns: list[str], model: type[BaseModel] = Settings, prefix: str = ""
) -> dict[str, Any]:
    """`data` (snake_case keys) without the keys `model` does not know, one warning each with a "did you
    mean" when a known key is close (H13). Sections and rule entries are checked too."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            hint = difflib.get_close_matches(str(key), list(model.model_fields), n=1)
            maybe = f" (did you mean '{prefix}{hint[0]}'?)" if hint else ""
            warns.append(f"{where}: unknown key '{prefix}{key}' ignored{maybe}")
            continue
        ann = field.annotation
        entry = _entry_model(ann)
        if isinstance(value, dict) and isinstance(ann, type) and issubclass(ann, BaseModel):
            value = _drop_unknown(value, where, warns, ann, f"{prefix}{key}.")
        elif isinstance(value, dict) and entry is not None:  # a table of named entries: [mcp.servers.NAME]
            value = {
                name: _drop_unknown(v, where, warns, entry, f"{prefix}{key}.{name}.")
                if isinstance(v, dict)
                else v
                for name, v in value.items()
            }
        elif model is PermissionSettings and key == "rules" and isinstance(value, list):
            value = [
                _drop_unknown(r, where, warns, RuleSetting, f"{prefix}rules[{i}].")
                if isinstance(r, dict)
                else r
                for i, r in enumerate(value)
            ]
        out[key] = value
    return out


def _entry_model(ann: Any) -> type[BaseModel] | None:
    """The model of a `dict[str, Model]` field's entries (`mcp.servers`), else None."""
    args = typing.get_args(ann)
    value = args[1] if typing.get_origin(ann) is dict and len(args) == 2 else None
    return value if isinstance(value, type) and issubclass(value, BaseModel) else None


def _rule_warnings(data: dict[str, Any], where: str, warns: list[str]) -> None:
    """One warning per permission rule of this layer that names no tool: it would match nothing (H13)."""
    perms = data.get("permissions")
    rules = perms.get("rules") if isinstance(perms, dict) else None
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        tool = rule.get("tool") if isinstance(rule, dict) else None
        problem = tool_name_problem(tool) if isinstance(tool, str) else None
        if problem:
            warns.append(f"{where}: permissions.rules[{i}]: {problem}; this rule matches nothing")
    _matcher_warnings(data.get("hooks"), where, warns)


def _matcher_warnings(hooks: Any, where: str, warns: list[str]) -> None:
    """The same for a tool hook's `matcher` (break9, H13 class): a hook whose matcher names no tool never
    runs, so a `before_tool` hook meant to deny would block nothing."""
    for point in ("before_tool", "after_tool"):
        alias = HooksSettings.model_fields[point].alias or point
        entries = hooks.get(point, hooks.get(alias)) if isinstance(hooks, dict) else None
        for i, hook in enumerate(entries if isinstance(entries, list) else []):
            matcher = hook.get("matcher") if isinstance(hook, dict) else None
            problem = (
                tool_name_problem(matcher) if isinstance(matcher, str) and matcher not in ("", "*") else None
            )
            if problem:
                warns.append(f"{where}: hooks.{point}[{i}].matcher: {problem}; this hook never runs")


def _validate_file(data: dict[str, Any], path: Path) -> None:
    try:
        Settings.model_validate(data)
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to check; fix or remove the file") from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: {loc}: {first['msg']}; fix that key or remove it") from exc


def lenient_options(options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Editor `initializationOptions`: drop each invalid or unknown field with a warning (never raise).

    Returns `(valid snake_case overrides, warnings)`; warnings name the key, the value and the fallback.
    """
    warnings: list[str] = []
    data = _to_snake(options)
    data.pop("auth_token", None)
    for key in ("hooks", *WORKSPACE_ONLY):  # commands to run: only from config files (docs/hooks.md)
        if data.pop(key, None) is not None:
            warnings.append(
                f"initializationOptions.{key} ignored: hooks are read from config.toml files only."
            )
    for _ in range(64):
        try:
            Settings.model_validate(data)
            return data, warnings
        except ValidationError as exc:
            drops: set[tuple[str, ...]] = set()
            for err in exc.errors(include_url=False):  # all at once: list indexes still match the input
                loc = [str(p) for p in err["loc"]]
                warning, drop = _option_warning(err, loc)
                warnings.append(warning)
                drops.add(tuple(drop))
            for drop_loc in sorted(drops, key=_loc_order, reverse=True):  # later list entries first
                _drop(data, list(drop_loc))
    return {}, [*warnings, "initializationOptions could not be used; using defaults."]


def _option_warning(err: Any, loc: list[str]) -> tuple[str, list[str]]:
    """The warning for one validation error of the editor options, and the location to drop."""
    key, parent, default = _option_key(loc)
    if err["type"] == "extra_forbidden":
        known = [f.alias or n for n, f in parent.model_fields.items()] if parent else []
        known += [n for n, f in parent.model_fields.items() if f.alias] if parent else []
        hint = difflib.get_close_matches(loc[-1], known, n=1)
        where = key.rpartition(".")[0]
        suggestion = f" (did you mean '{where + '.' if where else ''}{hint[0]}'?)" if hint else ""
        return f"Unknown option '{key}' ignored{suggestion}.", loc
    item = next((k for k, p in enumerate(loc) if p.isdigit()), None)
    if item is not None:  # a bad list entry (a rule): the whole entry goes, never just one of its keys
        fallback = f"entry {'.'.join(key.split('.')[: item + 1])} ignored"
        loc = loc[: item + 1]
    else:
        fallback = "using the default" if default is None else f"using {default!r}"
    return f"initializationOptions.{key}: {err['msg']} (got {err.get('input')!r}); {fallback}.", loc


def _loc_order(loc: tuple[str, ...]) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in loc)


def _option_key(loc: list[str]) -> tuple[str, type[BaseModel] | None, Any]:
    """For an error location (field names): the dotted key as the editor spells it (camelCase aliases),
    the model that holds the last part (None inside lists) and that field's plain default (None if none)."""
    model: type[BaseModel] | None = Settings
    parent: type[BaseModel] | None = None
    default: Any = None
    parts: list[str] = []
    for part in loc:
        parent = model
        field = model.model_fields.get(part) if model is not None else None
        parts.append((field.alias or part) if field is not None else part)
        ann = field.annotation if field is not None else None
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        plain = field is not None and field.default_factory is None and model is None
        default = field.default if plain and field is not None else None
    return ".".join(parts), parent, default


def _drop(data: dict[str, Any], loc: list[str]) -> None:
    node: Any = data
    for part in loc[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return
    last = loc[-1]
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node.pop(int(last))
    if len(loc) > 1 and isinstance(node, (dict, list)) and not node:
        _drop(data, loc[:-1])


def load_settings(
    workspace: Path | None,
    *,
    editor_options: dict[str, Any] | None = None,
    cli: dict[str, Any] | None = None,
    warnings: list[str] | None = None,
) -> Settings:
    """Build the effective `Settings` for a workspace from every layer (PROTOCOL.md §4.3).

    `cli`: snake_case overrides from flags (None values are ignored). Raises `ConfigError` for a bad
    config file; editor options never raise (see `lenient_options`). Collected warnings are appended to
    `warnings` when given.
    """
    warns: list[str] = [] if warnings is None else warnings
    user_path = user_config_path()
    # one spelling per key (snake_case), so a later layer overrides instead of adding a twin
    user = _drop_unknown(_to_snake(_read_toml(user_path)), str(user_path), warns)
    _validate_file(user, user_path)
    _rule_warnings(user, str(user_path), warns)
    merged = {k: v for k, v in user.items() if k not in WORKSPACE_ONLY}  # only a workspace file sets those
    if workspace is not None:
        ws_path = workspace / ".agentd" / "config.toml"
        try:
            raw_ws = _read_toml(ws_path, root=workspace)
        except UnsafeConfig as exc:  # a bad workspace file is a warning; the other layers still apply
            warns.append(f"{ws_path}: {exc.data['why']}; it was not read")
            raw_ws = {}
        ws = _drop_unknown(_restrict_workspace(raw_ws, warns, ws_path), str(ws_path), warns)
        _validate_file(ws, ws_path)
        _rule_warnings(_to_snake(raw_ws), str(ws_path), warns)  # indexes as in the file
        if "hooks" in ws:  # a workspace's hooks run only once the user trusts it (issue 12 §5)
            ws["workspace_hooks"] = ws.pop("hooks")
        ws.pop("workspace_mcp_servers", None)
        if isinstance(ws.get("mcp"), dict) and "servers" in ws["mcp"]:  # its servers too
            ws["workspace_mcp_servers"] = ws["mcp"].pop("servers")
        merged = _merge_layer(merged, ws)
    if editor_options:
        opts, opt_warnings = lenient_options(editor_options)
        warns.extend(opt_warnings)
        _rule_warnings(opts, "initializationOptions", warns)
        merged = _merge_layer(merged, opts)
    if cli:
        merged = _merge_layer(merged, {k: v for k, v in cli.items() if v is not None})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"configuration: {loc}: {first['msg']}") from exc
