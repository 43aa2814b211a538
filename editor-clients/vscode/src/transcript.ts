// The chat transcript of the active session, kept in the extension host (the webview only renders it).
//
// Owns: turning `agentd/session/update` chunks and tool-call updates into a list of display items, keyed so
// that streamed chunks append to their message (sent on as the chunk alone, never the whole message),
// tool-call updates patch their card, and a retracted
// message (`_meta.agentd.retracts`, PROTOCOL.md §7.2) disappears. Imports no vscode API.

import {
  agentdMeta,
  ChunkUpdate,
  diffStats,
  isDiff,
  isWrapped,
  messageIdOf,
  ToolUpdate,
} from "./updates";

export type Role = "user" | "agent" | "thought";

export interface MessageItem {
  type: "message";
  id: string;
  role: Role;
  messageId?: string;
  text: string;
  /** A user message's checkpoint (`"N"`): the workspace as it was before it, for "Restore checkpoint" and
   * "Fork from here" (PROTOCOL.md §6.12-§6.14). */
  checkpoint?: string;
}

export interface ToolItem {
  type: "tool";
  id: string;
  toolCallId: string;
  title: string;
  kind: string;
  status: string;
  /** "denied", "cancelled", "interrupted" or undefined. */
  outcome?: string;
  /** `+3 −1` for edits. */
  summary?: string;
  /** Text output (command output, listings), cut for display. */
  output?: string;
  hasDiff: boolean;
  path?: string;
}

export interface NoticeItem {
  type: "notice";
  id: string;
  level: "info" | "error";
  text: string;
}

export type Item = MessageItem | ToolItem | NoticeItem;

/** `append`: streamed text for a message already sent whole (only the chunk crosses to the webview). */
export type Change =
  | { op: "upsert"; item: Item }
  | { op: "append"; id: string; messageId?: string; text: string }
  | { op: "remove"; ids: string[] };

const OUTPUT_MAX = 4000;

export class Transcript {
  private items: Item[] = [];
  private byId = new Map<string, Item>();
  private seq = 0;
  /** A prompt's checkpoint that came before its message (the replay sends it first). */
  private pendingCheckpoint?: { id: string; messageId?: string };

  all(): Item[] {
    return [...this.items];
  }

  clear(): void {
    this.items = [];
    this.byId.clear();
    this.pendingCheckpoint = undefined;
  }

  /** A prompt's `checkpoint` update (§7.2): it belongs to the user message with its `messageId`; live, to
   * the prompt just typed (agentd takes the checkpoint as the turn starts); in a replay, to the next one. */
  checkpoint(id: string, messageId?: string): Change[] {
    const byId = messageId ? this.byId.get(`user-${messageId}`) : undefined;
    const last = [...this.items].reverse().find((i): i is MessageItem => i.type === "message" && i.role === "user");
    const target =
      byId?.type === "message" ? byId : last && last.id.startsWith("local-") && last.checkpoint === undefined ? last : undefined;
    if (!target) {
      this.pendingCheckpoint = { id, messageId };
      return [];
    }
    target.checkpoint = id;
    return [{ op: "upsert", item: target }];
  }

  /** A prompt typed in this window (agentd echoes prompts only during replay). */
  addUser(text: string): Change[] {
    return [this.push({ type: "message", id: `local-${++this.seq}`, role: "user", text })];
  }

  addNotice(text: string, level: "info" | "error" = "info"): Change[] {
    return [this.push({ type: "notice", id: `notice-${++this.seq}`, level, text })];
  }

  chunk(update: ChunkUpdate): Change[] {
    const changes: Change[] = [];
    const meta = agentdMeta(update);
    if (meta.retracts) {
      const gone = this.items.filter((i) => i.type === "message" && i.messageId === meta.retracts).map((i) => i.id);
      if (gone.length) {
        this.items = this.items.filter((i) => !gone.includes(i.id));
        gone.forEach((id) => this.byId.delete(id));
        changes.push({ op: "remove", ids: gone });
      }
    }
    const text = update.content?.type === "text" ? update.content.text ?? "" : `[${update.content?.type} content]`;
    const role: Role =
      update.sessionUpdate === "user_message_chunk" ? "user" : update.sessionUpdate === "agent_thought_chunk" ? "thought" : "agent";
    const messageId = messageIdOf(update);
    const last = this.items[this.items.length - 1];
    let target: MessageItem | undefined;
    if (messageId) {
      const found = this.byId.get(`${role}-${messageId}`);
      target = found?.type === "message" ? found : undefined;
    } else if (last?.type === "message" && last.role === role && !last.id.startsWith("local-")) {
      target = last;
    }
    if (target) {
      target.text += text;
      if (text) changes.push({ op: "append", id: target.id, messageId, text });
    } else {
      const id = messageId ? `${role}-${messageId}` : `${role}-anon-${++this.seq}`;
      const item: MessageItem = { type: "message", id, role, messageId, text };
      const pending = this.pendingCheckpoint;
      if (role === "user" && pending && (!pending.messageId || pending.messageId === messageId)) {
        item.checkpoint = pending.id;
        this.pendingCheckpoint = undefined;
      }
      changes.push(this.push(item));
    }
    return changes;
  }

  toolCall(update: ToolUpdate): Change[] {
    const id = `tool-${update.toolCallId}`;
    const existing = this.byId.get(id);
    const item: ToolItem =
      existing?.type === "tool"
        ? existing
        : { type: "tool", id, toolCallId: update.toolCallId, title: "Tool call", kind: "other", status: "pending", hasDiff: false };
    if (update.title) item.title = update.title;
    if (update.kind) item.kind = update.kind;
    if (update.status) item.status = update.status;
    if (update.locations && update.locations.length) item.path = update.locations[0].path;
    for (const c of update.content ?? []) {
      if (isDiff(c)) {
        const { added, removed } = diffStats(c.oldText, c.newText);
        item.hasDiff = true;
        item.path = c.path;
        item.summary = `+${added} −${removed}`;
      } else if (isWrapped(c) && c.content.type === "text" && c.content.text !== undefined && !item.hasDiff) {
        const t = c.content.text;
        item.output = t.length > OUTPUT_MAX ? `${t.slice(0, OUTPUT_MAX)}\n… (${t.length - OUTPUT_MAX} more characters)` : t;
      }
    }
    const meta = agentdMeta(update);
    if (meta.cancelled) item.outcome = "cancelled";
    else if (meta.interrupted) item.outcome = "interrupted";
    else if (meta.decision === "deny") item.outcome = meta.decidedBy === "timeout" ? "timed out" : "denied";
    const exit = (update.rawOutput as { exitCode?: unknown } | null | undefined)?.exitCode;
    if (typeof exit === "number" && !item.summary) item.summary = `exit ${exit}`;
    if (existing) {
      return [{ op: "upsert", item }];
    }
    return [this.push(item)];
  }

  private push(item: Item): Change {
    this.items.push(item);
    this.byId.set(item.id, item);
    return { op: "upsert", item };
  }
}
