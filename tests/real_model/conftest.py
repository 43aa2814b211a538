"""Fixtures of the real-model tier (TESTING.md §1.7): the assembled model, llama-server and the validating proxy,
one per module (loading the model is the slow part). A missing prerequisite is a skip, or a failure under
AGENTD_TEST_STRICT=1."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_model.assemble import CACHE, MODEL_FILE
from tests.real_model.harness import LlamaServer, ValidatingProxy, server_binary

STRICT = os.environ.get("AGENTD_TEST_STRICT") == "1"


def missing(what: str) -> None:
    if STRICT:
        pytest.fail(f"{what} (AGENTD_TEST_STRICT=1: a missing prerequisite is a failure)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    model = CACHE / "models" / MODEL_FILE
    binary = server_binary()
    if binary is None or not model.is_file():
        missing(f"llama-server or {model} is missing: run `bash .ci/setup-real-model.sh`")
    assert binary is not None
    server = LlamaServer(binary, model, tmp_path_factory.mktemp("llama") / "server.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def proxy(llama: LlamaServer) -> Iterator[tuple[ValidatingProxy, str]]:
    p = ValidatingProxy(llama.url)
    url = p.start()
    try:
        yield p, url
    finally:
        p.stop()


@pytest.fixture
def real_project() -> Path:
    project = CACHE / "real-project" / "idna-3.10"
    if not (project / ".complete").exists():
        missing(f"{project} is missing: run `bash .ci/fetch-real-project.sh`")
    return project
