#!/usr/bin/env bash
# Quick start: install what is missing (Debian's redis-server, npm packages) and start svc with its
# embedded defaults. Everything durable goes to ./data (SVC_DATA_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund || npm install --no-audit --no-fund
fi
exec node bin/svc.js serve
