// The `update` objects of `agentd/session/update` (PROTOCOL.md §7.2), as this extension reads them.
//
// The variants themselves are generated from agentd.protocol.updates (protocol.ts: `SessionUpdate` and its
// members); this module adds what the models leave open (`_meta.agentd`) and the narrowing helpers.
// Everything is read defensively: unknown `sessionUpdate` values and unknown fields are ignored
// (PROTOCOL.md §2), and `messageId` is accepted at the top level (the spec) or under `_meta.agentd`.

import type {
  AgentMessageChunk,
  AgentThoughtChunk,
  SessionUpdate,
  TextBlock,
  ToolCall,
  ToolCallContent,
  ToolCallContentBlock,
  ToolCallDiff,
  ToolCallUpdate,
  UserMessageChunk,
} from "./protocol";

export type {
  CurrentModeUpdate,
  Retry,
  PlanEntry,
  SessionInfoUpdate,
  SessionUpdate,
  ToolCallContent,
  ToolCallDiff,
  UsageUpdate,
} from "./protocol";

export interface AgentdMeta {
  messageId?: string;
  retracts?: string;
  replay?: boolean;
  decision?: string;
  decidedBy?: string;
  optionId?: string;
  cancelled?: boolean;
  interrupted?: boolean;
  durationMs?: number;
  snapshot?: string;
  planId?: string;
  request?: RequestUsage;
  [key: string]: unknown;
}

export interface RequestUsage {
  inputTokens?: number | null;
  outputTokens?: number | null;
  cacheReadTokens?: number | null;
  cacheWriteTokens?: number | null;
}

/** The three chunk variants (one shape, PROTOCOL.md §7.2). */
export type ChunkUpdate = AgentMessageChunk | AgentThoughtChunk | UserMessageChunk;

/** `tool_call` and `tool_call_update`: both patch one tool-call card. */
export type ToolUpdate = ToolCall | ToolCallUpdate;

/** A `content` tool-call item holding text. */
export type TextToolContent = ToolCallContentBlock & { content: TextBlock };

const KNOWN = new Set([
  "agent_message_chunk",
  "agent_thought_chunk",
  "user_message_chunk",
  "tool_call",
  "tool_call_update",
  "plan",
  "usage_update",
  "session_info_update",
  "current_mode_update",
  "retry",
  "checkpoint",
]);

/** The update as a known variant, or undefined for anything this client does not know. */
export function asUpdate(raw: unknown): SessionUpdate | undefined {
  if (typeof raw !== "object" || raw === null) {
    return undefined;
  }
  const kind = (raw as { sessionUpdate?: unknown }).sessionUpdate;
  return typeof kind === "string" && KNOWN.has(kind) ? (raw as SessionUpdate) : undefined;
}

/** `_meta.agentd` of any object, or an empty object. */
export function agentdMeta(obj: unknown): AgentdMeta {
  const meta = (obj as { _meta?: { agentd?: unknown } } | undefined)?._meta?.agentd;
  return typeof meta === "object" && meta !== null ? (meta as AgentdMeta) : {};
}

/** The messageId of a chunk: top-level per PROTOCOL.md §7.2, or under `_meta.agentd`. */
export function messageIdOf(update: ChunkUpdate): string | undefined {
  return update.messageId ?? agentdMeta(update).messageId;
}

export function isDiff(c: ToolCallContent): c is ToolCallDiff {
  return c.type === "diff" && typeof (c as ToolCallDiff).newText === "string";
}

export function isWrapped(c: ToolCallContent): c is TextToolContent {
  const inner = (c as Partial<ToolCallContentBlock>).content;
  return c.type === "content" && typeof inner === "object" && inner !== null && inner.type === "text";
}

/** Lines added and removed between two texts (a line-set count, good enough for a summary). */
export function diffStats(oldText: string | null | undefined, newText: string): { added: number; removed: number } {
  const before = (oldText ?? "").split("\n");
  const after = newText.split("\n");
  const count = (lines: string[]): Map<string, number> => {
    const m = new Map<string, number>();
    for (const l of lines) {
      m.set(l, (m.get(l) ?? 0) + 1);
    }
    return m;
  };
  const b = count(before);
  const a = count(after);
  let added = 0;
  let removed = 0;
  for (const [line, n] of a) {
    added += Math.max(0, n - (b.get(line) ?? 0));
  }
  for (const [line, n] of b) {
    removed += Math.max(0, n - (a.get(line) ?? 0));
  }
  return { added, removed };
}
