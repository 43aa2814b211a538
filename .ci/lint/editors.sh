#!/usr/bin/env bash
# `make lint` for the editor clients: stylua and luacheck on the Neovim plugin and its test drivers, eslint
# on the VS Code extension. A missing linter is a skip with the command that installs it, or a failure
# under AGENTD_TEST_STRICT=1 or CI=true (TESTING.md §1.1), where .ci/run installs them first.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=.ci/lint/node_modules/.bin
strict=0
if [ "${AGENTD_TEST_STRICT:-0}" = 1 ] || [ "${CI:-}" = true ]; then strict=1; fi
missing() {
  if [ "$strict" = 1 ]; then echo "lint: $1 is not installed; run bash .ci/lint/install.sh" >&2; exit 1; fi
  echo "lint: skipped $1 (not installed; bash .ci/lint/install.sh installs it)" >&2
}
lua=(editor-clients/nvim tests/editors/nvim/drivers tests/acp/codecompanion tests/acp/avante)
if [ -x "$bin/stylua" ]; then "$bin/stylua" --check "${lua[@]}"; else missing stylua; fi
if command -v luacheck >/dev/null 2>&1; then luacheck -q --formatter plain "${lua[@]}"; else missing luacheck; fi
if [ -x "$bin/eslint" ]; then (cd editor-clients/vscode && "../../$bin/eslint" --max-warnings 0 .); else missing eslint; fi
