// `agentd/session/requestPermission` (PROTOCOL.md §6.10): a modal with "Allow once", "Always" and "Deny",
// and, for edits, the proposed change open in VS Code's diff editor while the user decides.
//
// "Deny" and a dismissed dialog answer `reject_once`, never `cancelled` (which would end the whole turn).
// When agentd withdraws the request ($/cancelRequest: timeout or a cancelled turn) the late answer is
// ignored by agentd; the dialog cannot be closed programmatically, so it simply answers into the void.

import * as vscode from "vscode";
import { CancellationToken } from "vscode-languageclient";
import { DiffStore } from "./diffs";
import { e2eLog } from "./e2eLog";
import type { RequestPermissionParams, RequestPermissionResponse } from "./protocol";
import { agentdMeta, diffStats, isDiff, isWrapped } from "./updates";
import { visible } from "./visible";

interface Button extends vscode.MessageItem {
  kind: "allow_once" | "allow_always" | "reject_once";
}

// "Deny" is the close affordance: Escape and the dialog's X answer reject_once, and VS Code adds no
// separate "Cancel" button.
const BUTTONS: Button[] = [
  { title: "Allow once", kind: "allow_once" },
  { title: "Always", kind: "allow_always" },
  { title: "Deny", kind: "reject_once", isCloseAffordance: true },
];

/** The question and the details of the modal, with bidi controls and invisible characters escaped (H20). */
export function describe(params: RequestPermissionParams): { message: string; detail: string } {
  const call = params.toolCall;
  const meta = agentdMeta(params);
  const title = (typeof meta.title === "string" && meta.title) || call.title;
  const lines: string[] = [];
  if (typeof meta.description === "string") {
    lines.push(meta.description);
  }
  for (const c of call.content ?? []) {
    if (isDiff(c)) {
      const { added, removed } = diffStats(c.oldText, c.newText);
      const where = vscode.workspace.asRelativePath(c.path, false);
      lines.push(`${where}: +${added} −${removed} lines. The proposed change is open in the diff editor.`);
    } else if (isWrapped(c) && c.content.text) {
      lines.push(c.content.text);
    }
  }
  if (typeof meta.timeoutS === "number") {
    lines.push(`Unanswered, this is denied after ${meta.timeoutS} s.`);
  }
  // Titles quote commands in backticks (PROTOCOL.md §7.3); a dialog shows no markdown, so use quotes.
  const plain = title.replace(/`([^`]*)`/g, "“$1”");
  const verb = plain.charAt(0).toLowerCase() + plain.slice(1);
  return { message: visible(`Allow agentd to ${verb}?`, true), detail: visible(lines.join("\n\n")) };
}

function optionFor(params: RequestPermissionParams, kind: string): string {
  return params.options.find((o) => o.kind === kind)?.optionId ?? kind;
}

export class Approvals {
  constructor(private readonly diffs: DiffStore) {}

  async handle(params: RequestPermissionParams, token: CancellationToken): Promise<RequestPermissionResponse> {
    const call = params.toolCall;
    const diff = (call.content ?? []).find(isDiff);
    if (diff) {
      this.diffs.put(call.toolCallId, diff.path, diff.oldText, diff.newText);
      await this.diffs.open(call.toolCallId, { preserveFocus: true, pinned: true });
    }
    e2eLog("approval_asked", { sessionId: params.sessionId, toolCallId: call.toolCallId, title: call.title });
    const { message, detail } = describe(params);
    const picked = await vscode.window.showWarningMessage(message, { modal: true, detail }, ...BUTTONS);
    const optionId = optionFor(params, picked?.kind ?? "reject_once");
    if (diff) {
      await this.diffs.close(call.toolCallId);
    }
    e2eLog("approval", {
      sessionId: params.sessionId,
      toolCallId: call.toolCallId,
      button: picked?.title ?? null,
      optionId,
      withdrawn: token.isCancellationRequested,
    });
    return { outcome: { outcome: "selected", optionId } };
  }
}
