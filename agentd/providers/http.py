"""One HTTP client per provider configuration, shared by every session of the process (issue 16).

Owns: `ClientPool` (and the process's pool, `shared_pool()`), `ClientKey` and `Lease`. A provider asks the
pool for the client of its configuration (base URL, timeouts) and releases it in `aclose()`; the client is
built once, on first use, and closed when its last lease is released. Clients are kept per event loop (a
connection pool is bound to the loop that opened its connections).

Why: the SDKs build their own `httpx` client per SDK client, which loads the TLS trust store (24 ms on the
reference machine, on the event loop) even for an `http://` base URL; fifty sessions paid that fifty times
and kept fifty connection pools. Here an `https://` configuration gets the default TLS context once, and
an `http://` one gets a shared context that loads no certificates at all: TLS is never used for it (the
SDKs do not follow redirects to another scheme), and if it ever were, verification would fail closed.

Timeouts: `read_s` is the longest wait for a byte from the server (a silent server), `request_s` bounds
connecting, writing and waiting for a free connection; the whole of one attempt is bounded by the provider
(`request_timeout_s`, an endless stream of pings never trips a read timeout). Imports `httpx2` lazily.
Must not import an SDK, pygls, lsprotocol, acp or an adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import weakref
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

log = logging.getLogger("agentd.providers.http")

CONNECT_TIMEOUT_S = 5.0  # the SDKs' own default
MAX_CONNECTIONS = 1000  # the SDKs' defaults: a pool for every session of the process
MAX_KEEPALIVE = 100
KEEPALIVE_EXPIRY_S = 5.0


@dataclass(frozen=True)
class ClientKey:
    """A provider configuration as far as HTTP is concerned: where, and how long to wait (seconds)."""

    base_url: str
    read_s: float
    request_s: float

    @property
    def plain_http(self) -> bool:
        return urlparse(self.base_url).scheme == "http"


@dataclass
class _Entry:
    client: Any
    leases: int = 0


@dataclass
class Lease:
    """One provider's hold on a shared client; `release()` once (later calls do nothing)."""

    pool: ClientPool
    key: ClientKey
    client: Any
    loop: asyncio.AbstractEventLoop
    released: bool = field(default=False)

    async def release(self) -> None:
        if not self.released:
            self.released = True
            await self.pool._release(self)


_PLAIN_CONTEXT: list[ssl.SSLContext] = []  # built once: a client context that trusts nothing


def _no_trust_context() -> ssl.SSLContext:
    """A TLS client context with verification on and no CA loaded (cheap: no file is read)."""
    if not _PLAIN_CONTEXT:
        _PLAIN_CONTEXT.append(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    return _PLAIN_CONTEXT[0]


class ClientPool:
    """Shared `httpx2.AsyncClient`s by `ClientKey` and event loop (see the module docstring)."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ClientKey, _Entry]] = (
            weakref.WeakKeyDictionary()
        )
        self.built = 0  # clients built so far (tests and benchmarks read it)

    def lease(self, key: ClientKey) -> Lease:
        """The shared client of `key` on the running loop (built on first use). Call from the loop."""
        loop = asyncio.get_running_loop()
        clients = self._by_loop.setdefault(loop, {})
        entry = clients.get(key)
        if entry is None or entry.client.is_closed:
            entry = clients[key] = _Entry(self._build(key))
        entry.leases += 1
        return Lease(self, key, entry.client, loop)

    def _build(self, key: ClientKey) -> Any:
        import httpx2

        self.built += 1
        timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=key.read_s, write=key.request_s, pool=key.request_s)
        limits = httpx2.Limits(
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        )
        verify: ssl.SSLContext | bool = _no_trust_context() if key.plain_http else True
        log.debug("HTTP client for %s (read %.0f s, request %.0f s)", key.base_url, key.read_s, key.request_s)
        return httpx2.AsyncClient(timeout=timeout, limits=limits, follow_redirects=True, verify=verify)

    async def _release(self, lease: Lease) -> None:
        clients = self._by_loop.get(lease.loop, {})
        entry = clients.get(lease.key)
        if entry is None or entry.client is not lease.client:
            return
        entry.leases -= 1
        if entry.leases <= 0:
            del clients[lease.key]
            with contextlib.suppress(Exception):
                await entry.client.aclose()

    def live(self) -> int:
        """Clients currently open on the running loop."""
        return len(self._by_loop.get(asyncio.get_running_loop(), {}))


_POOL = ClientPool()


def shared_pool() -> ClientPool:
    """The process's pool: every provider built by `make_provider` uses it unless given another."""
    return _POOL
