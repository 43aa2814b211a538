"""pytest fixtures for the emulators (TESTING.md §3.1): `emulator` (Anthropic) and `openai_emulator`.

Loaded by `tests/conftest.py` through `pytest_plugins = ["tests.emulator_fixtures"]`. Each fixture is
function-scoped, starts an emulator on 127.0.0.1 with an empty script and a fresh `ManualClock`, and at
teardown calls `emu.check()` (failing the test on unexpected 400s, an exhausted script, unused answers or
failed `expect` predicates) and then stops it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentd.testing.emulator import Emulator, ManualClock


def _serve(api: str) -> Iterator[Emulator]:
    emu = Emulator(api=api, clock=ManualClock())
    emu.start()
    try:
        yield emu
        emu.check()
    finally:
        emu.stop()


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    """A started Anthropic Messages API emulator; script it with `emulator.script(...)`."""
    yield from _serve("anthropic")


@pytest.fixture
def openai_emulator() -> Iterator[Emulator]:
    """A started OpenAI-compatible emulator (base URL for the SDK: `openai_emulator.url + "/v1"`)."""
    yield from _serve("openai")
