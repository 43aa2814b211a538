"""The editor clients' generated protocol files are current (PROTOCOL.md §13), and the generator itself
turns the JSON Schema export into the TypeScript and Lua it promises."""

from __future__ import annotations

import json

import pytest

from agentd.protocol import methods, schema


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
