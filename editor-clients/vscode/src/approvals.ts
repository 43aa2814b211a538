// `agentd/session/requestPermission` (PROTOCOL.md §6.10): the approval is asked in the chat panel, beside
// the proposed change open in VS Code's diff editor, which stays free to scroll (no modal covers it).
//
// Owns: the queue of pending approvals (one shown at a time, in arrival order), what the panel shows for one
// (`Card`: the question, the details, and the request's own options, in its order, never a fixed list),
// answering from the panel's buttons, from its keys, or from the commands `agentd.approval.*` (bound to
// Ctrl+Enter, Ctrl+Shift+Enter and Ctrl+Backspace while the proposed diff has the focus), and withdrawing
// a request agentd cancelled ($/cancelRequest: a timeout or a cancelled turn). A "Deny" answers
// `reject_once`, never `cancelled` (which would end the whole turn). Every text of the card has its bidi
// controls and invisible characters escaped (visible.ts, H20), so a command cannot look like another.

import * as vscode from "vscode";
import { CancellationToken } from "vscode-languageclient";
import { DiffStore } from "./diffs";
import { e2eLog } from "./e2eLog";
import type { PermissionOption, RequestPermissionParams, RequestPermissionResponse } from "./protocol";
import { agentdMeta, diffStats, isDiff, isWrapped } from "./updates";
import { visible } from "./visible";

/** One option as the panel shows it: its name, kind and the key that picks it. */
export interface CardOption {
  optionId: string;
  name: string;
  kind: string;
  /** e.g. "Ctrl+Enter"; only the first option of each of three kinds has one. */
  shortcut?: string;
  /** `_meta.agentd.rule` of an option that adds a permission rule (`run_command(npm test)`). */
  rule?: string;
}

/** What the chat panel shows for one pending approval. */
export interface Card {
  requestId: string;
  question: string;
  description?: string;
  /** `+3 −0 lines in idna/core.py`, for an edit. */
  summary?: string;
  /** The command line and its directory, for `run_command`. */
  command?: string;
  hasDiff: boolean;
  options: CardOption[];
  /** Milliseconds since the epoch when agentd stops waiting, if it said. */
  expiresAt?: number;
}

/** The answers the commands and their keys pick, by option kind. */
export const SHORTCUTS: Record<string, { command: string; key: string }> = {
  allow_once: { command: "agentd.approval.allowOnce", key: "Ctrl+Enter" },
  allow_always: { command: "agentd.approval.allowAlways", key: "Ctrl+Shift+Enter" },
  reject_once: { command: "agentd.approval.reject", key: "Ctrl+Backspace" },
};

/** The question: "Allow agentd to edit idna/core.py?" (titles quote commands in backticks, shown as quotes). */
export function question(params: RequestPermissionParams): string {
  const meta = agentdMeta(params);
  const title = (typeof meta.title === "string" && meta.title) || params.toolCall.title;
  const plain = title.replace(/`([^`]*)`/g, "“$1”");
  return visible(`Allow agentd to ${plain.charAt(0).toLowerCase()}${plain.slice(1)}?`, true);
}

/** The panel's card for a request: every option the request carries, in its order. */
export function card(requestId: string, params: RequestPermissionParams): Card {
  const call = params.toolCall;
  const meta = agentdMeta(params);
  const c: Card = { requestId, question: question(params), hasDiff: false, options: [] };
  if (typeof meta.description === "string") c.description = visible(meta.description, true);
  for (const item of call.content ?? []) {
    if (isDiff(item)) {
      const { added, removed } = diffStats(item.oldText, item.newText);
      c.summary = visible(`+${added} −${removed} lines in ${vscode.workspace.asRelativePath(item.path, false)}`, true);
      c.hasDiff = true;
    } else if (isWrapped(item) && item.content.text) {
      c.command = visible(item.content.text);
    }
  }
  const seen = new Set<string>();
  c.options = params.options.map((o: PermissionOption) => {
    const opt: CardOption = { optionId: o.optionId, name: visible(o.name, true), kind: o.kind };
    const rule = agentdMeta(o).rule;
    if (typeof rule === "string") opt.rule = visible(rule, true);
    const sc = SHORTCUTS[o.kind];
    if (sc && !seen.has(o.kind)) {
      seen.add(o.kind);
      opt.shortcut = sc.key;
    }
    return opt;
  });
  const expires = typeof meta.expiresAt === "string" ? Date.parse(meta.expiresAt) : NaN;
  if (!Number.isNaN(expires)) c.expiresAt = expires;
  return c;
}

/** Where the panel is: shows a card or clears it. */
export interface ApprovalView {
  showApproval(card: Card | undefined): void;
}

interface Pending {
  id: string;
  params: RequestPermissionParams;
  card: Card;
  resolve: (optionId: string, via: string) => void;
  done: boolean;
}

export class Approvals implements vscode.Disposable {
  private queue: Pending[] = [];
  private seq = 0;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly diffs: DiffStore,
    private readonly view: ApprovalView,
  ) {
    for (const [kind, sc] of Object.entries(SHORTCUTS)) {
      this.disposables.push(vscode.commands.registerCommand(sc.command, () => this.answerKind(kind, "command")));
    }
    this.disposables.push(vscode.commands.registerCommand("agentd.approval.showDiff", () => this.showDiff()));
  }

  /** The approval on screen (the oldest pending one). */
  current(): Card | undefined {
    return this.queue[0]?.card;
  }

  async handle(params: RequestPermissionParams, token: CancellationToken): Promise<RequestPermissionResponse> {
    const call = params.toolCall;
    const id = `approval-${++this.seq}`;
    const diff = (call.content ?? []).find(isDiff);
    if (diff) this.diffs.put(call.toolCallId, diff.path, diff.oldText, diff.newText);
    const optionId = await new Promise<string>((resolve) => {
      const p: Pending = {
        id,
        params,
        card: card(id, params),
        done: false,
        resolve: (option, via) => {
          if (p.done) return;
          p.done = true;
          e2eLog("approval", {
            sessionId: params.sessionId,
            toolCallId: call.toolCallId,
            optionId: option,
            button: params.options.find((o) => o.optionId === option)?.name ?? null,
            via,
            withdrawn: token.isCancellationRequested,
          });
          resolve(option);
          void this.next(p);
        },
      };
      token.onCancellationRequested(() => p.resolve(reject(params), "withdrawn"));
      this.queue.push(p);
      if (this.queue.length === 1) void this.show(p);
    });
    return { outcome: { outcome: "selected", optionId } };
  }

  /** An answer from the panel: the option of the card `requestId`. */
  answer(requestId: string, optionId: string, via: string): void {
    const p = this.queue[0];
    if (p && p.id === requestId && p.params.options.some((o) => o.optionId === optionId)) {
      p.resolve(optionId, via);
    }
  }

  /** A shortcut: the first option of `kind` of the approval on screen (Deny without one: reject_once). */
  answerKind(kind: string, via: string): void {
    const p = this.queue[0];
    if (!p) return;
    const option = p.params.options.find((o) => o.kind === kind)?.optionId;
    if (option) p.resolve(option, via);
    else if (kind === "reject_once") p.resolve(reject(p.params), via);
  }

  async showDiff(): Promise<void> {
    const p = this.queue[0];
    if (p?.card.hasDiff) await this.diffs.open(p.params.toolCall.toolCallId, { preserveFocus: false, pinned: true });
  }

  private async show(p: Pending): Promise<void> {
    void vscode.commands.executeCommand("setContext", "agentd.awaitingApproval", true);
    this.view.showApproval(p.card);
    e2eLog("approval_asked", {
      sessionId: p.params.sessionId,
      toolCallId: p.params.toolCall.toolCallId,
      title: p.params.toolCall.title,
      options: p.card.options,
    });
    if (p.card.hasDiff) {
      // beside the panel, without taking the focus; pinned, so it never replaces a previewed editor of the
      // same file, which agentd may be about to edit
      await this.diffs.open(p.params.toolCall.toolCallId, { preserveFocus: true, pinned: true });
    }
  }

  private async next(done: Pending): Promise<void> {
    this.queue = this.queue.filter((q) => q !== done);
    if (done.card.hasDiff) await this.diffs.close(done.params.toolCall.toolCallId);
    const p = this.queue[0];
    if (p) {
      await this.show(p);
    } else {
      void vscode.commands.executeCommand("setContext", "agentd.awaitingApproval", false);
      this.view.showApproval(undefined);
    }
  }

  /** Every pending approval answered `reject_once` (the server is going away). */
  clear(): void {
    for (const p of [...this.queue]) p.resolve(reject(p.params), "cleared");
  }

  dispose(): void {
    this.clear();
    this.disposables.forEach((d) => d.dispose());
  }
}

function reject(params: RequestPermissionParams): string {
  return params.options.find((o) => o.kind === "reject_once")?.optionId ?? "reject_once";
}
