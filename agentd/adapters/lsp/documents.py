"""The editor as the agent's hands (PROTOCOL.md §8): open buffers and edits through `workspace/applyEdit`.

Owns: `OpenDocuments`, the overlay `read_file` (and the "before" side of a diff) reads unsaved buffers from
and `grep` searches (`read_text(path)`, `open_paths()`: the `DocumentOverlay` of `agentd.tools.base`); and `Editor`, which applies a
`write_file`/`edit_file` change to an open document with `workspace/applyEdit` (the `editor` of the
ToolContext). Buffer texts come from pygls' workspace, which applies `didOpen`/`didChange` (incremental,
UTF-16 positions)/`didClose`; this module only maps real paths (symlinks resolved) to `file:` URIs.
Non-`file:` documents are ignored.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger("agentd.lsp.documents")


def _real(uri: str) -> str | None:
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.realpath(path) if path else None


class OpenDocuments:
    """Open `file:` documents of one connection, by real path (PROTOCOL.md §8.1)."""

    def __init__(self, server: LanguageServer) -> None:
        self._server = server
        self._uris: dict[str, str] = {}  # real path -> uri as the client sent it
        self.unsaved: set[str] = set()  # real paths with agentd edits applied but not saved (§8.2)

    def opened(self, uri: str) -> None:
        path = _real(uri)
        if path is not None:
            self._uris[path] = uri

    def closed(self, uri: str) -> None:
        path = _real(uri)
        if path is not None:
            self._uris.pop(path, None)
            self.unsaved.discard(path)

    def saved(self, uri: str) -> None:
        path = _real(uri)
        if path is not None:
            self.unsaved.discard(path)

    def uri_of(self, path: Path | str) -> str | None:
        return self._uris.get(os.path.realpath(path))

    def document(self, path: Path | str) -> TextDocument | None:
        """The open document for `path`, or None when it is not open."""
        uri = self.uri_of(path)
        if uri is None:
            return None
        docs: dict[str, TextDocument] = self._server.workspace.text_documents
        from urllib.parse import unquote

        return docs.get(unquote(uri))

    def read_text(self, path: Path) -> str | None:
        """The buffer text of `path` if it is open in the editor, else None."""
        doc = self.document(path)
        return doc.source if doc is not None else None

    def open_paths(self) -> list[Path]:
        """Real paths of the open `file:` documents, sorted (`grep` searches their unsaved text)."""
        return [Path(p) for p in sorted(self._uris)]


def _end_position(text: str) -> types.Position:
    """The position after the last character, in UTF-16 code units (the LSP default encoding)."""
    lines = text.split("\n")
    last = lines[-1]
    return types.Position(line=len(lines) - 1, character=len(last.encode("utf-16-le")) // 2)


class Editor:
    """Applies tool writes to open documents through `workspace/applyEdit` (PROTOCOL.md §8.2).

    `apply_edit(path, old_text, new_text, label)` returns None when the change must go to disk (the file
    is not open, or the client lacks `workspace.applyEdit`), `(True, note)` when the editor applied it
    (`note`: the "not saved to disk yet" text of CONTRACTS.md §11 when the client will not save it, else
    None) and `(False, reason)` when it did not (the caller gives the model the "did not apply" text).
    """

    def __init__(self, server: LanguageServer, docs: OpenDocuments, caps: Any) -> None:
        self._server = server
        self._docs = docs
        self._caps = caps

    def unsaved_paths(self) -> list[str]:
        """Real paths with agentd edits applied in the editor and not saved yet (no `didSave` since)."""
        return sorted(self._docs.unsaved)

    async def apply_edit(
        self, path: Path, old_text: str | None, new_text: str, label: str = ""
    ) -> tuple[bool, str | None] | None:
        if not self._caps.apply_edit:
            return None
        doc = self._docs.document(path)
        uri = self._docs.uri_of(path)
        if doc is None or uri is None:
            return None
        if old_text is not None and doc.source != old_text:
            return False, "the buffer changed after agentd read it"
        version = doc.version
        edit = types.TextEdit(
            range=types.Range(start=types.Position(line=0, character=0), end=_end_position(doc.source)),
            new_text=new_text,
        )
        name = label or f"agentd: Write {os.path.basename(path)}"
        if self._caps.document_changes:
            wedit = types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                        edits=[edit],
                    )
                ]
            )
        else:
            if doc.version != version:  # `changes` carry no version: compare right before sending
                return False, "the buffer changed after agentd read it"
            wedit = types.WorkspaceEdit(changes={uri: [edit]})
        try:
            result = await self._server.protocol.send_request_async(
                types.WORKSPACE_APPLY_EDIT, types.ApplyWorkspaceEditParams(edit=wedit, label=name)
            )
        except Exception as exc:  # an error response: not applied
            log.info("workspace/applyEdit for %s failed: %s", path, exc)
            return False, f"the editor answered an error: {exc}"
        result = result if isinstance(result, dict) else {}
        if not result.get("applied"):
            return False, str(result.get("failureReason") or "the editor did not apply it")
        if self._caps.save_after_apply:
            return True, None
        self._docs.unsaved.add(os.path.realpath(path))
        return True, f"Applied in the editor; {path} is not saved to disk yet."
