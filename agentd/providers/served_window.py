"""The context window an OpenAI-compatible server actually serves (issue 17: "know the window").

Owns: `served_window(base_url, model, api_key)` -> `Served | None` and the per-server rules below. Uses only the
standard library (urllib, in a thread); must not import the core, an SDK or an adapter.

A local server's window is set when it starts (llama.cpp `-c`, Ollama `num_ctx`, vLLM `--max-model-len`), is
usually far below the model's training length, and is a hard limit: a longer prompt is refused ("exceeds the
available context size"). Asked once per provider, in this order, each probe's failure moving to the next:
1. `GET /v1/models`: vLLM's `max_model_len` on the model's entry (also LM Studio's `loaded_context_length`).
2. `GET /props` (llama.cpp server): `default_generation_settings.n_ctx` (the per-slot context: what one
   request may use), else top-level `n_ctx`.
3. `POST /api/show {"model"}` (Ollama): `num_ctx` in `parameters`; else `GET /api/ps`'s `context_length` for the
   loaded model; else Ollama's default of 4096 tokens (the model's `context_length` in `model_info` is its
   training length, which Ollama does not serve unless `num_ctx` says so).
4. `GET /api/v0/models/<model>` (LM Studio): `loaded_context_length`, else `max_context_length`.
api.openai.com is never asked (its windows are in `agentd.providers.models`). Each probe has a short timeout
(`PROBE_TIMEOUT_S`, for the whole answer, not only between bytes), all of them together `PROBE_TOTAL_S`; an
answer over `MAX_BODY_BYTES`, not JSON or nested too deeply counts as no answer; nothing found gives None and the
configured or tabled window stands.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

log = logging.getLogger("agentd.providers.window")

PROBE_TIMEOUT_S = 5.0  # one probe (each socket operation and its whole answer)
PROBE_TOTAL_S = 8.0  # all probes together
MAX_BODY_BYTES = 1 << 20  # a larger answer is not one of these small JSON documents
OLLAMA_DEFAULT_NUM_CTX = 4096
_OLLAMA_SHOW_KEYS = {
    "modelfile",
    "parameters",
    "template",
    "details",
    "model_info",
}  # Ollama's /api/show answer


@dataclass(frozen=True)
class Served:
    """A served window: `tokens` and where it was read (`source`, e.g. "llama.cpp /props n_ctx")."""

    tokens: int
    source: str


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def server_root(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (the root the non-OpenAI endpoints hang from)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def from_models(data: Any, model: str) -> Served | None:
    """vLLM / LM Studio: the window on the model's entry of a `/v1/models` list (the only entry also counts)."""
    entries = (
        [e for e in (data or {}).get("data") or [] if isinstance(e, dict)] if isinstance(data, dict) else []
    )
    mine = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in mine:
        for key in ("max_model_len", "loaded_context_length"):
            if _int(entry.get(key)):
                return Served(int(entry[key]), f"/v1/models {key}")
    return None


def from_props(data: Any) -> Served | None:
    """llama.cpp server `/props`: the per-slot `n_ctx` of `default_generation_settings`, else `n_ctx`."""
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if n_ctx:
        return Served(n_ctx, "llama.cpp /props default_generation_settings.n_ctx")
    return Served(int(data["n_ctx"]), "llama.cpp /props n_ctx") if _int(data.get("n_ctx")) else None


def from_ollama(show: Any, ps: Any, model: str) -> Served | None:
    """Ollama: `num_ctx` from `/api/show` parameters, else the loaded model's `context_length` in `/api/ps`,
    else Ollama's default (4096) when `/api/show` answered as Ollama does (one of `_OLLAMA_SHOW_KEYS`: a 200 with
    other JSON, from a gateway that answers every path, says nothing about the window)."""
    if not isinstance(show, dict) or not _OLLAMA_SHOW_KEYS & show.keys():
        return None
    for line in str(show.get("parameters") or "").splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            return Served(int(value.strip()), "Ollama /api/show num_ctx")
    for entry in (ps or {}).get("models") or [] if isinstance(ps, dict) else []:
        if (
            isinstance(entry, dict)
            and entry.get("name") in (model, f"{model}:latest")
            and _int(entry.get("context_length"))
        ):
            return Served(int(entry["context_length"]), "Ollama /api/ps context_length")
    return Served(OLLAMA_DEFAULT_NUM_CTX, "Ollama default num_ctx")


def from_lmstudio(data: Any) -> Served | None:
    """LM Studio `/api/v0/models/<model>`: `loaded_context_length`, else `max_context_length`."""
    if not isinstance(data, dict):
        return None
    for key in ("loaded_context_length", "max_context_length"):
        if _int(data.get(key)):
            return Served(int(data[key]), f"LM Studio {key}")
    return None


def _fetch(url: str, headers: dict[str, str], body: Any = None, deadline: float | None = None) -> Any:
    """One probe: the decoded JSON of a 200 answer, else None (any error, status, non-JSON or oversized body,
    or the `deadline` (time.monotonic()) passed while the body trickled in)."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S if deadline is None else deadline
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=min(PROBE_TIMEOUT_S, remaining)) as r:
            if r.status != 200:
                return None
            got = bytearray()
            while len(got) <= MAX_BODY_BYTES:
                if time.monotonic() > deadline:
                    raise TimeoutError("the answer did not arrive in time")
                chunk = r.read1(65536)
                if not chunk:
                    return json.loads(got)
                got += chunk
            raise ValueError(f"an answer over {MAX_BODY_BYTES} bytes")
    except (OSError, ValueError, RecursionError, http.client.HTTPException) as exc:  # URLError: an OSError
        log.debug("window probe %s: %s", url, exc)
        return None


def probe(base_url: str, model: str, api_key: str, total_s: float | None = None) -> Served | None:
    """The probes of the module docstring, in order, all within `total_s` seconds (`PROBE_TOTAL_S`; blocking:
    `served_window` runs it in a thread)."""
    deadline = time.monotonic() + (PROBE_TOTAL_S if total_s is None else total_s)
    root = server_root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def fetch(url: str, body: Any = None) -> Any:
        return _fetch(url, headers, body, deadline)

    found = from_models(fetch(base_url.rstrip("/") + "/models"), model)
    found = found or from_props(fetch(root + "/props"))
    if found is None:
        show = fetch(root + "/api/show", {"model": model})
        found = from_ollama(show, fetch(root + "/api/ps") if show is not None else None, model)
    return found or from_lmstudio(fetch(f"{root}/api/v0/models/{quote(model, safe='')}"))


async def served_window(base_url: str, model: str, api_key: str) -> Served | None:
    """Ask the server at `base_url` (its `/v1` URL) for the window it serves `model` with; None when no probe
    tells. Never raises for an unreachable or silent server, and never waits more than `PROBE_TOTAL_S` (plus a
    second): the probes run in a daemon thread that is left behind if a server holds it (headers sent a byte
    at a time), so neither the caller (an editor's initialize, a session's open) nor the process's exit waits."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Served | None] = loop.create_future()

    def settle(value: Served | None) -> None:
        if not done.done():
            done.set_result(value)

    def run() -> None:
        try:
            value = probe(base_url, model, api_key)
        except Exception as exc:  # a probe never ends a turn
            log.debug("window probe of %s: %s", base_url, exc)
            value = None
        try:
            loop.call_soon_threadsafe(settle, value)
        except RuntimeError:  # the loop closed meanwhile
            pass

    threading.Thread(target=run, name="agentd-window-probe", daemon=True).start()
    try:
        found = await asyncio.wait_for(asyncio.shield(done), PROBE_TOTAL_S + 1.0)
    except TimeoutError:
        log.info(
            "the served window of %s was not read in %.0f s: the configured window stands",
            base_url,
            PROBE_TOTAL_S,
        )
        return None
    if found is not None:
        log.info("served window of %s at %s: %d tokens (%s)", model, base_url, found.tokens, found.source)
    return found
