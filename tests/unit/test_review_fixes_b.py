"""Review fixes (batch B): one clear line instead of a traceback for a bad emulator scenario, a bad scripted
scenario, wrongly typed config files and a data dir that is not a folder; unique generated OpenAI tool ids;
self-explanatory warnings for ignored workspace keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentd.config import load_settings
from agentd.errors import ConfigError
from agentd.persistence.paths import resolve_data_dir
from agentd.providers.base import ModelRequest
from agentd.providers.openai_compat import OpenAICompatProvider
from agentd.providers.scripted import load_scenario
from agentd.testing.emulator.__main__ import main as emulator_main

DEEP_JSON = "[" * 100_000 + "]" * 100_000


# ---------------------------------------------------------------- 3. the emulator's --scenario


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"answers": [', "not valid JSON (line 1 column 14: Expecting value)"),
        (b"\xff{}", "not valid UTF-8 (byte 0)"),
        (DEEP_JSON.encode(), "JSON nested too deeply"),
        (b'{"answers": 3}', "'answers' must be a list of answers, got 3"),
        (b'{"answers": [{"reply": 3}]}', "answer 1 has a reply that is neither a list nor a string: 3"),
        (b'[{"reply": [{"tool_use": 5}]}]', "tool_use 5 must be an object with a string 'name'"),
        (b'{"answers": [], "zz": 1}', "unknown keys ['zz']"),
    ],
)
def test_emulator_bad_scenario_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, problem: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    code = emulator_main(["--scenario", str(path)])
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", f"python -m agentd.testing.emulator: scenario {path}: {problem}\n")


def test_emulator_missing_scenario_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "missing.json"
    code = emulator_main(["--scenario", str(path)])
    assert (code, capsys.readouterr().err) == (
        2,
        f"python -m agentd.testing.emulator: scenario {path}: cannot read it (No such file or directory)\n",
    )


# ---------------------------------------------------------------- 4. the scripted provider's scenario file


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"answers": [{"reply": "\xff"}]}', "not valid UTF-8 (byte 24); save the file as UTF-8 JSON"),
        (DEEP_JSON.encode(), "JSON nested too deeply to read; flatten it"),
    ],
)
def test_scripted_scenario_bad_bytes_or_depth_is_a_config_error(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "scenario.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert (err.value.message, err.value.exit_code) == (f"scenario {path}: {problem}", 2)


# ---------------------------------------------------------------- 5. wrongly typed config files


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "user-config"
    d.mkdir()
    monkeypatch.setenv("AGENTD_CONFIG_DIR", str(d))
    return d


def _workspace_file(tmp_path: Path, content: bytes) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    path = ws / ".agentd" / "config.toml"
    path.write_bytes(content)
    return ws, path


NOT_A_TABLE = "permissions: Input should be a valid dictionary or instance of PermissionSettings"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"permissions = 3\n", f"{NOT_A_TABLE}; fix that key or remove it"),
        (b'permissions = "ab"\n', f"{NOT_A_TABLE}; fix that key or remove it"),
        (b"permissions = [1, 2]\n", f"{NOT_A_TABLE}; fix that key or remove it"),
        (
            b'permissions.rules = "ab"\n',
            "permissions.rules: Input should be a valid list; fix that key or remove it",
        ),
        (b'model = "\xff"\n', "not valid UTF-8 (byte 9); save it as UTF-8 or remove it"),
        (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply to read; fix or remove the file"),
    ],
)
def test_wrongly_typed_workspace_config_is_a_config_error(
    tmp_path: Path, user_dir: Path, content: bytes, problem: str
) -> None:
    ws, path = _workspace_file(tmp_path, content)
    with pytest.raises(ConfigError) as err:
        load_settings(ws)
    assert (err.value.message, err.value.exit_code) == (f"{path}: {problem}", 2)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'model = "\xff"\n', "not valid UTF-8 (byte 9); save it as UTF-8 or remove it"),
        (
            b"x = " + b"{a = " * 3000 + b"1" + b"}" * 3000 + b"\n",
            "nested too deeply to read; fix or remove the file",
        ),
    ],
)
def test_unreadable_user_config_is_a_config_error(
    tmp_path: Path, user_dir: Path, content: bytes, problem: str
) -> None:
    path = user_dir / "config.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_settings(None)
    assert err.value.message == f"{path}: {problem}"


# ---------------------------------------------------------------- 8. warnings for ignored workspace keys


def test_each_ignored_workspace_key_is_one_self_explanatory_line(tmp_path: Path, user_dir: Path) -> None:
    ws, path = _workspace_file(
        tmp_path,
        b'baseUrl = "http://x"\n[permissions]\ndefaultMode = "acceptEdits"\n'
        b'[[permissions.rules]]\ntool = "run_command"\naction = "allow"\n'
        b'[[permissions.rules]]\ntool = "write_file"\naction = "deny"\n',
    )
    warnings: list[str] = []
    settings = load_settings(ws, warnings=warnings)
    why = "a workspace config comes with the code it sits in"
    instead = f"set it in your user config ({user_dir / 'config.toml'}) or in the editor's settings instead"
    assert warnings == [
        f"{path}: 'baseUrl' ignored: {why}, so it may not choose the provider, its URL or the variable holding "
        f"its API key; {instead}",
        f"{path}: permissions.defaultMode = 'acceptEdits' ignored: {why}, so it may not turn on automatic "
        f"approval of edits; {instead}",
        f"{path}: permissions.rules[0] (tool 'run_command', action 'allow') ignored: {why}, so it may add 'ask' "
        f"and 'deny' rules only; {instead}",
    ]
    assert all("\n" not in w for w in warnings)
    assert (settings.base_url, settings.permissions.default_mode, len(settings.permissions.rules)) == (
        None,
        "default",
        1,
    )


# ---------------------------------------------------------------- 6. a data dir that is not a folder


def test_data_dir_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    fix = "pass --data-dir DIR (or set AGENTD_DATA_DIR) naming a folder agentd can create and write"
    with pytest.raises(ConfigError) as err:
        resolve_data_dir(str(path))
    assert (err.value.message, err.value.exit_code) == (
        f"data dir {path} (--data-dir) is not a directory; {fix}",
        2,
    )
    with pytest.raises(ConfigError) as below:
        resolve_data_dir(str(path / "sub" / "dir"))
    assert below.value.message == (
        f"data dir {path / 'sub' / 'dir'} (--data-dir) cannot be created: {path} is not a directory; {fix}"
    )


def test_data_dir_from_the_environment_names_its_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    monkeypatch.setenv("AGENTD_DATA_DIR", str(path))
    with pytest.raises(ConfigError) as err:
        resolve_data_dir(None)
    assert err.value.message.startswith(f"data dir {path} ($AGENTD_DATA_DIR) is not a directory; ")
    assert resolve_data_dir(str(tmp_path / "new" / "data")) == tmp_path / "new" / "data"


# ---------------------------------------------------------------- 7. generated OpenAI tool ids


class _Chunk:
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def to_dict(self) -> dict[str, Any]:
        return self._data


class _Stream:
    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self._chunks = chunks

    async def __aenter__(self) -> _Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def _gen(self) -> AsyncIterator[_Chunk]:
        for chunk in self._chunks:
            yield _Chunk(chunk)

    def __aiter__(self) -> AsyncIterator[_Chunk]:
        return self._gen()


def _reply_without_ids() -> list[dict[str, Any]]:
    """Two tool calls that carry no `id` (as some local servers send them), then the finish."""
    calls = [
        {"index": i, "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "{p}"}}'}}
        for i, p in enumerate(["a", "b"])
    ]
    return [
        {"id": "chatcmpl-1", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": calls}}]},
        {
            "id": "chatcmpl-1",
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        },
    ]


async def test_generated_tool_ids_are_unique_across_replies_of_one_provider() -> None:
    async def create(**body: Any) -> _Stream:
        return _Stream(_reply_without_ids())

    provider = OpenAICompatProvider("m", "not-needed", base_url="http://127.0.0.1:9/v1")
    provider._client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    tools = [{"name": "read_file", "description": "Read.", "input_schema": {"type": "object"}}]
    request = ModelRequest(
        model="m",
        system=[],
        tools=tools,
        messages=[{"role": "user", "content": [{"type": "text", "text": "go"}]}],
        max_tokens=64,
    )
    ids = []
    for _ in range(2):
        response = await provider.stream(request, lambda e: None)
        ids += [b["id"] for b in response.content if b["type"] == "tool_use"]
    prefix = provider.text_call_prefix
    assert ids == [
        f"call_gen_{prefix}_1",
        f"call_gen_{prefix}_2",
        f"call_gen_{prefix}_3",
        f"call_gen_{prefix}_4",
    ]
