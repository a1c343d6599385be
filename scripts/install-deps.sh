#!/usr/bin/env bash
# Installs the system packages svc needs on Debian/Ubuntu when they are missing:
# redis-server (the kv area's database; also used by benches), postgresql (the queue's optional
# PostgreSQL store and its tests: server binaries in /usr/lib/postgresql/<ver>/bin), chromium (the
# browser the web console's tests drive through playwright-core; never downloaded by npm) and wrk
# (the HTTP load generator of the benches). Needs root or sudo for apt-get.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
if [ "${#need[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  echo "installing: ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
