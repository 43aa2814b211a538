// "Restore checkpoint" and "Fork from here" on the user's messages (issue 13; docs/checkpoints.md, PROTOCOL.md
// §6.12-§6.14).
//
// Owns: the questions asked before a rewind (what goes back; the files the user changed since the
// checkpoint, found by a dry run, are kept unless the user says to overwrite them), the rewind and fork
// requests and the lines they leave in the transcript. The controller owns the session: it reloads it after
// a conversation rewind and switches to a fork.

import * as vscode from "vscode";
import { e2eLog } from "./e2eLog";
import { ForkResult, RewindParams, RewindResult } from "./protocol";

export interface CheckpointHost {
  rewind(params: RewindParams): Promise<RewindResult>;
  fork(sessionId: string, at: string): Promise<ForkResult>;
  /** Load the session again (the conversation as it is now) or switch to another one. */
  open(sessionId: string, title?: string): Promise<void>;
  notice(text: string, level?: "info" | "error"): void;
}

const BOTH = "Files and conversation";
const FILES = "Files only";
const CONVERSATION = "Conversation only";
const KEEP = "Keep my changes";
const OVERWRITE = "Overwrite them";

/** "Restore checkpoint" on a user message: asks what goes back, then rewinds `sessionId` to `checkpoint`. */
export async function restore(host: CheckpointHost, sessionId: string, checkpoint: string, title?: string): Promise<void> {
  const dry = await host.rewind({ sessionId, to: checkpoint, files: true, conversation: true, dryRun: true });
  const files = dry.files;
  const detail = files
    ? `Files: ${files.restored.length} restored, ${files.removed.length} removed. The conversation goes back to before this message; the turns after it stay in the session log.`
    : "The conversation goes back to before this message.";
  const what = await vscode.window.showWarningMessage(`Restore checkpoint ${checkpoint}?`, { modal: true, detail }, BOTH, FILES, CONVERSATION);
  e2eLog("checkpoint_question", { checkpoint, answer: what ?? null });
  if (!what) return;
  const params: RewindParams = { sessionId, to: checkpoint, files: what !== CONVERSATION, conversation: what !== FILES };
  const mine = (files?.kept ?? []).filter((k) => k.reason === "changed_by_user").map((k) => k.path);
  if (params.files && mine.length) {
    const answer = await vscode.window.showWarningMessage(
      `You changed ${mine.length === 1 ? mine[0] : `${mine.length} files`} after this checkpoint.`,
      { modal: true, detail: `${mine.join("\n")}\n\nKeep your changes, or overwrite them with the checkpoint's version?` },
      KEEP,
      OVERWRITE,
    );
    e2eLog("checkpoint_overwrite", { checkpoint, paths: mine, answer: answer ?? null });
    if (!answer) return;
    params.overwrite = answer === OVERWRITE ? mine : false;
  }
  const result = await host.rewind(params);
  e2eLog("rewind", { sessionId, result });
  if (params.conversation) await host.open(sessionId, title);
  host.notice(summary(result));
}

/** "Fork from here": a new session with the conversation before `checkpoint`, then shown. */
export async function fork(host: CheckpointHost, sessionId: string, checkpoint: string): Promise<void> {
  const result = await host.fork(sessionId, checkpoint);
  e2eLog("fork", { sessionId, result });
  await host.open(result.sessionId, result.title ?? undefined);
  host.notice(`Forked from ${sessionId} at checkpoint ${checkpoint}: this is the new session ${result.sessionId}; the original is unchanged (Resume Session… goes back to it).`);
}

function summary(r: RewindResult): string {
  const parts: string[] = [];
  if (r.files) {
    parts.push(`${r.files.restored.length} files restored, ${r.files.removed.length} removed`);
    const kept = r.files.kept.map((k) => `${k.path} (${k.reason.replace(/_/g, " ")})`);
    if (kept.length) parts.push(`kept ${kept.join(", ")}`);
  }
  if (r.conversation) parts.push(`the conversation is back to before this message`);
  const undo = r.checkpoint ? ` To undo the files: agentd sessions rewind ID --to ${r.checkpoint} --files-only.` : "";
  return `Restored checkpoint ${r.to}: ${parts.join("; ")}.${undo}`;
}
