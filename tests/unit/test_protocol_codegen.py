"""The editor clients' generated protocol files are current (PROTOCOL.md §13), and the generator itself
turns the JSON Schema export into the TypeScript and Lua it promises."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import TypeAdapter

from agentd.protocol import methods, schema, updates


def test_committed_protocol_files_are_current() -> None:
    stale = [str(p.relative_to(schema.REPO)) for p in schema.stale()]
    assert stale == [], "regenerate with `python -m agentd.protocol.schema --write` and commit the result"


def test_check_exits_1_when_a_file_is_stale(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    ts = tmp_path / "protocol.ts"
    ts.write_text(schema.typescript() + "// edited by hand\n", encoding="utf-8")
    lua = tmp_path / "protocol.lua"
    lua.write_text(schema.lua(), encoding="utf-8")
    monkeypatch.setattr(schema, "REPO", tmp_path)
    monkeypatch.setattr(schema, "TS_PATH", ts)
    monkeypatch.setattr(schema, "LUA_PATH", lua)
    assert (schema.main(["--check"]), schema.stale()) == (1, [ts])
    assert (schema.main(["--write"]), schema.main(["--check"])) == (0, 0)


def test_every_method_of_the_table_is_a_constant_in_both_languages() -> None:
    ts, lua = schema.typescript(), schema.lua()
    missing = [m.name for m in methods.METHODS if f'"{m.name}",' not in ts or f'= "{m.name}",' not in lua]
    assert missing == []
    assert '  SessionRequestPermission: "agentd/session/requestPermission",' in ts
    assert '  session_set_mode = "agentd/session/setMode",' in lua


def test_request_maps_pair_params_with_results() -> None:
    ts = schema.typescript()
    assert '  "agentd/session/prompt": { params: PromptParams; result: PromptResult };' in ts
    assert '  "agentd/session/cancel": SessionIdParams;' in ts
    assert (
        '  "agentd/session/requestPermission": '
        "{ params: RequestPermissionParams; result: RequestPermissionResponse };" in ts
    )


def test_json_schema_types_map_to_typescript() -> None:
    cases = [
        ({"type": "string"}, False, "string"),
        ({"type": "integer"}, False, "number"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True, "string"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, False, "string | null"),
        ({"enum": ["a", "b"]}, False, '"a" | "b"'),
        ({"const": "plan"}, False, '"plan"'),
        ({"type": "array", "items": {"$ref": "#/$defs/TodoEntry"}}, False, "TodoEntry[]"),
        ({"type": "array", "items": {"enum": ["a", "b"]}}, False, '("a" | "b")[]'),
        ({"type": "object", "additionalProperties": True}, False, "Record<string, unknown>"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, False, "Record<string, number>"),
        ({}, False, "unknown"),
    ]
    assert [schema._ts_type(s, drop_null=d) for s, d, _ in cases] == [want for *_, want in cases]


def test_optional_fields_are_optional_and_never_null_required_ones_are_not() -> None:
    ts = schema.typescript()
    block = ts[ts.index("export interface SessionInfo {") :].split("}\n", 1)[0]
    assert block.splitlines()[1:] == [
        "  _meta?: Record<string, unknown>;",
        "  sessionId: string;",
        "  cwd: string;",
        "  title?: string;",
        "  updatedAt?: string;",
    ]


def test_json_schema_export_lists_models_aliases_methods_and_errors() -> None:
    doc = json.loads(json.dumps(schema.json_schema()))
    assert {"PromptParams", "RequestPermissionParams", "SessionStatus"} <= set(doc["$defs"])
    assert {"ContentBlock", "StopReason"} <= set(doc["x-aliases"])
    assert [m["name"] for m in doc["x-methods"]] == [m.name for m in methods.METHODS]
    assert doc["x-errors"]["SessionLocked"] == -32012


# ---- session updates (PROTOCOL.md §7.2) ----------------------------------------------------------------

_BUILT = [
    (updates.agent_message_chunk("msg_01", "Looking at"), updates.AgentMessageChunk),
    (updates.agent_message_chunk("msg_02", "Again", retracts="msg_01"), updates.AgentMessageChunk),
    (updates.tool_call("toolu_01", "Read CHANGELOG.md", "read", {"path": "CHANGELOG.md"}), updates.ToolCall),
    (updates.tool_call("toolu_09", "nope", "other", None, status="failed"), updates.ToolCall),
    (updates.tool_call_update("toolu_01", "in_progress"), updates.ToolCallUpdate),
    (
        updates.tool_call_update(
            "toolu_03",
            "completed",
            content=[
                {"type": "diff", "path": "/p/CHANGELOG.md", "oldText": None, "newText": "# Changelog\n"},
                {"type": "content", "content": {"type": "text", "text": "ok"}},
            ],
            rawOutput={"bytes": 12, "appliedVia": "disk"},
            locations=[{"path": "/p/CHANGELOG.md", "line": 1}],
            meta={"decision": "allow", "decidedBy": "user", "optionId": "allow_once", "durationMs": 12},
        ),
        updates.ToolCallUpdate,
    ),
    (
        updates.tool_call_update(
            "toolu_04",
            "failed",
            meta={"decision": "deny", "decidedBy": "cancel", "durationMs": 0, "cancelled": True},
        ),
        updates.ToolCallUpdate,
    ),
    (
        updates.tool_call(
            "toolu_05",
            "Write x",
            "edit",
            {"path": "x"},
            "completed",
            content=updates.tool_content({"path": "/p/x", "oldText": None, "newText": "x\n"}, "ok"),
            rawOutput={"bytes": 2},
            locations=[{"path": "/p/x", "line": 1}],
            meta={"decidedBy": "rule"},
        ),
        updates.ToolCall,
    ),
    (updates.agent_thought_chunk("msg_03", "Thinking"), updates.AgentThoughtChunk),
    (updates.user_message_chunk("msg_04", {"type": "text", "text": "Fix it"}), updates.UserMessageChunk),
    (updates.session_info_update("Fix it", None), updates.SessionInfoUpdate),
    (updates.current_mode_update("readOnly"), updates.CurrentModeUpdate),
    (
        updates.plan([{"content": "Fix the parser bug", "priority": "medium", "status": "completed"}], "{}"),
        updates.Plan,
    ),
    (updates.plan([], '{"todos":[]}'), updates.Plan),
    (updates.retry(1, 4.0, "Anthropic is unavailable (HTTP 529): Overloaded", 529), updates.Retry),
    (updates.retry(2, 0.5, "Anthropic stream failed (overloaded_error)"), updates.Retry),
    (
        updates.checkpoint("2", "prompt", 2, message_id="msg_1", files=12, changed=3, not_covered=1),
        updates.Checkpoint,
    ),
    (updates.checkpoint("2.1", "run_command", 2, error="OSError: disk full"), updates.Checkpoint),
    (
        updates.usage_update(
            12403,
            200000,
            0.1,
            {"inputTokens": 3, "outputTokens": 96, "cacheReadTokens": 12304, "cacheWriteTokens": 0},
        ),
        updates.UsageUpdate,
    ),
    (updates.usage_update(9000, 200000), updates.UsageUpdate),
]


@pytest.mark.parametrize(
    ("built", "model"), _BUILT, ids=[f"{m.__name__}-{i}" for i, (_, m) in enumerate(_BUILT)]
)
def test_every_builder_output_validates_against_its_model(built: dict[str, Any], model: type) -> None:
    parsed = TypeAdapter(updates.SessionUpdate).validate_python(built)
    assert type(parsed) is model
    assert parsed.wire() == {k: v for k, v in built.items() if v is not None} | (
        {"content": [{k: v for k, v in c.items() if v is not None} for c in built["content"]]}
        if "content" in built and isinstance(built["content"], list)
        else {}
    )


@pytest.mark.parametrize(
    ("built", "model"), _BUILT, ids=[f"{m.__name__}-{i}" for i, (_, m) in enumerate(_BUILT)]
)
def test_the_lsp_bridge_sends_the_core_update_unchanged(built: dict[str, Any], model: type) -> None:
    """Issue 10 Part 1: the core emits each update once, in its wire shape; the LSP adapter only frames it."""
    from agentd.adapters.lsp.bridge import SessionBridge

    sent: list[tuple[str, dict[str, Any]]] = []
    bridge = SessionBridge()
    bridge.conn = type("Conn", (), {"notify_update": lambda self, sid, u: sent.append((sid, u))})()  # type: ignore[assignment]
    bridge.session = type("S", (), {"id": "sess_1"})()  # type: ignore[assignment]
    bridge.emit(built)
    assert (
        sent == [("sess_1", built)]
        and type(TypeAdapter(updates.SessionUpdate).validate_python(built)) is model
    )
    if model is updates.AgentMessageChunk:
        assert built["messageId"] and "messageId" not in built.get("_meta", {}).get("agentd", {})
    if model is updates.UsageUpdate:
        assert {"used", "size"} <= set(built)


def _protocol_md_updates() -> list[dict[str, Any]]:
    text = (schema.REPO / "docs" / "design" / "PROTOCOL.md").read_text(encoding="utf-8")
    section = text[text.index("### 7.2 Variants") : text.index("### 7.3 Tool calls")]
    section += text[text.index("### 7.6 A complete turn") : text.index("## 8. Editor integration")]
    found = []
    for line in section.splitlines():
        start = line.find('{"sessionUpdate"')
        if start != -1 and line.rstrip().endswith("}"):  # one-line examples; the rest are json blocks
            found.append(json.loads(line[start:]))
    for block in re.findall(r"```json\n(\{\"sessionUpdate\".*?)```", section, re.S):
        found.append(json.loads(block))
    return found


def test_every_update_example_of_protocol_md_validates() -> None:
    examples = _protocol_md_updates()
    adapter = TypeAdapter(updates.SessionUpdate)
    kinds = {type(adapter.validate_python(e)).__name__ for e in examples}
    assert kinds == {
        "AgentMessageChunk", "AgentThoughtChunk", "UserMessageChunk", "ToolCall", "ToolCallUpdate", "Plan",
        "UsageUpdate", "SessionInfoUpdate", "CurrentModeUpdate", "Retry", "Checkpoint",
    }  # fmt: skip


def test_unknown_properties_and_meta_are_kept() -> None:
    u = updates.UsageUpdate.model_validate(
        {"sessionUpdate": "usage_update", "used": 1, "size": 2, "future": True, "_meta": {"agentd": {"x": 1}}}
    )
    assert u.wire() == {"sessionUpdate": "usage_update", "used": 1, "size": 2, "future": True,
                        "_meta": {"agentd": {"x": 1}}}  # fmt: skip


def test_typescript_types_the_update_union() -> None:
    ts = schema.typescript()
    assert "  update: SessionUpdate;" in ts
    union = next(ln for ln in ts.splitlines() if ln.startswith("export type SessionUpdate = "))
    assert union.split(" = ", 1)[1].rstrip(";").split(" | ") == [
        "AgentMessageChunk", "AgentThoughtChunk", "UserMessageChunk", "ToolCall", "ToolCallUpdate", "Plan",
        "UsageUpdate", "SessionInfoUpdate", "CurrentModeUpdate", "Retry", "Checkpoint",
    ]  # fmt: skip
    assert '  sessionUpdate: "tool_call_update";' in ts
    info = ts[ts.index("export interface SessionInfoUpdate {") :].split("}\n", 1)[0]
    assert "  title?: string | null;" in info  # null clears the title (x-nullable), unlike other optionals
    doc = schema.json_schema()
    assert doc["$defs"]["SessionNotification"]["properties"]["update"] == {"$ref": "#/$defs/SessionUpdate"}
    assert "SessionUpdate" in doc["$defs"]
    summary = ts[ts.index("export interface ToolCallSummary {") :].split("}\n", 1)[0]
    assert "  content?: ToolCallContent[];" in summary  # the §7.3 shapes in a permission request too


def test_permission_options_validate_and_the_prefix_option_replaces_the_whole_tool_grant() -> None:
    """PROTOCOL.md §6.10: "always" for a command with a prefix is the prefix rule, never every command;
    every option (and the §6.10 examples) validates against `PermissionOption`."""
    from agentd.protocol.approvals import PermissionOption, permission_options

    base = permission_options("write_file")
    assert [(o["optionId"], o["kind"]) for o in base] == [
        ("allow_once", "allow_once"), ("allow_always", "allow_always"), ("reject_once", "reject_once"),
        ("reject_always", "reject_always")]  # fmt: skip
    cmd = permission_options("run_command", prefix="npm test")
    assert [o["optionId"] for o in cmd] == [
        "allow_once",
        "allow_always_prefix",
        "reject_once",
        "reject_always",
    ]
    assert cmd[1] == {
        "optionId": "allow_always_prefix",
        "name": "Always allow `npm test` commands in this session",
        "kind": "allow_always",
        "_meta": {"agentd": {"rule": "run_command(npm test)", "prefix": "npm test"}},
    }
    text = (schema.REPO / "docs" / "design" / "PROTOCOL.md").read_text(encoding="utf-8")
    section = text[text.index("### 6.10") : text.index("### 6.11")]
    examples = [json.loads(m) for m in re.findall(r'```json\n\s*(\{"optionId".*?)\s*```', section, re.S)]
    assert examples == [cmd[1]]
    for o in [*base, *cmd, *examples]:
        assert PermissionOption.model_validate(o).wire() == o
