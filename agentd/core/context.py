"""The Context: the conversation as state (seed 004; CONTRACTS.md §6, §7).

Owns: the active message list (append-only API), token accounting for it, the compression state, and
`to_request()` with the cache breakpoint planner. Must not import pygls, lsprotocol, acp or adapters.

Messages are Messages-API dicts with block-list content. Appending a user message right after another
user message merges them (tool_results first), so the history always alternates. Appended messages are
deep-copied and never mutated afterwards (a merge replaces the last message by a new one), so serialising the
same history always yields the same bytes.

Cost per request independent of the history's length (issue 16): the Context keeps what a request needs as
the history grows, in `_Index`: the flat view of the content blocks, the estimated tokens of each block
(counted once, when first needed) as running sums, and the validator's checked prefix
(`agentd.core.validate.Checked`). A request's message list is a new list of the stored messages themselves
(shared, never copied); only the few messages whose blocks get a breakpoint are copied, with those blocks.
A compression rebuilds the index once.

Breakpoints: `to_request()` marks the stable prefix and up to 3 history blocks as the session's `Planner`
decides (agentd.core.breakpoints: placement and the `cache.ttl` policy, explained there). The Context tells
the planner when a user prompt arrives, when the history is replaced and what the service read.
"""

from __future__ import annotations

import copy
import itertools
import math
import time
from collections.abc import Callable
from typing import Any

from agentd.core.breakpoints import TTL, Planner, TtlMode, cache_control
from agentd.core.compaction import CompactionState
from agentd.core.tokens import Estimator, estimate_request, estimate_tokens
from agentd.core.validate import Checked
from agentd.images import holds_image
from agentd.providers.base import ModelRequest, Usage

Message = dict[str, Any]
Block = dict[str, Any]


def _blank_text(block: Block) -> bool:
    """An empty or whitespace-only text block: the API rejects both in a stored history (cases C13;
    "text content blocks must contain non-whitespace text"), so the Context never stores one."""
    return block.get("type") == "text" and not str(block.get("text") or "").strip()


def _eligible(block: Block) -> bool:
    if block.get("type") == "text":
        return bool(block.get("text"))
    return block.get("type") in ("tool_use", "tool_result", "image", "document")


class _Index:
    """The flat view of a history's content blocks, kept as the history changes (issue 16).

    `flat[k]`: (message, block) of flat block k; `starts[i]`: the flat index of message i's first block;
    `cum[k]`: estimated tokens (uncalibrated, `estimate_tokens`) of flat blocks [0, k), known for the first
    `len(cum) - 1` blocks and extended when asked (`tokens`); `checked`: the validator's checked prefix;
    `images`: the messages that hold an image, ascending."""

    def __init__(self) -> None:
        self.flat: list[tuple[int, int]] = []
        self.starts: list[int] = []
        self.cum: list[int] = [0]
        self.checked = Checked()
        self.images: list[
            int
        ] = []  # the messages holding an image (agentd.images.request_safe looks at those)

    def append(self, i: int, msg: Message) -> None:
        self.starts.append(len(self.flat))
        self.flat.extend((i, j) for j in range(len(msg["content"])))
        if holds_image(msg):
            self.images.append(i)

    def pop(self) -> None:
        """Forget the last message (its blocks, their estimates; the checked prefix when it reached it)."""
        if self.images and self.images[-1] == len(self.starts) - 1:
            self.images.pop()
        start = self.starts.pop()
        del self.flat[start:]
        del self.cum[start + 1 :]
        if self.checked.count > len(self.starts) - 1:
            self.checked = Checked()

    def tokens(self, messages: list[Message], upto: int) -> int:
        """Estimated tokens of flat blocks [0, upto)."""
        cum = self.cum
        for k in range(len(cum) - 1, upto):
            i, j = self.flat[k]
            cum.append(cum[-1] + estimate_tokens(messages[i]["content"][j]))
        return cum[upto]


class Context:
    """One session's conversation. See the module docstring for the invariants.

    `prompt_caching`: place breakpoints at all; `ttl`: the `cache.ttl` policy; `now`: the session's clock
    (seconds, monotonic), which the TTL policy measures gaps with.
    """

    def __init__(
        self,
        *,
        prompt_caching: bool = True,
        ttl: TtlMode = "auto",
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl, self._now = ttl, now
        self.prompt_caching = prompt_caching
        self.reset()

    def reset(self) -> None:
        """Back to an empty history with a fresh planner and estimator, as a newly built Context (a
        conversation rewind replays the branch it goes back to into it, issue 13)."""
        self._messages: list[Message] = []
        self._index = _Index()  # kept current by every mutation (issue 16)
        self._tool_use_ids: set[str] = set()  # every tool_use id stored so far (compacted ones included)
        self.planner = Planner(self._ttl, self._now)
        self.estimator = Estimator()
        self.compaction = CompactionState()
        self._known_tokens: int | None = None  # exact size after the last response
        self._known_upto = 0  # content blocks (flat) covered by _known_tokens
        self._static_tokens = 0  # estimated tools + system
        self._last_estimate = 0

    # ---- history ---------------------------------------------------------------------------------
    @property
    def messages(self) -> list[Message]:
        """A deep copy of the active history (callers can never mutate the Context through it)."""
        return copy.deepcopy(self._messages)

    def view(self) -> tuple[Message, ...]:
        """The active history without copying it: read-only for the caller (the validator at resume, where
        a deep copy of a long history cost more than parsing the log; TESTING.md §5.2)."""
        return tuple(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def last(self) -> Message | None:
        return copy.deepcopy(self._messages[-1]) if self._messages else None

    def add_user(self, blocks: list[Block], *, adopt: bool = False) -> None:
        """Append user content, tool_result blocks first; merged into the previous message when that is a
        user message too. Empty text blocks are dropped; nothing empty is ever stored.
        `adopt=True` stores the caller's block objects without copying them: only for blocks nobody else
        holds (replay of freshly parsed log records), which keeps resume linear and cheap."""
        keep = (lambda b: b) if adopt else copy.deepcopy
        blocks = [keep(b) for b in blocks if not _blank_text(b)]
        if not blocks:
            return
        if any(b.get("type") != "tool_result" for b in blocks):
            self.planner.user_prompt()
        merge = bool(self._messages) and self._messages[-1]["role"] == "user"
        merged = (self._messages[-1]["content"] if merge else []) + blocks
        results = [b for b in merged if b.get("type") == "tool_result"]
        others = [b for b in merged if b.get("type") != "tool_result"]
        if merge:
            self._pop()
        self._append({"role": "user", "content": results + others})

    def add_assistant(
        self, blocks: list[Block], extra: dict[str, Any] | None = None, *, adopt: bool = False
    ) -> bool:
        """Append an assistant message. Returns False (and stores nothing) when it would be empty:
        an empty assistant message in the middle of a history is a 400 (case C13).
        `extra`: provider fields kept on the message (e.g. `reasoning_content`); `adopt`: as in add_user."""
        keep = (lambda b: b) if adopt else copy.deepcopy
        blocks = [keep(b) for b in blocks if not _blank_text(b)]
        if not blocks:
            return False
        msg: Message = {"role": "assistant", "content": blocks}
        if extra:
            msg.update(extra if adopt else copy.deepcopy(extra))
        self._append(msg)
        self._tool_use_ids.update(str(b.get("id")) for b in blocks if b.get("type") == "tool_use")
        return True

    def drop_last(self) -> None:
        """Remove the message just appended: the rollback when persisting it failed (persist before apply)."""
        msg = self._pop()
        if msg["role"] == "assistant":
            self._tool_use_ids.difference_update(
                str(b.get("id")) for b in msg["content"] if b.get("type") == "tool_use"
            )

    def withdraw(self, blocks: list[Block]) -> bool:
        """Take a prompt's `blocks` back out of the last (user) message: a failed turn that the model never
        answered leaves the history as it was before the prompt (issue 17). The message goes when nothing
        else is left in it. Returns False (nothing changed) when they are not the tail of the last message."""
        last = self._messages[-1] if self._messages else None
        n = len(blocks)
        if last is None or last["role"] != "user" or not n or last["content"][-n:] != blocks:
            return False
        rest = last["content"][:-n]
        self._pop()
        if rest:
            self._append({"role": "user", "content": rest})
        self._known_upto = min(self._known_upto, len(self._index.flat))
        return True

    def _append(self, msg: Message) -> None:
        self._index.append(len(self._messages), msg)
        self._messages.append(msg)

    def _pop(self) -> Message:
        self._index.pop()
        return self._messages.pop()

    @property
    def static_tokens(self) -> int:
        """Estimated tokens of the tools and system of the last request built (0 before the first)."""
        return self._static_tokens

    def remember_tool_use_ids(self, ids: set[str]) -> None:
        """Count `ids` as used (the tool_use ids of abandoned branches, issue 13): a new reply never reuses
        one, so each id names one call in the whole log and the audit log."""
        self._tool_use_ids |= ids

    def tool_use_ids(self) -> set[str]:
        """Every tool_use id stored so far, those replaced by a summary included (so a new reply never
        reuses one; `unique_tool_use_ids`). The live set: read-only for the caller."""
        return self._tool_use_ids

    def open_tool_use_ids(self) -> list[str]:
        """Ids of tool_use blocks in the last assistant message that have no tool_result after them."""
        if not self._messages:
            return []
        idx = len(self._messages) - 1
        if self._messages[idx]["role"] == "user":
            answered = {
                b.get("tool_use_id") for b in self._messages[idx]["content"] if b.get("type") == "tool_result"
            }
            idx -= 1
        else:
            answered = set()
        if idx < 0 or self._messages[idx]["role"] != "assistant":
            return []
        ids = [b["id"] for b in self._messages[idx]["content"] if b.get("type") == "tool_use"]
        return [i for i in ids if i not in answered]

    # ---- token accounting ------------------------------------------------------------------------
    def record_usage(self, usage: Usage, estimated_prompt: int) -> None:
        """After a response (whose assistant message is already appended or was empty): the context size
        is now known exactly = prompt size + output tokens. Recalibrates the estimator."""
        if usage.prompt_tokens <= 0:  # the provider reported no input counts: keep estimating
            return
        if usage.cache_read_input_tokens is not None:
            self.planner.served(usage.cache_read_input_tokens)
        self.estimator.calibrate(estimated_prompt, usage.prompt_tokens)
        self._known_tokens = usage.context_tokens
        self._known_upto = len(self._index.flat)  # O(1): replay applies one usage per response

    def estimated_tokens(self) -> int:
        """Context size in tokens: the exact size after the last response plus an estimate of the
        messages added since; before any response, an estimate of tools + system + messages."""
        n = len(self._index.flat)
        total = self._index.tokens(self._messages, n)
        if self._known_tokens is not None and self._known_upto <= n:
            # by blocks, not messages: a prompt merged into the last user message (after an empty reply) counts
            later = total - self._index.tokens(self._messages, self._known_upto)
            return self._known_tokens + math.ceil(later * self.estimator.factor)
        return self._static_tokens + math.ceil(total * self.estimator.factor)

    # ---- compression state -----------------------------------------------------------------------
    def replace_prefix(self, cut: int, summary_message: Message, ack: Message | None) -> None:
        """Replace the first `cut` active messages by the summary (and the ack). Used by compaction and
        by replay of a `compaction` record, so both rebuild the same bytes."""
        index, kept = self._index, self._messages[cut:]
        start = index.starts[cut] if cut < len(self._messages) else len(index.flat)
        known = [b - a for a, b in itertools.pairwise(index.cum[start:])]  # the kept blocks' estimates
        head = [copy.deepcopy(summary_message)] + ([copy.deepcopy(ack)] if ack else [])
        self._messages, self._index = [], _Index()
        for m in head + kept:  # rebuilt once (issue 16)
            self._append(m)
        cum = self._index.cum
        self._index.tokens(self._messages, sum(len(m["content"]) for m in head))
        for tokens in known:
            cum.append(cum[-1] + tokens)
        self.compaction.compactions += 1
        self.compaction.replaced_total += cut
        self._known_tokens = None
        self._known_upto = 0
        self.planner.reset_history()

    # ---- requests --------------------------------------------------------------------------------
    def _last_eligible(self, upto: int) -> int | None:
        flat = self._index.flat
        for k in range(min(upto, len(flat) - 1), -1, -1):
            i, j = flat[k]
            if _eligible(self._messages[i]["content"][j]):
                return k
        return None

    def to_request(
        self, *, model: str, system: list[Block], tools: list[dict[str, Any]], max_tokens: int
    ) -> ModelRequest:
        """Build the next request: tools + system + the history with breakpoints (module docstring).
        The Context is not changed except for its planner's state (what it marked, and when) and its index.
        The request shares the stored messages and blocks (issue 16): it is read, never changed in place."""
        self._static_tokens = estimate_request({"tools": tools, "system": system})
        sys_blocks, tool_defs, messages = list(system), list(tools), list(self._messages)
        marked = self._mark(sys_blocks, tool_defs, messages) if self.prompt_caching else ()
        checked = self._index.checked
        checked.extend(self._messages, len(self._messages) - 1)
        images = tuple(sorted({*self._index.images, len(messages) - 1}))  # the last: what hooks may change
        request = ModelRequest(model=model, system=sys_blocks, tools=tool_defs, messages=messages,
                               max_tokens=max_tokens, checked=checked, marked=marked, images=images)  # fmt: skip
        # tools + system + every stored block (cache_control is not counted): estimate_request(request.body())
        self._last_estimate = self._static_tokens + self._index.tokens(self._messages, len(self._index.flat))
        return request

    def _mark(
        self, sys_blocks: list[Block], tool_defs: list[dict[str, Any]], messages: list[Message]
    ) -> tuple[int, ...]:
        """Put the planner's breakpoints on copies of the marked blocks (and of their messages) in the
        request's lists of system, tools and messages. Returns the indexes of the messages copied."""
        flat = self._index.flat
        plan = self.planner.plan(len(flat), self._last_eligible, self.estimated_tokens(), self._static_tokens)
        stable = sys_blocks or tool_defs
        if stable:
            stable[-1] = {**stable[-1], "cache_control": cache_control(plan.stable)}
        copied: set[int] = set()
        for k, ttl in plan.points:
            i, j = flat[k]
            if i not in copied:
                messages[i] = {**messages[i], "content": list(messages[i]["content"])}
                copied.add(i)
            content = messages[i]["content"]
            content[j] = {**content[j], "cache_control": cache_control(ttl)}
        return tuple(sorted(copied))

    def stable_prefix_ttl(self) -> TTL:
        """The TTL for a request that marks only tools + system (the summary request), now (breakpoints)."""
        return self.planner.stable_ttl()

    @property
    def last_request_estimate(self) -> int:
        """Uncalibrated estimated prompt tokens of the last request built (calibrated against its usage)."""
        return self._last_estimate
