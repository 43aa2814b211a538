"""What both adapters say the same way (PROTOCOL.md §6.3, §6.4, §6.10): they differ in framing and method
names only, so the payloads that carry a rule live here, once (issue 10: two thin translations of one core).

Owns:
- `model_blocks()`: a prompt's ACP content blocks (§6.4) as Messages API blocks; `BadPrompt` (-32602).
- `permission_params()` / `outcome_of()`: the `requestPermission` params of §6.10 (ACP
  `RequestPermissionRequest` shape: the tool call with its diff or command line, the options the gate
  offered (`agentd.permissions.approver.offered_options`), `_meta.agentd`), with every text meant to be read escaped (H20, `agentd.text.visible`); and the
  client's answer as an `ApprovalOutcome` (an option that was not offered, or an answer of the wrong shape,
  counts as `reject_once`; `cancelled` is a turn cancel).
- `list_page()` / `listed()`: a `session/list` page (§6.3) from the data dir's `meta.json` files, newest
  first, 50 a page, an opaque cursor.
- `DeferredProvider`: the provider of a `--resume` session until a client loads it with its own settings.
Imports agentd.protocol, agentd.text, agentd.persistence.index and agentd.permissions.approver; never
pygls, lsprotocol or acp, and only a Session's public API.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agentd.images import image_block
from agentd.permissions.approver import offered_options
from agentd.protocol import session as ps
from agentd.text import visible

if TYPE_CHECKING:
    from agentd.core.session import Session
    from agentd.permissions.approver import ApprovalOutcome, ApprovalRequest

LIST_PAGE = 50


# ---- prompts (§6.4) ----------------------------------------------------------------------------------


class BadPrompt(ValueError):
    """A prompt block agentd cannot take: `str()` is the text after `<method>: `, `loc` the field."""

    def __init__(self, msg: str, loc: str) -> None:
        super().__init__(msg)
        self.loc = loc


def model_blocks(blocks: list[Any], images: bool) -> list[dict[str, Any]]:
    """Prompt content blocks (`agentd.protocol.session.ContentBlock` models) as Messages API blocks: text as
    is, a resource link as a line naming it, an embedded text resource in a fenced block headed by its URI,
    an image as base64. Raises BadPrompt for audio, binary blobs, images the model does not take, an image
    the model API refuses (`agentd.images`: not JPEG/PNG/GIF/WebP bytes, bad base64, too large; break11) and
    a prompt with no content."""
    out: list[dict[str, Any]] = []
    for i, b in enumerate(blocks):
        loc = f"prompt.{i}"
        if isinstance(b, ps.TextBlock):
            if b.text:
                out.append({"type": "text", "text": b.text})
        elif isinstance(b, ps.ResourceLinkBlock):
            out.append(
                {
                    "type": "text",
                    "text": f"[Linked file: {b.name} ({b.uri}); read it with read_file if needed]",
                }
            )
        elif isinstance(b, ps.ResourceBlock):
            if b.resource.text is None:
                raise BadPrompt(
                    "binary resource blobs are not supported; send the text or a resource_link", loc
                )
            fence = "````" if "```" in b.resource.text else "```"
            out.append({"type": "text", "text": f"{b.resource.uri}\n{fence}\n{b.resource.text}\n{fence}"})
        elif isinstance(b, ps.ImageBlock):
            if not images:
                raise BadPrompt("the model takes no images; send text instead", loc)
            block, refused = image_block(b.mime_type, b.data)
            if block is None:
                raise BadPrompt(f"{refused}; send a JPEG, PNG, GIF or WebP image as base64", loc)
            out.append(block)
        else:
            raise BadPrompt("audio prompts are not supported; send text instead", loc)
    if not out:
        raise BadPrompt("the prompt has no content; send at least one non-empty text block", "prompt")
    return out


# ---- approvals (§6.10) -------------------------------------------------------------------------------


def shown(text: str) -> str:
    """One line of display text with bidi controls and invisible characters escaped (H20)."""
    return visible(text, one_line=True)


def first_changed_line(old: str | None, new: str | None) -> int:
    """1-based number of the first line that differs (1 for a new file)."""
    if not old:
        return 1
    a, b = old.split("\n"), (new or "").split("\n")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i + 1
    return max(1, min(len(a), len(b)))


def permission_params(session: Session, req: ApprovalRequest) -> dict[str, Any]:
    """The params of `requestPermission` (§6.10): `{sessionId, toolCall, options, _meta.agentd}`. The texts
    meant to be read (title, command line, description) are escaped (H20); `rawInput` and the diff stay
    exact for the client, which escapes what it shows of them."""
    p = req.preview
    call: dict[str, Any] = {"toolCallId": req.tool_use_id, "title": shown(req.title), "kind": req.kind,
                            "status": "pending", "rawInput": req.raw_input}  # fmt: skip
    cwd = str(session.cwd)
    if p.command is not None:
        text = f"$ {shown(p.command)}\n(cwd {shown(p.cwd or cwd)})"
        call["content"] = [{"type": "content", "content": {"type": "text", "text": text}}]
        description = f"Run a shell command in {cwd}"
    elif p.path is not None and p.new_text is not None:
        call["content"] = [{"type": "diff", "path": p.path, "oldText": p.old_text, "newText": p.new_text}]
        line = first_changed_line(p.old_text, p.new_text) if req.tool_name == "edit_file" else 1
        call["locations"] = [{"path": p.path, "line": line}]
        verb = "Edit a file" if req.tool_name == "edit_file" else "Create or overwrite a file"
        description = f"{verb} in {cwd}"
    else:
        if p.path is not None:
            call["locations"] = [{"path": p.path}]
        description = p.summary
    expires = (datetime.now(UTC) + timedelta(seconds=req.timeout_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "sessionId": session.id, "toolCall": call, "options": offered_options(req),
        "_meta": {"agentd": {"title": shown(req.title), "description": shown(description),
                             "subject": {"type": "tool_call", "toolCallId": req.tool_use_id},
                             "timeoutS": req.timeout_s, "expiresAt": expires}},
    }  # fmt: skip


def outcome_of(result: Any, req: ApprovalRequest) -> ApprovalOutcome:
    """The client's `RequestPermissionResponse` as an outcome: the option picked, if it was offered (its
    kind decides; `_meta.agentd.reason` kept); `cancelled` as a turn cancel; anything else `reject_once`."""
    from agentd.permissions.approver import ApprovalOutcome

    outcome = result.get("outcome") if isinstance(result, dict) else None
    if not isinstance(outcome, dict):
        return ApprovalOutcome(option="reject_once")
    if outcome.get("outcome") == "cancelled":
        return ApprovalOutcome(option="cancelled", decided_by="cancel")
    option = outcome.get("optionId")
    meta = result.get("_meta")
    agentd = meta.get("agentd") if isinstance(meta, dict) else None
    reason = agentd.get("reason") if isinstance(agentd, dict) else None
    kind = next((o["kind"] for o in offered_options(req) if o["optionId"] == option), None)
    if kind not in ("allow_once", "allow_always", "reject_once", "reject_always"):
        return ApprovalOutcome(option="reject_once")
    return ApprovalOutcome(option=kind, option_id=option, reason=reason if isinstance(reason, str) else None)


# ---- session lists (§6.3) ----------------------------------------------------------------------------


def list_page(metas: list[dict[str, Any]], cursor: str | None) -> dict[str, Any]:
    """One page of a `session/list` result from `metas` (newest first): `{sessions, nextCursor?}`. Raises
    ValueError for a cursor agentd did not give."""
    start = 0
    if cursor is not None:
        if not (cursor[:1] == "o" and cursor[1:].isdigit()):
            raise ValueError(f"unknown cursor {cursor!r}; send the nextCursor of the previous page, or none")
        start = int(cursor[1:])
    page = metas[start : start + LIST_PAGE]
    out: dict[str, Any] = {"sessions": [listed(m) for m in page]}
    if start + LIST_PAGE < len(metas):
        out["nextCursor"] = f"o{start + LIST_PAGE}"
    return out


def listed(meta: dict[str, Any]) -> dict[str, Any]:
    """One `SessionInfo`: id, cwd, title and `updatedAt` when known, and `_meta.agentd` (createdAt, model,
    turns, lockedBy: the live holder or null)."""
    holder = meta.get("lockedBy")
    item: dict[str, Any] = {"sessionId": meta.get("id"), "cwd": meta.get("cwd")}
    if meta.get("title") is not None:
        item["title"] = meta["title"]
    if meta.get("updatedAt") is not None:
        item["updatedAt"] = meta["updatedAt"]
    item["_meta"] = {"agentd": {"createdAt": meta.get("createdAt"), "model": meta.get("model"), "turns": meta.get("turns"),
                                "lockedBy": {"pid": holder["pid"], "hostname": holder["hostname"]} if holder else None}}  # fmt: skip
    return item


# ---- --resume (§3.1) ---------------------------------------------------------------------------------


class DeferredProvider:
    """Stands in for the provider of a `--resume` session until a client loads it with its own configuration
    (no SDK is imported, and no key is needed, before the `initialize` response)."""

    def __init__(self, settings: Any) -> None:
        from agentd.providers.models import DEFAULT_MODELS

        self.name = settings.provider
        self.model = settings.model or DEFAULT_MODELS[settings.provider]

    async def stream(self, request: Any, on_event: Any) -> Any:
        raise RuntimeError("the --resume session has not been loaded by a client yet")

    async def aclose(self) -> None:
        return None
