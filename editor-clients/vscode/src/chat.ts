// The chat webview view: the transcript of the active session (streamed text, thoughts, tool-call cards),
// the session's title (wrapped, never cut), the pending approval (approvals.ts: a card above the prompt
// box, beside the proposed diff), the turn's state (retries included) and a prompt box. The webview only renders (its script is webview/chat.js, inlined with the page's
// nonce); the transcript lives in the extension host (transcript.ts), which sends it whole on (re)load and
// as changes afterwards, a streamed chunk as its text alone (`append`). Content Security Policy: no
// network, scripts only with this page's nonce.

import * as crypto from "crypto";
import * as vscode from "vscode";
import type { Card } from "./approvals";
import { Change, Item } from "./transcript";
import script from "./webview/chat.js" with { type: "text" };

/** What the webview sends. */
export type FromWebview =
  | { type: "ready" }
  | { type: "prompt"; text: string }
  | { type: "cancel" }
  | { type: "openDiff"; toolCallId: string }
  | { type: "openFile"; path: string }
  | { type: "newSession" }
  | { type: "resumeSession" }
  | { type: "approve"; requestId: string; optionId: string; via: string }
  | { type: "showApprovalDiff" }
  | { type: "restoreCheckpoint"; checkpoint: string }
  | { type: "fork"; checkpoint: string };

export interface ChatSource {
  items(): Item[];
  busy(): boolean;
  title(): string | undefined;
  approval(): Card | undefined;
  onMessage(msg: FromWebview): void;
}

export class ChatView implements vscode.WebviewViewProvider {
  private view?: vscode.WebviewView;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly source: ChatSource,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = this.html(view.webview, media);
    view.webview.onDidReceiveMessage((msg: FromWebview) => {
      if (msg.type === "ready") {
        this.reset();
      } else {
        this.source.onMessage(msg);
      }
    });
    view.onDidDispose(() => (this.view = undefined));
    this.setTitle(this.source.title());
  }

  reset(): void {
    void this.view?.webview.postMessage({ type: "reset", items: this.source.items(), busy: this.source.busy() });
    void this.view?.webview.postMessage({ type: "title", title: this.source.title() ?? "" });
    void this.view?.webview.postMessage({ type: "approval", card: this.source.approval() ?? null });
  }

  /** Shows (or clears) the pending approval; a hidden panel is revealed without taking the focus. */
  showApproval(card: Card | undefined): void {
    if (card && this.view && !this.view.visible) {
      this.view.show(true);
    }
    void this.view?.webview.postMessage({ type: "approval", card: card ?? null });
  }

  /** The turn's state under the transcript ("Retrying in 4 s…"), or "" for the default. */
  setState(text: string): void {
    void this.view?.webview.postMessage({ type: "state", text });
  }

  apply(changes: Change[]): void {
    for (const c of changes) {
      const msg =
        c.op === "upsert"
          ? { type: "upsert", item: c.item }
          : c.op === "append"
            ? { type: "append", id: c.id, messageId: c.messageId, text: c.text }
            : { type: "remove", ids: c.ids };
      void this.view?.webview.postMessage(msg);
    }
  }

  setBusy(busy: boolean): void {
    void this.view?.webview.postMessage({ type: "busy", busy });
  }

  setTitle(title: string | undefined): void {
    if (this.view) {
      this.view.description = title;
    }
    void this.view?.webview.postMessage({ type: "title", title: title ?? "" });
  }

  focusPrompt(): void {
    void this.view?.webview.postMessage({ type: "focus" });
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = crypto.randomBytes(16).toString("base64");
    const css = webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.css"));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `font-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `script-src 'nonce-${nonce}'`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${css}">
<title>agentd chat</title>
</head>
<body>
<header id="title" aria-label="Session title" hidden></header>
<main id="log" role="log" aria-live="polite" aria-label="Conversation">
  <p class="empty" id="empty">Ask agentd to do something in this workspace. It plans with a TODO list, reads and edits files, runs commands, and asks before anything risky.</p>
</main>
<section id="approval" role="region" aria-label="Approval" hidden></section>
<form id="composer" aria-label="Prompt">
  <textarea id="prompt" rows="3" aria-label="Prompt" placeholder="Ask agentd… (Enter to send, Shift+Enter for a new line)"></textarea>
  <div class="actions">
    <span id="state" aria-live="polite"></span>
    <button type="button" id="cancel" class="secondary" hidden>Cancel</button>
    <button type="submit" id="send">Send</button>
  </div>
</form>
<script nonce="${nonce}">${script.replace(/<\/(script)/gi, "<\\/$1")}</script>
</body>
</html>`;
  }
}
