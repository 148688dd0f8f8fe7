#!/usr/bin/env bash
# Installs the real MCP servers the end-to-end MCP tests (tests/e2e/test_mcp_real.py) and
# bench/mcp.py run against, pinned, into $DSHD_MCP_CACHE (default <repo>/.cache/mcp,
# git-ignored):
#   node/  npm @modelcontextprotocol/server-everything, server-filesystem and server-memory
#   py/    a venv of its own with PyPI mcp-server-time (its dependencies never meet dshd's)
# The npm servers run on the machine's node when it is 20 or newer, else on the Node 24 the
# VS Code set-up installs (.cache/vscode/node24). Idempotent: a second run takes a moment.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${DSHD_MCP_CACHE:-$REPO/.cache/mcp}
VSCODE_CACHE=${DSHD_VSCODE_CACHE:-$REPO/.cache/vscode}
PY=${PYTHON:-python3}
EVERYTHING_VERSION=2026.8.31
FILESYSTEM_VERSION=2026.8.31
MEMORY_VERSION=2026.8.31
TIME_VERSION=2026.10.19
say() { echo "[mcp servers setup] $*"; }

node_bin() {
  if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ]; then
    dirname "$(command -v node)"
  elif [ -x "$VSCODE_CACHE/node24/bin/node" ]; then
    echo "$VSCODE_CACHE/node24/bin"
  fi
}

NODE_STAMP=$CACHE/node/.installed-$EVERYTHING_VERSION-$FILESYSTEM_VERSION-$MEMORY_VERSION
if [ ! -f "$NODE_STAMP" ]; then
  bin=$(node_bin)
  if [ -z "$bin" ]; then
    say "no node 20 or newer (install Node, or run editors/vscode/scripts/setup.sh for Node 24): the npm servers are not installed"
  else
    t0=$(date +%s)
    mkdir -p "$CACHE/node"
    [ -f "$CACHE/node/package.json" ] || echo '{"name":"dshd-mcp-servers","private":true}' > "$CACHE/node/package.json"
    (cd "$CACHE/node" && PATH="$bin:$PATH" npm install --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
      "@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION" \
      "@modelcontextprotocol/server-memory@$MEMORY_VERSION")
    # Which node runs them: the tests and the bench read this file.
    echo "$bin/node" > "$CACHE/node/node-path"
    rm -f "$CACHE"/node/.installed-*; touch "$NODE_STAMP"
    say "server-everything $EVERYTHING_VERSION, server-filesystem $FILESYSTEM_VERSION, server-memory $MEMORY_VERSION: $(( $(date +%s) - t0 ))s"
  fi
fi

TIME_STAMP=$CACHE/py/.installed-$TIME_VERSION
if [ ! -f "$TIME_STAMP" ]; then
  t0=$(date +%s)
  [ -x "$CACHE/py/bin/python" ] || "$PY" -m venv "$CACHE/py"
  "$CACHE/py/bin/python" -m pip install -q --disable-pip-version-check "mcp-server-time==$TIME_VERSION"
  rm -f "$CACHE"/py/.installed-*; touch "$TIME_STAMP"
  say "mcp-server-time $TIME_VERSION: $(( $(date +%s) - t0 ))s"
fi
