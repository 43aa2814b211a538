// Building the LanguageClient that starts agentd on stdio (PROTOCOL.md §3.2, §4.2, §8.2).
//
// Owns: resolving the command line from the settings (`agentd.path`, `agentd.args`, `agentd.env`; the
// AGENTD_CMD variable when the settings are untouched) and its environment (the login shell's PATH:
// shellPath.ts), spawning the process ourselves so its pid is known,
// declaring the agentd client capability `experimental.agentd`, and saving documents after an applied edit
// whose label starts with `agentd:` (saveAfterApply). No session logic here.

import * as cp from "child_process";
import * as readline from "readline";
import { Readable } from "stream";
import * as vscode from "vscode";
import { CancellationToken, ResponseError } from "vscode-languageclient";
import {
  ClientCapabilities,
  FeatureState,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  StaticFeature,
} from "vscode-languageclient/node";
import { e2eLog } from "./e2eLog";
import { PROTOCOL_VERSION } from "./protocol";
import { loginShellPath, mergePath } from "./shellPath";

export interface ServerCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
  source: string;
}

/** The agentd command line: explicit settings win, then AGENTD_CMD (a JSON argv), then `agentd`. */
export function serverCommand(): ServerCommand {
  const cfg = vscode.workspace.getConfiguration("agentd");
  const env = cfg.get<Record<string, string>>("env", {});
  const pathSet = isSet(cfg.inspect<string>("path"));
  const argsSet = isSet(cfg.inspect<string[]>("args"));
  const fromEnv = process.env.AGENTD_CMD;
  if (!pathSet && !argsSet && fromEnv) {
    try {
      const argv = JSON.parse(fromEnv) as unknown;
      if (Array.isArray(argv) && argv.length > 0 && argv.every((a) => typeof a === "string")) {
        return { command: argv[0], args: argv.slice(1), env, source: "AGENTD_CMD" };
      }
    } catch {
      // fall through to the settings
    }
  }
  return {
    command: cfg.get<string>("path", "agentd") || "agentd",
    args: cfg.get<string[]>("args", []),
    env,
    source: "settings",
  };
}

/** agentd's environment: the editor's, the login shell's PATH first (`agentd.loginShellPath`, unless
 * `agentd.env` sets PATH itself), then `agentd.env`. */
export async function serverEnv(cmd: ServerCommand, output: vscode.LogOutputChannel): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...cmd.env };
  const wanted = vscode.workspace.getConfiguration("agentd").get<boolean>("loginShellPath", true);
  if (!wanted || cmd.env.PATH !== undefined || process.platform === "win32") {
    return env;
  }
  const found = await loginShellPath();
  if (found.path) {
    env.PATH = mergePath(found.path, env.PATH);
    output.appendLine(`PATH from the login shell (${found.shell} -l -i): ${found.path}`);
  } else {
    output.warn(`Could not read the PATH of the login shell ${found.shell} (${found.error}); agentd gets the editor's PATH.`);
  }
  e2eLog("shell_path", { shell: found.shell, path: env.PATH ?? null, error: found.error ?? null });
  return env;
}

function isSet<T>(i: { globalValue?: T; workspaceValue?: T; workspaceFolderValue?: T } | undefined): boolean {
  return i !== undefined && (i.globalValue !== undefined || i.workspaceValue !== undefined || i.workspaceFolderValue !== undefined);
}

/** Declares `experimental.agentd` (PROTOCOL.md §4.2): this client answers requestPermission and saves
 * documents after applying `agentd:` edits. */
class AgentdCapability implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    experimental.agentd = { protocolVersion: PROTOCOL_VERSION, requestPermission: true, saveAfterApply: true, checkpoints: true };
    capabilities.experimental = experimental;
  }
  initialize(): void {}
  getState(): FeatureState {
    return { kind: "static" };
  }
  clear(): void {}
}

/** The URIs a WorkspaceEdit (protocol form) touches. */
function editedUris(edit: { documentChanges?: unknown[]; changes?: Record<string, unknown> }): string[] {
  const uris = new Set<string>();
  for (const change of edit.documentChanges ?? []) {
    const uri = (change as { textDocument?: { uri?: string } }).textDocument?.uri;
    if (uri) uris.add(uri);
  }
  Object.keys(edit.changes ?? {}).forEach((u) => uris.add(u));
  return [...uris];
}

async function saveDocuments(uris: string[]): Promise<string[]> {
  const wanted = new Set(uris.map((u) => vscode.Uri.parse(u).toString()));
  const saved: string[] = [];
  for (const doc of vscode.workspace.textDocuments) {
    if (wanted.has(doc.uri.toString()) && doc.isDirty && (await doc.save())) {
      saved.push(doc.uri.fsPath);
    }
  }
  return saved;
}

function lines(input: Readable, each: (line: string) => void): void {
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on("line", each);
}

export interface StartedProcess {
  pid: number;
  process: cp.ChildProcess;
}

/** A LanguageClient for agentd. `onSpawn` hears about every process it starts (restarts included). */
export function createClient(
  output: vscode.LogOutputChannel,
  onSpawn: (p: StartedProcess) => void,
): LanguageClient {
  const serverOptions: ServerOptions = async () => {
    const cmd = serverCommand();
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    output.appendLine(`Starting ${[cmd.command, ...cmd.args].join(" ")} (from ${cmd.source})`);
    const env = await serverEnv(cmd, output);
    const child = cp.spawn(cmd.command, cmd.args, { cwd, env, stdio: "pipe" });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", (err) =>
        reject(
          new Error(
            `Could not start agentd (${cmd.command}): ${err.message}. Install agentd from a clone of its ` +
              `repository ("pipx install ." there; the package is agentd-daemon, "pip install agentd" is an ` +
              `unrelated project) or set "agentd.path" to its executable.`,
          ),
        ),
      );
    });
    const pid = child.pid ?? -1;
    e2eLog("server", { pid, command: cmd.command, args: cmd.args });
    onSpawn({ pid, process: child });
    return child;
  };

  // Lines agentd also sends as window/logMessage (PROTOCOL.md §10.2) are dropped from stderr so the
  // output channel shows them once; everything else (Python logging, tracebacks) keeps its level.
  const forwarded = /^\[(turn ·|Permission\]|Tool\]|Hook\]|compressed history)/;
  const stdioOptions = {
    stdout: (input: Readable, out: vscode.LogOutputChannel) => lines(input, (l) => out.info(l)),
    stderr: (input: Readable, out: vscode.LogOutputChannel) =>
      lines(input, (l) => {
        if (forwarded.test(l)) return;
        if (/\b(ERROR|CRITICAL|Traceback)\b/.test(l)) out.error(l);
        else if (/\bWARNING\b/.test(l)) out.warn(l);
        else out.info(l);
      }),
  };

  const clientOptions: LanguageClientOptions = {
    stdioOptions,
    // agentd tracks open file buffers so the model sees unsaved edits (PROTOCOL.md §8.1).
    documentSelector: [{ scheme: "file" }],
    outputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationOptions: vscode.workspace.getConfiguration("agentd").get<object>("initializationOptions", {}),
    middleware: {
      workspace: {
        handleApplyEdit: async (params, next) => {
          const result = await next(params, CancellationToken.None);
          if (result instanceof ResponseError) {
            return result;
          }
          let saved: string[] = [];
          if (result.applied && params.label?.startsWith("agentd:")) {
            saved = await saveDocuments(editedUris(params.edit));
          }
          e2eLog("applyEdit", { label: params.label, applied: result.applied, saved });
          return result;
        },
      },
    },
  };

  const client = new LanguageClient("agentd", "agentd", serverOptions, clientOptions);
  client.registerFeature(new AgentdCapability());
  return client;
}
