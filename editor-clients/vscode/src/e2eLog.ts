// Test hook of the UI tier (TESTING.md §1.6): with AGENTD_E2E_LOG set in the editor's environment, append
// one JSON line per event (the server's pid, every update received, every approval answer sent) so tests
// can assert on what the extension saw as well as on the UI. Without the variable this does nothing.

import * as fs from "fs";

const target = process.env.AGENTD_E2E_LOG;

export function e2eLog(event: string, data: Record<string, unknown>): void {
  if (!target) {
    return;
  }
  try {
    fs.appendFileSync(target, JSON.stringify({ event, time: new Date().toISOString(), ...data }) + "\n");
  } catch {
    // A test log must never break the extension.
  }
}
