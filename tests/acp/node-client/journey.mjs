// The acp tier's journey through the official TypeScript SDK's client side (issue 10 Part 2; TESTING.md §1.4).
// Driven by tests/acp/test_node_client.py, which scripts the emulator, reads the JSON lines this prints on stdout
// (one per phase) and checks the files, the audit log and the processes. This client advertises no `fs`
// capability, so agentd's file tools use the disk. Environment: AGENTD_CMD (the agent's argv as JSON),
// AGENTD_WS (the workspace), AGENTD_ERR (a file for the agent's stderr).
import { spawn } from "node:child_process";
import { existsSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";

import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const cmd = JSON.parse(process.env.AGENTD_CMD);
const ws = process.env.AGENTD_WS;
const errFd = openSync(process.env.AGENTD_ERR, "a");

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function startAgent() {
  const child = spawn(cmd[0], cmd.slice(1), { stdio: ["pipe", "pipe", errFd] });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { child, stream };
}

function recorder(answers) {
  const rec = { updates: [], permissions: [], answers };
  const app = client({ name: "agentd-acp-node-client" })
    .onNotification(methods.client.session.update, ({ params }) => {
      rec.updates.push(params);
    })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      rec.permissions.push(params);
      const optionId = rec.answers.shift() ?? "reject_once";
      return { outcome: { outcome: "selected", optionId } };
    });
  return { rec, app };
}

async function until(pred, what, ms = 20000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const text = (t) => [{ type: "text", text: t }];
const init = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "node-test", version: "1.0.0" } };

// ---- first process: new session, a turn with approvals, a cancel during a long command, then SIGKILL
{
  const { child, stream } = startAgent();
  const { rec, app } = recorder(["allow_once", "reject_once"]);
  await app.connectWith(stream, async (ctx) => {
    const initialized = await ctx.request(methods.agent.initialize, init);
    const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: ws, mcpServers: [] });
    const first = await ctx.request(methods.agent.session.prompt, { sessionId, prompt: text("Take notes on a.txt") });
    rec.answers.push("allow_once");
    const slow = ctx.request(methods.agent.session.prompt, { sessionId, prompt: text("Run the slow thing.") });
    const pidFile = join(ws, "pid.txt");
    await until(() => existsSync(pidFile) && /^\d+/.test(readFileSync(pidFile, "utf8")), "the command");
    const t0 = performance.now();
    await ctx.notify(methods.agent.session.cancel, { sessionId });
    const cancelled = await slow;
    const cancelMs = performance.now() - t0;
    emit({ phase: "first", initialized, sessionId, stops: [first.stopReason, cancelled.stopReason], cancelMs,
           updates: rec.updates, permissions: rec.permissions });
    child.kill("SIGKILL");
  });
  await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.on("exit", r)));
}

// ---- second process: list, load (the replay), a prompt on the loaded session, end of input
{
  const { child, stream } = startAgent();
  const { rec, app } = recorder([]);
  const exited = new Promise((r) => child.on("exit", (code) => r(code)));
  await app.connectWith(stream, async (ctx) => {
    await ctx.request(methods.agent.initialize, init);
    const listed = await ctx.request(methods.agent.session.list, {});
    const sessionId = listed.sessions[0].sessionId;
    const loaded = await ctx.request(methods.agent.session.load, { sessionId, cwd: ws, mcpServers: [] });
    const replay = rec.updates.slice();
    const next = await ctx.request(methods.agent.session.prompt, { sessionId, prompt: text("Go on.") });
    emit({ phase: "second", listed, loaded, replay, stop: next.stopReason, updates: rec.updates });
  });
  child.stdin.end();
  emit({ phase: "exit", code: await exited });
}
