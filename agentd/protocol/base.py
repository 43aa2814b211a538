"""The base of every wire model (PROTOCOL.md §2). LEAF: imports nothing of agentd.

Owns: `WireModel`, a pydantic model with camelCase aliases, unknown properties ignored and `_meta` kept
(as `meta`), and `validation_errors()`, the `data.errors` list of a `-32602 InvalidParams` answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown properties are ignored (PROTOCOL.md §2)."""

    # defer_build: schemas are built on first use, not at import (the daemon answers `initialize` first)
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )

    meta: dict[str, Any] | None = Field(None, alias="_meta")

    def wire(self) -> dict[str, Any]:
        """The JSON object as sent: aliases, optional fields omitted when unset (never sent as `null`)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def validation_errors(exc: ValidationError) -> list[dict[str, str]]:
    """`[{loc, msg}]` for `data.errors` of InvalidParams: `loc` dotted in wire spelling (`prompt.0.text`)."""
    out = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "params"
        out.append({"loc": loc, "msg": str(err["msg"])})
    return out
