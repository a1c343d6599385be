#!/usr/bin/env bash
# Quick start: install what is missing (Debian's redis-server and build tools, Node.js 24 when the
# system Node.js is not one svc is tested on, npm packages), build, and start svc with its embedded defaults.
# Everything durable goes to ./data (SVC_DATA_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# shellcheck source=node-env.sh
source scripts/node-env.sh
svc_use_node 22 24
svc_npm_ci
# rebuild dist/ when any source file is newer than the last build
if [ ! -f dist/cli.js ] || [ -n "$(find src package.json tsconfig.json tsconfig.build.json -newer dist/cli.js -print -quit)" ]; then
  npm run --silent build
fi
exec node dist/cli.js serve
