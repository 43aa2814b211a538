#!/usr/bin/env bash
# Installs what the opt-in VS Code UI tier needs (TESTING.md §1.6), idempotently: Debian's Chromium and
# build deps, code-server 4.100.3 from editor-clients/vscode/e2e's lock, the extension built into
# editor-clients/vscode/agentd.vsix, and Playwright from PyPI (no browser download). Carries the four
# install fixes; run it as root on Debian 12 (CI and the developers' machines are). ~1-2 min, ~500 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

# fix 2: kerberos needs gssapi.h (libkrb5-dev) plus code-server's documented build deps; chromium serves
# Playwright and ripgrep feeds fix 3.
pkgs=(chromium ripgrep libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config)
if ! dpkg -s "${pkgs[@]}" >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}"
fi

# fix 3: @vscode/ripgrep's postinstall downloads rg from GitHub; seed its cache with Debian's rg 13.0.0
# (x86_64). The cache name carries the @vscode/ripgrep version of code-server's lib/vscode/npm-shrinkwrap.json.
cache="$(node -p 'require("os").tmpdir()')/vscode-ripgrep-cache-1.15.11"
mkdir -p "$cache"
tar czf "$cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$(dirname "$(command -v rg)")" rg

export npm_config_unsafe_perm=true # fix 1: as root the postinstall refuses without it (an env var in npm 11)
export npm_config_yes=true         # fix 4: node-pty's postinstall runs `npx node-gyp`, which would prompt

e2e=editor-clients/vscode/e2e
want=$(node -p 'require("./'$e2e'/package-lock.json").packages["node_modules/code-server"].version')
have=$(node -p 'try { require("./'$e2e'/node_modules/code-server/package.json").version } catch { "" }')
if [ "$have" != "$want" ] || [ ! -d $e2e/node_modules/code-server/lib/vscode/node_modules ]; then
  (cd $e2e && npm ci --no-audit --no-fund)   # ~1 min, ~300 MB; skipped when the locked version is installed
fi
(cd editor-clients/vscode && npm ci --no-audit --no-fund && npm run package)   # tsc, esbuild, vsce -> agentd.vsix
.venv/bin/pip install -q playwright==1.65.2
