#!/usr/bin/env bash
# Installs the acp tier's Node client (tests/acp/node-client: the official TypeScript ACP SDK, TESTING.md §1.4)
# from its committed lock, idempotently (npm ci only when the lock changed). Needs node >= 20 and npm.
set -euo pipefail
cd "$(dirname "$0")/../tests/acp/node-client"
if ! cmp -s package-lock.json node_modules/.agentd-lock.json 2>/dev/null; then   # installed from this lock?
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.agentd-lock.json
fi
echo "acp node client ready: @agentclientprotocol/sdk $(node -p 'require("./node_modules/@agentclientprotocol/sdk/package.json").version')"
