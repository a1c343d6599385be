#!/usr/bin/env bash
# Installs the system packages svc needs on Debian/Ubuntu when they are missing (needs root or sudo
# for apt-get):
#   redis-server        the kv area's database (also used by benches)
#   postgresql          the queue's optional PostgreSQL store and its tests (server binaries in
#                       /usr/lib/postgresql/<ver>/bin)
#   chromium            the browser the web console's tests drive through playwright-core (never
#                       downloaded by npm)
#   wrk                 the HTTP load generator of the benches
#   valgrind            `npm run bench:metrics` counts instructions per request with its callgrind
#   g++, make, python3  node-gyp's toolchain for the native addons better-sqlite3 and hnswlib-node,
#                       when no prebuilt binary applies (always the case for hnswlib-node)
#   nodejs, npm         only when there is no `npm` at all: Debian's npm is enough to fetch
#                       Node.js 24 from the npm registry (scripts/node-env.sh)
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
if [ "${#need[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  echo "installing: ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
