"""The prompt-cache simulation (TESTING.md §3.7, §3.9) with exact usage numbers, no sockets.

Blocks are built to an exact EMU-TOK-1 size, so every T(p) below is a plain sum.
"""

from __future__ import annotations

from typing import Any

from agentd.testing.emulator import CacheSim, PrefixCache, canon, count_tokens

CC = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}


def txt(tokens: int, tag: str, cc: dict[str, Any] | None = None) -> dict[str, Any]:
    """A text block of exactly `tokens` EMU-TOK-1 tokens: 25 bytes of JSON plus 4 * tokens - 25 characters."""
    n = 4 * tokens - 25
    block: dict[str, Any] = {"type": "text", "text": (tag + "." * n)[:n]}
    if cc:
        block["cache_control"] = cc
    assert count_tokens(block) == tokens
    return block


def tool(tokens: int, name: str, cc: dict[str, Any] | None = None) -> dict[str, Any]:
    shell = {"name": name, "description": "", "input_schema": {"type": "object"}}
    out: dict[str, Any] = {**shell, "description": "d" * (4 * tokens - len(canon(shell)))}
    if cc:
        out["cache_control"] = cc
    assert count_tokens(out) == tokens
    return out


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def request(*messages: dict[str, Any], model: str = "emu-sonnet", **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 100, "messages": list(messages), **extra}


def usage(inp: int, read: int, w1h: int = 0, w5m: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "cache_creation_input_tokens": w1h + w5m,
        "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_1h_input_tokens": w1h, "ephemeral_5m_input_tokens": w5m},
    }


S = txt(1500, "system")
U1, A1, U2, A2, U3 = txt(100, "u1"), txt(50, "a1"), txt(100, "u2"), txt(50, "a2"), txt(100, "u3")


def strip(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def test_multi_turn_moving_breakpoint_reads_what_the_previous_request_wrote() -> None:
    sim = CacheSim()
    system = [{**S, "cache_control": CC}]
    r1 = sim.run(request(user({**U1, "cache_control": CC}), system=system), now=0)
    assert (r1.usage, r1.hit_position) == (usage(0, 0, w5m=1600), None)
    r2 = sim.run(request(user(U1), assistant(A1), user({**U2, "cache_control": CC}), system=system), now=10)
    assert (r2.usage, r2.hit_position) == (usage(0, 1600, w5m=150), 2)
    r3 = sim.run(
        request(
            user(U1), assistant(A1), user(U2), assistant(A2), user({**U3, "cache_control": CC}), system=system
        ),
        now=20,
    )
    assert (r3.usage, r3.hit_position) == (usage(0, 1750, w5m=150), 4)


def test_nothing_is_cached_below_the_minimum() -> None:
    sim = CacheSim()
    small = request(user(txt(100, "u", CC)), system=[txt(500, "s", CC)])
    assert sim.run(small, now=0).usage == usage(600, 0)
    assert sim.run(small, now=1).usage == usage(600, 0)
    # the per-model minimum decides: at 500 both breakpoints qualify
    assert sim.run(small, now=2, min_cacheable_tokens=500).usage == usage(0, 0, w5m=600)
    # only the breakpoint that reaches the minimum writes: the system one (1000) does not, the last (1100) does
    mixed = request(user(txt(100, "u", CC)), system=[txt(1000, "s2", CC)])
    assert sim.run(mixed, now=3).usage == usage(0, 0, w5m=1100)
    # so a request that shares only the system block reads nothing
    assert sim.run(request(user(txt(100, "v", CC)), system=[txt(1000, "s2", CC)]), now=4).usage == usage(
        0, 0, w5m=1100
    )


def test_5m_entry_dead_at_301_s_while_1h_entry_survives() -> None:
    body = request(user(txt(100, "u", CC)), system=[txt(1200, "s", CC_1H)])
    sim = CacheSim()
    assert sim.run(body, now=0).usage == usage(0, 0, w1h=1200, w5m=100)
    assert sim.run(body, now=299).usage == usage(0, 1300)
    late = CacheSim()
    late.run(body, now=0)
    assert late.run(body, now=301).usage == usage(0, 1200, w5m=100)


def test_a_hit_refreshes_the_entry_from_the_start_of_the_request() -> None:
    body = request(user(txt(1100, "u", CC)))
    sim = CacheSim()
    assert sim.run(body, now=0).usage == usage(0, 0, w5m=1100)
    assert sim.run(body, now=200).usage == usage(0, 1100)  # expiry moves to 500
    assert sim.run(body, now=450).usage == usage(0, 1100)  # alive only thanks to the refresh; now 750
    assert sim.run(body, now=750).usage == usage(0, 0, w5m=1100)  # dead: written again


def test_adding_20_blocks_misses_unless_a_middle_breakpoint_exists() -> None:
    base = txt(1110, "base")

    def grown(n: int, middle: bool = False) -> dict[str, Any]:
        extra = [txt(10, f"x{k}") for k in range(1, n + 1)]
        extra[-1] = {**extra[-1], "cache_control": CC}
        if middle:
            extra[9] = {**extra[9], "cache_control": CC}
        return request(user(base, *extra))

    def fresh() -> CacheSim:
        sim = CacheSim()
        assert sim.run(request(user({**base, "cache_control": CC})), now=0).usage == usage(0, 0, w5m=1110)
        return sim

    assert fresh().run(grown(19), now=1).usage == usage(0, 1110, w5m=190)  # bp 20, lookback 20..1 sees p1
    assert fresh().run(grown(20), now=1).usage == usage(0, 0, w5m=1310)  # bp 21, lookback 21..2 misses p1
    hit = fresh().run(grown(20, middle=True), now=1)  # bp at p11 looks back to p1
    assert (hit.usage, hit.hit_position) == (usage(0, 1110, w5m=200), 1)


def test_changes_invalidate_the_right_levels() -> None:
    tools, system = [tool(1100, "read_file", CC)], [txt(200, "sys", CC)]
    msgs = [user(txt(100, "u", CC))]
    base = request(*msgs, tools=tools, system=system)

    def after(body: dict[str, Any]) -> dict[str, Any]:
        sim = CacheSim()
        assert sim.run(base, now=0).usage == usage(0, 0, w5m=1400)
        return sim.run(body, now=1).usage

    assert after(base) == usage(0, 1400)
    assert after({**base, "tool_choice": {"type": "any"}}) == usage(0, 1300, w5m=100)  # messages level only
    assert after({**base, "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}) == usage(
        0, 1300, w5m=100
    )
    assert after({**base, "system": [txt(200, "SYS", CC)]}) == usage(0, 1100, w5m=300)  # system + messages
    assert after({**base, "tools": [tool(1100, "read_filf", CC)]}) == usage(0, 0, w5m=1400)  # everything
    assert after({**base, "model": "emu-haiku"}) == usage(0, 0, w5m=1400)  # entries are per model


def test_mixed_ttl_split_a_b_c() -> None:
    tools, system = [tool(1100, "t", CC_1H)], [txt(200, "s", CC_1H)]
    u1, a1, u2, r, a2, u3, u4 = (
        txt(100, "u1"), txt(50, "a1"), txt(100, "u2"), txt(30, "r"), txt(50, "a2"), txt(100, "u3"), txt(100, "u4"),
    )  # fmt: skip
    sim = CacheSim()
    # T: tool 1100 (1h), system 1300 (1h), u1 1400 (5m) -> C 1400, B 1300
    first = sim.run(request(user({**u1, "cache_control": CC}), tools=tools, system=system), now=0)
    assert first.usage == usage(0, 0, w1h=1300, w5m=100)
    # at 400 the 5m entry is dead, the 1h ones live: A 1300; C = u2 1550; a reminder after the breakpoint is input
    second = sim.run(
        request(user(u1), assistant(a1), user({**u2, "cache_control": CC}, r), tools=tools, system=system),
        now=400,
    )
    assert (second.usage, second.hit_position) == (usage(30, 1300, w5m=250), 2)
    # A = 1550 (u2, written at 400), B = u3 1730 (1h above A), C = u4 1830
    third = sim.run(
        request(
            user(u1), assistant(a1), user(u2, r), assistant(a2), user({**u3, "cache_control": CC_1H}, {**u4, "cache_control": CC}),
            tools=tools, system=system,
        ),
        now=401,
    )  # fmt: skip
    assert (third.usage, third.hit_position) == (usage(0, 1550, w1h=180, w5m=100), 5)


def test_top_level_automatic_cache_control_writes_at_the_last_block() -> None:
    sim = CacheSim()
    body = request(user(txt(1100, "u"), txt(20, "v")), cache_control=CC)
    assert sim.run(body, now=0).usage == usage(0, 0, w5m=1120)
    assert sim.run(body, now=1).usage == usage(0, 1120)


def test_writes_are_visible_only_to_requests_that_start_after_the_response_began() -> None:
    body = request(user(txt(1100, "u", CC)))
    sim = CacheSim()
    first = sim.begin(body, now=0)
    concurrent = sim.begin(body, now=0)  # started before the first response's headers
    sim.publish(first, now=0)
    sim.publish(concurrent, now=0)
    assert (first.usage, concurrent.usage) == (usage(0, 0, w5m=1100), usage(0, 0, w5m=1100))
    assert sim.run(body, now=0).usage == usage(0, 1100)
    delayed = CacheSim(write_visibility_delay_s=2)  # anthropic-sdk-python #1451: back-to-back misses
    assert delayed.run(body, now=0).usage == usage(0, 0, w5m=1100)
    assert delayed.run(body, now=1).usage == usage(0, 0, w5m=1100)
    assert delayed.run(body, now=2).usage == usage(0, 1100)


def test_every_usage_sums_to_the_prompt_total() -> None:
    body = request(user(txt(100, "u", CC), txt(40, "tail")), system=[txt(1100, "s", CC_1H)])
    result = CacheSim().run(body, now=0)
    u = result.usage
    assert u["input_tokens"] + u["cache_creation_input_tokens"] + u[
        "cache_read_input_tokens"
    ] == count_tokens(body)
    assert u == usage(40, 0, w1h=1100, w5m=100)


def chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "emu-gpt", "messages": list(messages)}


def message(tokens: int, tag: str, role: str = "user") -> dict[str, Any]:
    shell = {"role": role, "content": ""}
    out = {"role": role, "content": (tag + "." * 4 * tokens)[: 4 * tokens - len(canon(shell))]}
    assert count_tokens(chat(out), api="openai") == tokens
    return out


def test_prefix_cache_rounds_down_to_the_unit_above_the_minimum() -> None:
    first = chat(message(1100, "system", "system"), message(30, "u1"))
    second = chat(*first["messages"], message(20, "a1", "assistant"), message(30, "u2"))
    for unit, cached in ((128, 1024), (64, 1088), (256, 1024)):
        cache = PrefixCache()
        miss, hit, result = cache.begin(first, now=0, unit=unit)
        cache.publish(result, now=0)
        assert (miss, hit) == (0, None)
        assert cache.begin(second, now=1, unit=unit)[:2] == (cached, 2)  # shared prefix 1130 tokens
    small = PrefixCache()
    _, _, result = small.begin(chat(message(1000, "s", "system")), now=0)
    small.publish(result, now=0)
    assert small.begin(chat(message(1000, "s", "system"), message(30, "u")), now=1)[0] == 0  # below 1024
    expired = PrefixCache()
    expired.publish(expired.begin(first, now=0)[2], now=0)
    assert expired.begin(second, now=300)[0] == 0  # TTL 300 s
