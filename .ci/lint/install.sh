#!/usr/bin/env bash
# Installs the linters of the editor clients (STYLE.md chores), idempotently: luacheck from Debian
# (`lua-check`), and eslint, typescript-eslint and stylua (its binary ships in an npm package) from the
# npm lock in this folder. Needs root for apt-get (CI and the developers' machines run as root).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v luacheck >/dev/null 2>&1; then
  if ! apt-get install -y -q lua-check >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q lua-check >/dev/null
  fi
fi
if ! cmp -s package-lock.json node_modules/.agentd-lock.json 2>/dev/null; then   # installed from this lock?
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.agentd-lock.json
fi
echo "lint tools ready: $(luacheck --version | head -1), stylua $(node_modules/.bin/stylua --version | cut -d' ' -f2), eslint $(node_modules/.bin/eslint --version)"
