#!/usr/bin/env bash
# Installs bubblewrap (`bwrap`), the Linux sandbox of run_command (issue 12; docs/security.md), idempotently,
# and checks that it can create its namespaces here: the sandbox tests fail under AGENTD_TEST_STRICT=1
# when it cannot. Needs root for apt-get (CI and the developers' machines run as root).
set -euo pipefail
if ! command -v bwrap >/dev/null 2>&1; then
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null
  fi
fi
if ! bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --cap-drop ALL -- true; then
  echo "bubblewrap is installed but cannot create its namespaces here (see: agentd doctor)" >&2
fi
