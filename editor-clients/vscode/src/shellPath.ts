// The PATH of the user's login shell, for agentd's environment (setting `agentd.loginShellPath`).
//
// An editor started outside a terminal (from a desktop launcher, as a service: code-server) has the PATH of
// that launcher, without what the user's shell start-up adds (~/.local/bin, pyenv, nvm, Homebrew…); agentd
// inherits it and so do the commands the agent runs: inside code-server `python` was not found. The
// extension asks the login shell once per start of agentd (`$SHELL -l -i -c`, no terminal, a deadline) and
// puts its PATH first, keeping the editor's own entries after it. agentd itself does not do this: in a
// terminal, and under Neovim started from one, it already has the shell's PATH. No vscode API here.

import * as cp from "child_process";
import * as crypto from "crypto";

export interface ShellPath {
  shell: string;
  path?: string;
  error?: string;
}

/** The login shell's PATH, or why it could not be read. Not on Windows (no login shell to ask). */
export function loginShellPath(shell = process.env.SHELL || "/bin/sh", timeoutMs = 10_000): Promise<ShellPath> {
  if (process.platform === "win32") {
    return Promise.resolve({ shell, error: "not on Windows" });
  }
  const mark = `__agentd_${crypto.randomBytes(6).toString("hex")}__`;
  return new Promise((resolve) => {
    cp.execFile(
      shell,
      ["-l", "-i", "-c", `printf '%s' "${mark}\${PATH}${mark}"`],
      { timeout: timeoutMs, env: { ...process.env, AGENTD_SHELL_ENV: "1" }, maxBuffer: 1 << 20 },
      (err, stdout) => {
        const m = new RegExp(`${mark}(.*)${mark}`, "s").exec(stdout ?? "");
        if (m && m[1]) resolve({ shell, path: m[1] });
        else resolve({ shell, error: err ? err.message : "the shell printed no PATH" });
      },
    ).stdin?.end();
  });
}

/** `first` then the entries of `rest` it lacks, without duplicates or empty entries. */
export function mergePath(first: string, rest: string | undefined, sep = ":"): string {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const entry of [...first.split(sep), ...(rest ?? "").split(sep)]) {
    if (entry && !seen.has(entry)) {
      seen.add(entry);
      out.push(entry);
    }
  }
  return out.join(sep);
}
