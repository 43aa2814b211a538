"""One HTTP client per provider configuration (issue 16: fifty sessions built fifty clients, each loading
the TLS trust store on the event loop, even for http:// URLs)."""

from __future__ import annotations

import ssl

from agentd.providers.anthropic import AnthropicProvider
from agentd.providers.factory import make_provider
from agentd.providers.http import ClientKey, ClientPool
from agentd.providers.openai_compat import OpenAICompatProvider

URL = "http://127.0.0.1:9"


async def test_providers_of_one_configuration_share_one_client() -> None:
    pool = ClientPool()
    env = {"ANTHROPIC_API_KEY": "sk-ant-emu-pool"}
    providers = [make_provider("anthropic", base_url=URL, env=env, pool=pool) for _ in range(50)]
    sdk = [p._get_client() for p in providers]  # type: ignore[attr-defined]
    assert (pool.built, pool.live()) == (1, 1)
    assert len({id(c._client) for c in sdk}) == 1
    for p in providers[:-1]:
        await p.aclose()
    assert pool.live() == 1 and not sdk[0]._client.is_closed
    await providers[-1].aclose()
    assert pool.live() == 0 and sdk[0]._client.is_closed


async def test_another_configuration_gets_another_client() -> None:
    pool = ClientPool()
    a = AnthropicProvider("m", "k", URL, pool=pool)
    b = AnthropicProvider("m", "k", URL, pool=pool, timeout_s=30.0)
    c = OpenAICompatProvider("m", "k", URL + "/v1", pool=pool)
    clients = {id(p._get_client()._client) for p in (a, b, c)}
    assert (len(clients), pool.built) == (3, 3)
    for p in (a, b, c):
        await p.aclose()
    assert pool.live() == 0


async def test_timeouts_come_from_the_retries_settings() -> None:
    pool = ClientPool()
    p = make_provider(
        "anthropic", base_url=URL, env={"ANTHROPIC_API_KEY": "k"}, pool=pool,
        retries={"request_timeout_s": 40.0, "read_timeout_s": 7.0},
    )  # fmt: skip
    timeout = p._get_client()._client.timeout  # type: ignore[attr-defined]
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (5.0, 7.0, 40.0, 40.0)
    await p.aclose()


async def test_an_http_url_loads_no_certificates() -> None:
    pool = ClientPool()
    lease = pool.lease(ClientKey(URL, 10.0, 10.0))
    pools = [
        lease.client._transport._pool,
        *(t._pool for t in lease.client._mounts.values() if t is not None),
    ]
    contexts = {id(p._ssl_context): p._ssl_context for p in pools}
    assert len(contexts) == 1
    (ctx,) = contexts.values()
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.cert_store_stats() == {"x509": 0, "crl": 0, "x509_ca": 0}
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname  # TLS, if ever used, fails closed
    await lease.release()
    await lease.release()  # a second release does nothing
    assert pool.live() == 0
