#!/usr/bin/env bash
# Installs the official TypeScript ACP SDK (@agentclientprotocol/sdk) from npm, for the
# ACP tests' TypeScript client (tests/acp_door/ts_client.mjs), and acpx (a headless ACP
# client that ends its agent's whole process tree when it exits: the detached-daemon
# attack test runs it, node_modules/.bin/acpx). Both run on the Node 24 that
# editors/vscode/scripts/setup.sh installs into the same cache ($DSHD_VSCODE_CACHE,
# default <repo>/.cache/vscode, git-ignored). Idempotent: a second run takes a moment.
# acpx also answers plan reviews in tests/acp_door/test_blind_picks.py (its y and
# --approve-all take the first allow_once option). CodeCompanion.nvim is not installed:
# it is published on GitHub and luarocks only (not on npm, PyPI or Debian, the registries
# this set-up may use), so that test's other blind client is our own, picking as
# CodeCompanion's Accept does.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${DSHD_VSCODE_CACHE:-$REPO/.cache/vscode}
SDK_VERSION=2.4.0
ACPX_VERSION=0.19.1
STAMP="$SDK_VERSION-acpx-$ACPX_VERSION"
NODE="$CACHE/node24/bin/node"
DIR="$CACHE/acp-client"
say() { echo "[acp client setup] $*"; }

if [ ! -x "$NODE" ]; then
  say "no Node 24 at $NODE (editors/vscode/scripts/setup.sh installs it)"; exit 1
fi
if [ ! -f "$DIR/.installed-$STAMP" ]; then
  t0=$(date +%s)
  mkdir -p "$DIR"
  [ -f "$DIR/package.json" ] || echo '{"name":"dshd-acp-client","private":true,"type":"module"}' > "$DIR/package.json"
  (cd "$DIR" && PATH="$CACHE/node24/bin:$PATH" npm install --no-audit --no-fund --loglevel=error "@agentclientprotocol/sdk@$SDK_VERSION" "acpx@$ACPX_VERSION")
  rm -f "$DIR"/.installed-*; touch "$DIR/.installed-$STAMP"
  say "@agentclientprotocol/sdk $SDK_VERSION, acpx $ACPX_VERSION: $(( $(date +%s) - t0 ))s"
fi
