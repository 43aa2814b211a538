// Proposed edits in VS Code's diff editor.
//
// Owns: a read-only `agentd-diff:` document provider holding the before/after texts of every edit tool call
// (the `diff` content of PROTOCOL.md §7.3, §6.10), opening them with `vscode.diff`, and closing that tab
// again once an approval is answered.

import * as path from "path";
import * as vscode from "vscode";
import { visible } from "./visible";

export const SCHEME = "agentd-diff";

interface Pair {
  before: vscode.Uri;
  after: vscode.Uri;
  title: string;
}

export class DiffStore implements vscode.TextDocumentContentProvider {
  private texts = new Map<string, string>();
  private pairs = new Map<string, Pair>();

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }

  /** Remember the diff of a tool call; the latest one wins. */
  put(toolCallId: string, filePath: string, oldText: string | null | undefined, newText: string): Pair {
    const name = path.basename(filePath) || "file";
    const id = encodeURIComponent(toolCallId);
    const before = vscode.Uri.from({ scheme: SCHEME, path: `/${id}/before/${name}` });
    const after = vscode.Uri.from({ scheme: SCHEME, path: `/${id}/after/${name}` });
    this.texts.set(before.toString(), oldText ?? "");
    this.texts.set(after.toString(), newText);
    const state = oldText == null || oldText === "" ? "new file" : "current";
    const title = `${visible(name, true)} (${state} ↔ proposed by agentd)`;
    const pair = { before, after, title };
    this.pairs.set(toolCallId, pair);
    return pair;
  }

  has(toolCallId: string): boolean {
    return this.pairs.has(toolCallId);
  }

  /** Open the diff of a tool call. While approving, `pinned` keeps it out of the preview slot so it never
   * replaces (and closes) a previewed editor of the same file, whose buffer agentd may be about to edit. */
  async open(toolCallId: string, opts: { preserveFocus?: boolean; pinned?: boolean } = {}): Promise<boolean> {
    const pair = this.pairs.get(toolCallId);
    if (!pair) {
      return false;
    }
    await vscode.commands.executeCommand("vscode.diff", pair.before, pair.after, pair.title, {
      preview: !opts.pinned,
      preserveFocus: opts.preserveFocus ?? false,
    });
    return true;
  }

  /** Close the diff tab of a tool call, if it is open. */
  async close(toolCallId: string): Promise<void> {
    const pair = this.pairs.get(toolCallId);
    if (!pair) {
      return;
    }
    const tabs = vscode.window.tabGroups.all
      .flatMap((g) => g.tabs)
      .filter((t) => t.input instanceof vscode.TabInputTextDiff && t.input.modified.toString() === pair.after.toString());
    if (tabs.length) {
      await vscode.window.tabGroups.close(tabs);
    }
  }

  clear(): void {
    this.texts.clear();
    this.pairs.clear();
  }
}
