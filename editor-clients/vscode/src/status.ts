// The status bar item: context tokens, cache-read share and cost of the active session (PROTOCOL.md §6.8,
// §7.2 usage_update, §10.2), and what protects its commands (the `sandbox` of §6.8; docs/security.md).
//
// Live figures come from `usage_update` (`used`, `size`, `cost`, `_meta.agentd.request` added to the
// totals); after a turn or a load the exact totals of `agentd/session/status` replace them.

import * as vscode from "vscode";
import type { SandboxState, SessionStatus } from "./protocol";
import { RequestUsage } from "./updates";

export interface Usage {
  used?: number;
  size?: number;
  cost?: { amount: number; currency: string };
  requests: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  cacheKnown: boolean;
  model?: string;
  mode?: string;
  sandbox?: SandboxState;
  /** The project-instruction files in the session's system prompt (AGENTS.md, CLAUDE.md), as shown. */
  instructions?: string[];
}

export function emptyUsage(): Usage {
  return { requests: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheKnown: true };
}

export function addRequest(u: Usage, r: RequestUsage): void {
  u.requests += 1;
  u.inputTokens += r.inputTokens ?? 0;
  u.outputTokens += r.outputTokens ?? 0;
  if (r.cacheReadTokens == null || r.cacheWriteTokens == null) {
    u.cacheKnown = false;
  }
  u.cacheReadTokens += r.cacheReadTokens ?? 0;
  u.cacheWriteTokens += r.cacheWriteTokens ?? 0;
}

export function fromStatus(s: SessionStatus): Usage {
  const t = s.totals;
  return {
    used: s.context.usedTokens,
    size: s.context.windowTokens,
    cost: s.costEstimate,
    requests: t.requests,
    inputTokens: t.inputTokens,
    outputTokens: t.outputTokens,
    cacheReadTokens: t.cacheReadTokens,
    cacheWriteTokens: t.cacheWriteTokens,
    cacheKnown: t.cacheReadKnown !== false && t.cacheWriteKnown !== false,
    model: s.model,
    mode: s.mode,
    sandbox: s.sandbox,
    instructions: (s.instructions ?? []).map((f) =>
      f.loadedBytes < f.bytes ? `${f.path} (cut at ${f.loadedBytes} of ${f.bytes} bytes)` : f.path,
    ),
  };
}

/** The sandbox row of the tooltip: `bubblewrap 0.8.0 (/usr/bin/bwrap)`, or what is missing. */
export function sandboxText(b: SandboxState | undefined): string | undefined {
  if (!b) return undefined;
  const where = b.active ? `on: ${b.label}` : b.mode === "off" ? "off" : `not available (${b.label})`;
  return b.missing.length ? `${where}; missing: ${b.missing.join(", ")}` : where;
}

/** `12.3k`, `950`, `1.2M`. */
export function tokens(n: number | undefined): string {
  if (n === undefined) return "–";
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(1)}M`;
  if (n >= 10_000) return `${Math.round(n / 1000)}k`;
  if (n >= 1000) return `${(n / 1000).toFixed(1)}k`;
  return `${n}`;
}

/** Cache reads as a share of all prompt tokens (uncached + cache read + cache write), or undefined. */
export function cacheShare(u: Usage): number | undefined {
  const prompt = u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  return prompt > 0 ? u.cacheReadTokens / prompt : undefined;
}

export function money(c: { amount: number; currency: string } | undefined): string | undefined {
  if (!c) return undefined;
  const sym = c.currency === "USD" ? "$" : `${c.currency} `;
  const digits = c.amount === 0 || c.amount >= 1 ? 2 : 4;
  return `${sym}${c.amount.toFixed(digits)}`;
}

export function statusText(u: Usage | undefined, busy: boolean): string {
  const icon = busy ? "$(loading~spin)" : "$(hubot)";
  if (!u) return `${icon} agentd`;
  const parts = [`${icon} ${tokens(u.used)}/${tokens(u.size)}`];
  const share = cacheShare(u);
  if (share !== undefined) parts.push(`cache ${Math.round(share * 100)}%${u.cacheKnown ? "" : "?"}`);
  const cost = money(u.cost);
  if (cost) parts.push(cost);
  if (u.sandbox) parts.push(u.sandbox.missing.length ? "$(unlock)" : "$(shield)");
  return parts.join(" · ");
}

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("agentd.status", vscode.StatusBarAlignment.Right, 100);

  constructor() {
    this.item.name = "agentd";
    this.item.command = "agentd.chat.focus";
    this.render(undefined, false, undefined);
    this.item.show();
  }

  render(u: Usage | undefined, busy: boolean, title: string | undefined): void {
    this.item.text = statusText(u, busy);
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**agentd**${title ? ` — ${escapeMd(title)}` : ""}\n\n`);
    if (u) {
      md.appendMarkdown(
        [
          "| | |",
          "|---|---:|",
          `| Context | ${u.used ?? "–"} / ${u.size ?? "–"} tokens |`,
          `| Requests | ${u.requests} |`,
          `| Input (uncached) | ${u.inputTokens} |`,
          `| Output | ${u.outputTokens} |`,
          `| Cache read | ${u.cacheReadTokens}${u.cacheKnown ? "" : " (partly unknown)"} |`,
          `| Cache write | ${u.cacheWriteTokens} |`,
          `| Cost (estimate) | ${money(u.cost) ?? "unknown"} |`,
          u.model ? `| Model | ${escapeMd(u.model)} |` : "",
          u.mode ? `| Mode | ${escapeMd(u.mode)} |` : "",
          u.sandbox ? `| Sandbox | ${escapeMd(sandboxText(u.sandbox) ?? "")} |` : "",
          u.instructions
            ? `| Instructions | ${u.instructions.length ? u.instructions.map(escapeMd).join(", ") : "none"} |`
            : "",
        ]
          .filter(Boolean)
          .join("\n"),
      );
    } else {
      md.appendMarkdown("No session yet.");
    }
    this.item.tooltip = md;
    this.item.accessibilityInformation = { label: `agentd: ${this.item.text.replace(/\$\([^)]*\)\s*/g, "")}` };
  }

  dispose(): void {
    this.item.dispose();
  }
}

function escapeMd(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, "\\$&");
}
