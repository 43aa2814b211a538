"""The `cache.ttl` policy of agentd.core.breakpoints (CONTRACTS.md §6; issue 15): "auto" learns this session's
gaps on its clock, marks cached entries 1h for free and writes at 1h only when that pays; the check of its
one assumption about the service (U); "5m"/"1h" fix every breakpoint. Bills are checked with the emulator's
own prompt-cache simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.clock import ManualClock, OffsetClock
from agentd.core.breakpoints import Gaps, Planner
from agentd.core.context import Context
from agentd.providers.base import Usage
from agentd.testing.emulator import CacheSim, validate_request

SYSTEM = [{"type": "text", "text": "You are agentd. " + "Project rules. " * 400}]  # ~1,500 tokens
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]
H1 = {"type": "ephemeral", "ttl": "1h"}
M5 = {"type": "ephemeral", "ttl": "5m"}


class Session:
    """A Context on a manual clock whose requests are billed by the emulator's CacheSim."""

    def __init__(self, ttl: str = "auto") -> None:
        self.clock = ManualClock()
        self.ctx = Context(ttl=ttl, now=self.clock.now)  # type: ignore[arg-type]
        self.sim = CacheSim()
        self.n = 0

    def request(self) -> tuple[dict[str, Any], dict[str, Any]]:
        body = self.ctx.to_request(model="m", system=SYSTEM, tools=TOOLS, max_tokens=100).body()
        assert validate_request(body) is None
        u = self.sim.run(body, now=self.clock.now(), min_cacheable_tokens=1024).usage
        usage = Usage(
            input_tokens=u["input_tokens"],
            output_tokens=10,
            cache_creation_input_tokens=u["cache_creation_input_tokens"],
            cache_read_input_tokens=u["cache_read_input_tokens"],
        )
        return body, {**u, "usage": usage}

    def reply(self, served: dict[str, Any], *, tool: bool) -> None:
        self.n += 1
        if tool:
            tid = f"t{self.n}"
            self.ctx.add_assistant(
                [{"type": "tool_use", "id": tid, "name": "read_file", "input": {"p": tid}}]
            )
            self.ctx.record_usage(served["usage"], self.ctx.last_request_estimate)
            self.ctx.add_user([{"type": "tool_result", "tool_use_id": tid, "content": "x" * 2000}])
        else:
            self.ctx.add_assistant([{"type": "text", "text": f"done {self.n}"}])
            self.ctx.record_usage(served["usage"], self.ctx.last_request_estimate)

    def turn(self, prompt: str, tools: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """One user turn: `tools` tool rounds 2 s apart, then a text reply; returns (body, usage) per request."""
        self.ctx.add_user([{"type": "text", "text": prompt}])
        out = []
        for k in range(tools + 1):
            if k:
                self.clock.advance(2)
            body, served = self.request()
            out.append((body, served))
            self.reply(served, tool=k < tools)
        return out


def marks(body: dict[str, Any]) -> list[dict[str, str]]:
    """The cache_control objects of a request in wire order (system, then messages)."""
    out = [b["cache_control"] for b in body["system"] if "cache_control" in b]
    for m in body["messages"]:
        out += [b["cache_control"] for b in m["content"] if "cache_control" in b]
    return out


def test_auto_writes_5m_in_a_tool_loop_and_marks_what_is_cached_1h() -> None:
    s = Session()
    (first, u1), (second, u2), (third, _) = s.turn("read three files", tools=2)
    assert marks(first) == [M5, M5]  # nothing cached yet: one write, at the cheaper TTL
    assert marks(second) == [H1, H1, M5]  # system and the anchor are read: marking them 1h is free
    assert marks(third) == [H1, H1, M5]
    assert u2["cache_creation"]["ephemeral_1h_input_tokens"] == 0  # the 1h marks were billed nothing
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"]


def test_auto_keeps_the_read_prefix_across_a_20_minute_pause() -> None:
    """The entry read before the pause was re-marked 1h: after 20 minutes the next turn reads it, and only
    the last tail (written 5m) is written again."""
    s = Session()
    requests = s.turn("read two files", tools=2)
    last_read = requests[-1][1]["cache_read_input_tokens"]
    s.clock.advance(20 * 60)
    body, served = s.turn("and now the tests", tools=0)[0]
    assert served["cache_read_input_tokens"] == last_read > 1024
    assert marks(body) == [H1, H1, M5]


def test_fixed_5m_loses_the_history_across_the_same_pause() -> None:
    s = Session(ttl="5m")
    s.turn("read two files", tools=2)
    s.clock.advance(20 * 60)
    served = s.turn("and now the tests", tools=0)[0][1]
    assert served["cache_read_input_tokens"] == 0


def test_auto_writes_1h_when_replies_end_turns_and_users_pause_for_minutes() -> None:
    """A chat-like session: every reply ends the turn and the user comes back after 10-30 minutes, so the
    new tail is worth a 1h write (P(next gap in [5m, 1h)) > 0.65)."""
    s = Session()
    tails = []
    for k in range(6):
        body, _ = s.turn(f"question {k}", tools=0)[0]
        tails.append(marks(body)[-1])
        s.clock.advance(600 + 240 * k)
    assert tails[0] == M5 and tails[-1] == H1


def test_auto_stays_5m_when_pauses_are_short_or_longer_than_an_hour() -> None:
    for pause in (60.0, 2 * 3600.0):
        s = Session()
        for k in range(8):
            body, _ = s.turn(f"question {k}", tools=0)[0]
            s.clock.advance(pause)
        assert marks(body)[-1] == M5, pause


def test_gaps_are_counted_from_the_prior() -> None:
    gaps = Gaps.prior()
    assert gaps.p_next_mid() == 0.5 * 0.5 + 0.5 * 0.1
    gaps.add(1200, after_turn_end=True)  # a 20-minute user pause
    gaps.add(3, after_turn_end=False)  # a tool run
    assert (gaps.ends.value, gaps.pause_mid.value, gaps.step_mid.value) == (0.5, 2 / 3, 0.5 / 6)
    gaps.add(7200, after_turn_end=True)  # over an hour: no TTL survives it
    assert gaps.pause_mid.value == 2 / 4


def test_when_marks_do_not_keep_entries_the_tail_is_written_1h() -> None:
    """Assumption U checked: after a gap of minutes the service read less than the anchor it read before
    (as a service that ignores 1h marks on cached entries would), so the session stops relying on marks and
    writes its tail 1h while pauses of minutes are likely."""
    clock = ManualClock()
    planner = Planner("auto", clock.now)
    eligible = lambda k: k  # noqa: E731
    planner.plan(1, eligible, 3000, 1500)
    planner.served(0)
    clock.advance(2)
    planner.plan(3, eligible, 4000, 1500)
    planner.served(3000)  # it read the first request's entry
    clock.advance(2)
    planner.plan(5, eligible, 5000, 1500)
    planner.served(4000)
    planner.user_prompt()
    clock.advance(20 * 60)
    plan = planner.plan(7, eligible, 6000, 1500)
    assert (plan.stable, plan.points) == ("1h", [(2, "1h"), (6, "5m")])  # U says the anchor at 2 is cached
    assert planner.marks_hold
    planner.served(1500)  # only the system prompt was read: U is false
    assert not planner.marks_hold
    planner.user_prompt()
    clock.advance(2)
    plan = planner.plan(9, eligible, 7000, 1500)
    assert plan.points[-1] == (8, "1h")  # 4,000 tokens at risk (since the 1h write at 2), 1,000 written


def test_fixed_ttls_ignore_the_gaps() -> None:
    for ttl, mark in (("5m", M5), ("1h", H1)):
        s = Session(ttl)
        for k in range(4):
            for body, _ in s.turn(f"q{k}", tools=1):
                assert set(map(str, marks(body))) == {str(mark)}
            s.clock.advance(1200)


def test_compression_keeps_the_stable_prefix_entry_only() -> None:
    s = Session()
    s.turn("read", tools=3)
    summary = {"role": "user", "content": [{"type": "text", "text": "[Summary of earlier conversation]\nS"}]}
    s.ctx.replace_prefix(len(s.ctx) - 1, summary, None)  # keeps the final text reply
    s.ctx.add_user([{"type": "text", "text": "go on"}])
    assert s.ctx.stable_prefix_ttl() == "1h"  # the summary request reads system: marked 1h for free
    s.clock.advance(1)
    body, _ = s.request()
    assert marks(body) == [H1, M5]  # the rebuilt history is all new writes


def test_offset_clock_reads_its_file(tmp_path: Path) -> None:
    """The test-only clock hook (AGENTD_TEST_CLOCK_FILE): the offset in the file moves time at once."""
    path = tmp_path / "clock"
    clock = OffsetClock(path)
    assert clock.offset() == 0.0  # no file yet
    path.write_text("1800.5\n", encoding="utf-8")
    start = clock.now()
    path.write_text("3600.5", encoding="utf-8")
    assert 1800 <= clock.now() - start < 1810
    path.write_text("not a number", encoding="utf-8")
    assert clock.offset() == 3600.5  # the last good value
