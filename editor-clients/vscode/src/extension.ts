// Entry point of the agentd extension: builds the Controller (server, session, views) and registers the
// commands. Activation: `onStartupFinished`, so agentd starts with the window and reopens the session.

import * as vscode from "vscode";
import { Controller } from "./controller";

let controller: Controller | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const c = new Controller(context);
  controller = c;
  context.subscriptions.push(
    c,
    vscode.commands.registerCommand("agentd.newSession", () => c.newSession()),
    vscode.commands.registerCommand("agentd.resumeSession", () => c.resumeSession()),
    vscode.commands.registerCommand("agentd.cancel", () => c.cancel()),
    vscode.commands.registerCommand("agentd.restart", () => c.restart()),
    vscode.commands.registerCommand("agentd.showLog", () => c.showLog()),
  );
  await c.start();
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
