// The TODO tree view: the session's plan, replaced whole on every `plan` update (PROTOCOL.md §7.4).

import * as vscode from "vscode";
import { PlanEntry } from "./updates";

const LABEL: Record<string, string> = { pending: "pending", in_progress: "in progress", completed: "done" };

/** A row of the tree; an object, not an index (VS Code drops a falsy element such as 0). */
interface Row {
  index: number;
}

export class TodoTree implements vscode.TreeDataProvider<Row>, vscode.Disposable {
  private entries: PlanEntry[] = [];
  private readonly changed = new vscode.EventEmitter<Row | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<Row>;

  constructor() {
    this.view = vscode.window.createTreeView("agentd.todos", { treeDataProvider: this, showCollapseAll: false });
  }

  set(entries: PlanEntry[]): void {
    this.entries = [...entries];
    const done = entries.filter((e) => e.status === "completed").length;
    this.view.description = entries.length ? `${done} of ${entries.length} done` : undefined;
    const open = entries.length - done;
    this.view.badge = open > 0 ? { value: open, tooltip: `${open} open TODO item${open === 1 ? "" : "s"}` } : undefined;
    this.changed.fire();
  }

  get(): PlanEntry[] {
    return [...this.entries];
  }

  getChildren(element?: Row): Row[] {
    return element === undefined ? this.entries.map((_, index) => ({ index })) : [];
  }

  getTreeItem(row: Row): vscode.TreeItem {
    const e = this.entries[row.index];
    const item = new vscode.TreeItem(e.content, vscode.TreeItemCollapsibleState.None);
    const label = LABEL[e.status] ?? e.status;
    item.description = label;
    item.tooltip = `${e.content} — ${label}`;
    item.accessibilityInformation = { label: `${e.content}, ${label}` };
    item.iconPath =
      e.status === "completed"
        ? new vscode.ThemeIcon("pass-filled", new vscode.ThemeColor("testing.iconPassed"))
        : e.status === "in_progress"
          ? new vscode.ThemeIcon("circle-large-filled", new vscode.ThemeColor("charts.yellow"))
          : new vscode.ThemeIcon("circle-large-outline");
    return item;
  }

  dispose(): void {
    this.view.dispose();
    this.changed.dispose();
  }
}
