// The active agentd session of this window and everything that shows it.
//
// Owns: the LanguageClient's lifetime (start, restart on settings change, reopen the session after the
// server restarts), the one active session (PROTOCOL.md §6.1: on start the server's `--resume` session,
// else the workspace's newest unlocked session, else a new one), routing `agentd/session/update` to the
// transcript, the TODO tree and the status bar (a `retry` update as a notice and the turn's state), prompts
// and cancel, and the commands' logic. Approvals are approvals.ts's, shown in the chat panel.

import * as vscode from "vscode";
import { ResponseError, State } from "vscode-languageclient";
import { LanguageClient } from "vscode-languageclient/node";
import { Approvals } from "./approvals";
import { ChatView, FromWebview } from "./chat";
import { CheckpointHost, fork, restore } from "./checkpoints";
import { createClient } from "./client";
import { DiffStore } from "./diffs";
import { e2eLog } from "./e2eLog";
import {
  ClientNotifications,
  ClientRequests,
  Methods,
  RequestPermissionParams,
  SessionInfo,
  SessionNotification,
} from "./protocol";
import { addRequest, emptyUsage, fromStatus, StatusBar, Usage } from "./status";
import { TodoTree } from "./todos";
import { Change, Item, Transcript } from "./transcript";
import { agentdMeta, asUpdate, isDiff, SessionUpdate } from "./updates";

interface Active {
  sessionId: string;
  cwd: string;
  title?: string;
}

/** A `agentd/session/load` in flight: its replay is held here until the load succeeds. */
interface Loading {
  sessionId: string;
  updates: SessionUpdate[];
}

export class Controller implements vscode.Disposable {
  private client?: LanguageClient;
  private active?: Active;
  private loading?: Loading;
  private busy = false;
  private retrying = false;
  private usage?: Usage;
  private opening?: Promise<void>;
  private readonly transcript = new Transcript();
  private readonly diffs = new DiffStore();
  private readonly approvals: Approvals;
  private readonly output = vscode.window.createOutputChannel("agentd", { log: true });
  private readonly status = new StatusBar();
  readonly todos = new TodoTree();
  readonly chat: ChatView;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(context: vscode.ExtensionContext) {
    this.chat = new ChatView(context.extensionUri, {
      items: (): Item[] => this.transcript.all(),
      busy: (): boolean => this.busy,
      title: (): string | undefined => this.active?.title,
      approval: () => this.approvals.current(),
      onMessage: (msg: FromWebview): void => void this.onWebview(msg),
    });
    this.approvals = new Approvals(this.diffs, this.chat);
    this.disposables.push(
      this.approvals,
      this.output,
      this.status,
      this.todos,
      vscode.window.registerWebviewViewProvider("agentd.chat", this.chat, { webviewOptions: { retainContextWhenHidden: true } }),
      vscode.workspace.registerTextDocumentContentProvider("agentd-diff", this.diffs),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration("agentd.path") || e.affectsConfiguration("agentd.args") || e.affectsConfiguration("agentd.env") || e.affectsConfiguration("agentd.initializationOptions")) {
          void this.restart();
        }
      }),
    );
  }

  // ---- server lifetime ------------------------------------------------------------------------------

  async start(): Promise<void> {
    const client = createClient(this.output, (p) => this.output.appendLine(`agentd started (pid ${p.pid})`));
    client.onNotification(Methods.SessionUpdate, (params: SessionNotification) => this.onUpdate(params));
    client.onRequest(Methods.SessionRequestPermission, (params: RequestPermissionParams, token) =>
      this.approvals.handle(params, token),
    );
    client.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        // First start, or the client restarted a crashed server: (re)open the session on this process.
        this.opening = this.openSession().catch((err) => this.fail("Could not open a session", err));
      } else if (e.newState === State.Stopped) {
        this.approvals.clear();
        this.setBusy(false);
      }
    });
    this.client = client;
    try {
      await client.start();
    } catch (err) {
      this.fail("agentd did not start", err);
    }
  }

  async restart(): Promise<void> {
    const old = this.client;
    this.client = undefined;
    if (old) {
      await old.stop().catch(() => undefined);
      await old.dispose().catch(() => undefined);
    }
    await this.start();
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    await c?.stop().catch(() => undefined);
  }

  private request<M extends keyof ClientRequests>(
    method: M,
    params: ClientRequests[M]["params"],
  ): Promise<ClientRequests[M]["result"]> {
    if (!this.client || !this.client.isRunning()) {
      return Promise.reject(new Error("agentd is not running; run “agentd: Restart Server” or check the agentd output."));
    }
    return this.client.sendRequest(method, params) as Promise<ClientRequests[M]["result"]>;
  }

  private notify<M extends keyof ClientNotifications>(method: M, params: ClientNotifications[M]): void {
    void this.client?.sendNotification(method, params);
  }

  // ---- sessions -------------------------------------------------------------------------------------

  private folder(): vscode.WorkspaceFolder | undefined {
    const editor = vscode.window.activeTextEditor;
    const own = editor ? vscode.workspace.getWorkspaceFolder(editor.document.uri) : undefined;
    return own ?? vscode.workspace.workspaceFolders?.[0];
  }

  /** After the server (re)starts: the session we had, else the announced `--resume` session, else the
   * newest unlocked session of the folder, else a new one. */
  private async openSession(): Promise<void> {
    if (this.active) {
      const a = this.active;
      try {
        await this.load(a.sessionId, a.cwd, a.title);
      } catch (err) {
        // The restarted server does not hold the session: show nothing rather than a dead session.
        if (this.active === a) this.switchTo(undefined);
        throw err;
      }
      return;
    }
    const announced = (this.client?.initializeResult?.capabilities.experimental as { agentd?: { resume?: { sessionId: string; cwd: string } } } | undefined)
      ?.agentd?.resume;
    if (announced) {
      await this.load(announced.sessionId, announced.cwd);
      return;
    }
    const folder = this.folder();
    if (!folder) {
      this.notice("Open a folder to work with agentd: sessions are bound to a workspace folder.");
      return;
    }
    if (vscode.workspace.getConfiguration("agentd").get<boolean>("resumeLatestOnStart", true)) {
      const { sessions } = await this.request(Methods.SessionList, { cwd: folder.uri.fsPath });
      const newest = sessions.find((s) => !lockedBy(s));
      if (newest) {
        try {
          await this.load(newest.sessionId, newest.cwd, newest.title);
          return;
        } catch (err) {
          this.output.appendLine(`Could not reopen ${newest.sessionId}: ${message(err)}; starting a new session.`);
        }
      }
    }
    await this.create(folder.uri.fsPath);
  }

  private async create(cwd: string): Promise<void> {
    const result = await this.request(Methods.SessionNew, { cwd });
    this.switchTo({ sessionId: result.sessionId, cwd });
    e2eLog("session", { op: "new", sessionId: result.sessionId, cwd });
    await this.refreshStatus();
  }

  /** Load a session and make it active. The replay is collected while the request runs (PROTOCOL.md §7.5:
   * every replayed update comes before the response) and shown only once the load succeeded, so a failed
   * load (SessionLocked, SessionNotFound, ...) leaves the active session and its views as they were. */
  private async load(sessionId: string, cwd: string, title?: string): Promise<void> {
    const loading: Loading = { sessionId, updates: [] };
    this.loading = loading;
    try {
      await this.request(Methods.SessionLoad, { sessionId, cwd });
    } finally {
      if (this.loading === loading) this.loading = undefined;
    }
    this.switchTo({ sessionId, cwd, title });
    for (const u of loading.updates) this.route(u);
    e2eLog("session", { op: "load", sessionId, cwd });
    await this.refreshStatus();
  }

  /** Make a session active (or none) with empty views; the replay of `load` fills them. */
  private switchTo(a: Active | undefined): void {
    this.active = a;
    this.transcript.clear();
    this.diffs.clear();
    this.todos.set([]);
    this.usage = undefined;
    this.chat.reset();
    this.render();
  }

  private async closeActive(): Promise<void> {
    const a = this.active;
    if (!a) return;
    this.active = undefined;
    await this.close(a);
  }

  /** Release a session on the server (its lock); errors are only logged. */
  private async close(a: Active): Promise<void> {
    await this.request(Methods.SessionClose, { sessionId: a.sessionId }).catch((err) =>
      this.output.appendLine(`close ${a.sessionId}: ${message(err)}`),
    );
  }

  async newSession(): Promise<void> {
    await this.opening;
    const folder = this.folder();
    if (!folder) {
      void vscode.window.showWarningMessage("agentd: open a folder first; sessions are bound to a workspace folder.");
      return;
    }
    try {
      await this.closeActive();
      await this.create(folder.uri.fsPath);
      this.chat.focusPrompt();
    } catch (err) {
      this.fail("Could not start a new session", err);
    }
  }

  async resumeSession(): Promise<void> {
    await this.opening;
    let sessions: SessionInfo[];
    try {
      sessions = (await this.request(Methods.SessionList, {})).sessions;
    } catch (err) {
      this.fail("Could not list sessions", err);
      return;
    }
    // A session without a single turn has nothing to resume.
    sessions = sessions.filter((s) => agentdMeta(s).turns !== 0);
    if (!sessions.length) {
      void vscode.window.showInformationMessage("agentd: this workspace has no stored sessions with a conversation yet.");
      return;
    }
    const items = sessions.map((s) => sessionPick(s, this.active?.sessionId));
    const picked = await vscode.window.showQuickPick(items, {
      title: "Resume an agentd session",
      placeHolder: "Sessions of this workspace, newest first",
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (!picked) return;
    const previous = this.active;
    try {
      // Load first: if the session is locked elsewhere (or gone), the current one stays open and shown.
      await this.load(picked.session.sessionId, picked.session.cwd, picked.session.title);
    } catch (err) {
      const kept = this.active ? ` The current session (${this.active.title || this.active.sessionId}) is still open.` : "";
      if (errorName(err) === "SessionLocked") {
        // agentd has already shown a window/showMessage for the lock (PROTOCOL.md §6.2): no second popup.
        this.fail("That session is open elsewhere", err, kept, false);
      } else {
        this.fail("Could not resume the session", err, kept);
      }
      return;
    }
    if (previous && previous.sessionId !== picked.session.sessionId) {
      await this.close(previous);
    }
  }

  cancel(): void {
    if (this.active && this.busy) {
      this.notify(Methods.SessionCancel, { sessionId: this.active.sessionId });
      e2eLog("cancel", { sessionId: this.active.sessionId });
    }
  }

  async prompt(text: string): Promise<void> {
    await this.opening;
    if (this.busy) return;
    try {
      if (!this.active) {
        const folder = this.folder();
        if (!folder) throw new Error("Open a folder first: sessions are bound to a workspace folder.");
        await this.create(folder.uri.fsPath);
      }
    } catch (err) {
      this.fail("Could not start a session", err);
      return;
    }
    const a = this.active!;
    this.apply(this.transcript.addUser(text));
    this.setBusy(true);
    e2eLog("prompt", { sessionId: a.sessionId, text });
    try {
      const { stopReason } = await this.request(Methods.SessionPrompt, {
        sessionId: a.sessionId,
        prompt: [{ type: "text", text }],
      });
      e2eLog("prompt_result", { sessionId: a.sessionId, stopReason });
      if (stopReason !== "end_turn" && this.active === a) {
        this.notice(STOP_TEXT[stopReason] ?? `The turn ended: ${stopReason}.`);
      }
    } catch (err) {
      e2eLog("prompt_error", { sessionId: a.sessionId, message: message(err) });
      if (this.active === a) this.notice(message(err), "error");
    } finally {
      this.setBusy(false);
      await this.refreshStatus();
    }
  }

  private async refreshStatus(): Promise<void> {
    const a = this.active;
    if (!a) return;
    try {
      const s = await this.request(Methods.SessionStatus, { sessionId: a.sessionId });
      e2eLog("status", { sessionId: a.sessionId, status: s });
      if (this.active === a) {
        this.usage = fromStatus(s);
        this.render();
      }
    } catch (err) {
      this.output.appendLine(`status: ${message(err)}`);
    }
  }

  // ---- updates --------------------------------------------------------------------------------------

  private onUpdate(params: SessionNotification): void {
    e2eLog("update", { params });
    const u = asUpdate(params.update);
    if (!u) return;
    const loading = this.loading;
    if (loading && params.sessionId === loading.sessionId && (agentdMeta(params).replay === true || params.sessionId !== this.active?.sessionId)) {
      loading.updates.push(u);
      return;
    }
    if (params.sessionId !== this.active?.sessionId) return;
    this.route(u);
  }

  private route(u: SessionUpdate): void {
    if (u.sessionUpdate !== "retry" && this.retrying) {
      this.retrying = false; // the turn moved on
      this.chat.setState("");
    }
    switch (u.sessionUpdate) {
      case "retry": {
        const secs = u.delayS >= 10 || Number.isInteger(u.delayS) ? Math.round(u.delayS) : u.delayS.toFixed(1);
        this.notice(`Retrying in ${secs} s (attempt ${u.attempt} failed: ${u.message})`);
        this.chat.setState(`Retrying in ${secs} s…`);
        this.retrying = true;
        break;
      }
      case "agent_message_chunk":
      case "agent_thought_chunk":
      case "user_message_chunk":
        this.apply(this.transcript.chunk(u));
        break;
      case "tool_call":
      case "tool_call_update": {
        const diff = (u.content ?? []).find(isDiff);
        if (diff) this.diffs.put(u.toolCallId, diff.path, diff.oldText, diff.newText);
        this.apply(this.transcript.toolCall(u));
        break;
      }
      case "plan":
        this.todos.set(u.entries ?? []);
        break;
      case "usage_update": {
        const usage = this.usage ?? emptyUsage();
        if (u.used !== undefined) usage.used = u.used;
        if (u.size !== undefined) usage.size = u.size;
        if (u.cost) usage.cost = u.cost;
        const req = agentdMeta(u).request;
        if (req) addRequest(usage, req);
        this.usage = usage;
        this.render();
        break;
      }
      case "session_info_update":
        if (this.active && u.title !== undefined) {
          this.active.title = u.title ?? undefined;
          this.render();
        }
        break;
      case "current_mode_update":
        if (this.usage) this.usage.mode = u.currentModeId;
        this.render();
        break;
      case "checkpoint":
        if (u.before === "prompt") this.apply(this.transcript.checkpoint(u.checkpointId, u.messageId));
        if (u.error) this.notice(`The checkpoint of the workspace failed (${u.error}); the turn goes on without it.`, "error");
        break;
    }
  }

  // ---- checkpoints (issue 13) -----------------------------------------------------------------------

  private checkpointHost(): CheckpointHost {
    return {
      rewind: (params) => this.request(Methods.SessionRewind, params),
      fork: (sessionId, at) => this.request(Methods.SessionFork, { sessionId, at }),
      open: async (sessionId, title) => {
        const previous = this.active;
        await this.load(sessionId, previous?.cwd ?? this.folder()?.uri.fsPath ?? "", title ?? previous?.title);
        if (previous && previous.sessionId !== sessionId) await this.close(previous);
      },
      notice: (text, level) => this.notice(text, level),
    };
  }

  private async checkpointAction(kind: "restore" | "fork", checkpoint: string): Promise<void> {
    await this.opening;
    const a = this.active;
    if (!a) return;
    if (this.busy) {
      void vscode.window.showWarningMessage("agentd: a turn is running; cancel it first, then restore or fork.");
      return;
    }
    try {
      if (kind === "restore") await restore(this.checkpointHost(), a.sessionId, checkpoint, a.title);
      else await fork(this.checkpointHost(), a.sessionId, checkpoint);
    } catch (err) {
      this.fail(kind === "restore" ? "Could not restore the checkpoint" : "Could not fork the session", err);
    }
  }

  // ---- views ----------------------------------------------------------------------------------------

  private async onWebview(msg: FromWebview): Promise<void> {
    switch (msg.type) {
      case "prompt":
        return this.prompt(msg.text);
      case "cancel":
        return this.cancel();
      case "openDiff":
        await this.diffs.open(msg.toolCallId);
        return;
      case "approve":
        this.approvals.answer(msg.requestId, msg.optionId, msg.via);
        return;
      case "showApprovalDiff":
        await this.approvals.showDiff();
        return;
      case "openFile":
        await vscode.window.showTextDocument(vscode.Uri.file(msg.path), { preview: true });
        return;
      case "newSession":
        return this.newSession();
      case "resumeSession":
        return this.resumeSession();
      case "restoreCheckpoint":
        return this.checkpointAction("restore", msg.checkpoint);
      case "fork":
        return this.checkpointAction("fork", msg.checkpoint);
    }
  }

  private apply(changes: Change[]): void {
    this.chat.apply(changes);
  }

  private notice(text: string, level: "info" | "error" = "info"): void {
    this.apply(this.transcript.addNotice(text, level));
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    void vscode.commands.executeCommand("setContext", "agentd.busy", busy);
    this.chat.setBusy(busy);
    this.render();
  }

  private render(): void {
    this.status.render(this.usage, this.busy, this.active?.title);
    this.chat.setTitle(this.active?.title);
  }

  private fail(what: string, err: unknown, after = "", popup = true): void {
    const text = `${what}: ${message(err)}${after}`;
    this.output.appendLine(text);
    this.notice(text, "error");
    if (popup) void vscode.window.showErrorMessage(`agentd: ${text}`, "Show Log").then((b) => b && this.output.show());
  }

  showLog(): void {
    this.output.show();
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
  }
}

const STOP_TEXT: Record<string, string> = {
  cancelled: "Turn cancelled.",
  max_tokens: "The reply hit the output-token limit (maxOutputTokens) or the context window.",
  max_turn_requests: "The turn made its maximum number of model requests (maxTurnRequests); send a prompt to continue.",
  refusal: "The model refused to continue.",
};

/** `error.data.name` of a JSON-RPC error answer (PROTOCOL.md §11), e.g. "SessionLocked". */
function errorName(err: unknown): string | undefined {
  const data = err instanceof ResponseError ? (err.data as { name?: unknown } | undefined) : undefined;
  return typeof data?.name === "string" ? data.name : undefined;
}

function message(err: unknown): string {
  if (err instanceof ResponseError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}

function lockedBy(s: SessionInfo): { pid?: number; hostname?: string } | null {
  const holder = agentdMeta(s).lockedBy;
  return typeof holder === "object" && holder !== null ? (holder as { pid?: number; hostname?: string }) : null;
}

interface SessionPick extends vscode.QuickPickItem {
  session: SessionInfo;
}

function sessionPick(s: SessionInfo, current: string | undefined): SessionPick {
  const meta = agentdMeta(s);
  const holder = lockedBy(s);
  const bits: string[] = [];
  if (s.updatedAt) bits.push(ago(s.updatedAt));
  if (typeof meta.turns === "number") bits.push(`${meta.turns} turn${meta.turns === 1 ? "" : "s"}`);
  if (s.sessionId === current) bits.push("current");
  else if (holder) bits.push(`open in agentd pid ${holder.pid ?? "?"}`);
  return {
    label: `${holder && s.sessionId !== current ? "$(lock) " : ""}${s.title || "(untitled session)"}`,
    description: bits.join(" · "),
    detail: `${s.sessionId} — ${s.cwd}`,
    session: s,
  };
}

function ago(iso: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(t).toLocaleDateString();
}
