#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages svc needs when they are missing, by what needs them:
#   bash scripts/install-deps.sh [run] [test] [bench] [all]      (no argument: run)
#
# run    svc itself (scripts/quickstart.sh):
#   redis-server        the kv area's database
#   g++, make, python3  node-gyp's toolchain for the native addons better-sqlite3 and hnswlib-node,
#                       when no prebuilt binary applies (always the case for hnswlib-node)
#   nodejs, npm         only when there is no `npm` at all: Debian's npm is enough to fetch
#                       Node.js 24 from the npm registry (scripts/node-env.sh)
# test   the test suite (`npm test` runs `install-deps.sh test` first, scripts/test.mjs):
#   postgresql          the queue's PostgreSQL store tests start throw-away clusters with its server
#                       binaries (/usr/lib/postgresql/<ver>/bin)
#   chromium            the browser the web console's tests drive through playwright-core (never
#                       downloaded by npm)
#   a current Redis     not a package: built once from Debian's source package by
#                       scripts/build-current-server.sh (the newest Redis of Debian unstable /
#                       experimental, RSALv2/SSPLv1/AGPLv3) into its cache, for the kv tests of
#                       commands newer than Debian 12's redis-server (test/kv/newer-commands.test.ts).
#                       A build already cached is used as it is (no network). When it cannot be built
#                       (Debian's archive unreachable, no make/cc) one line says so and the install
#                       goes on: those tests then skip, with the reason printed.
#   a current Valkey    with `all` only (.ci/run): built the same way (BSD-3-Clause), so the
#                       newer-command tests also run on Valkey; `npm test` alone skips that pass.
# bench  the benchmarks (`npm run bench:*`; each names what it lacks in one line, bench/lib/needs.ts):
#   wrk                 the HTTP load generator (bench:kv, bench:vector)
#   webdis              bench:kv's C gateway peer (Debian's package also enables a webdis service
#                       on port 7379; the bench starts its own on a free port)
#   redis-tools         redis-benchmark, bench:kv's raw-RESP ceiling (comes with redis-server)
#   valgrind            bench:metrics counts instructions per request with its callgrind
#   iproute2            ss, bench:queue-connections's accept-queue samples (on every Debian)
#   postgresql          bench:queue's PostgreSQL rows; chromium: bench:console
# all    every group (.ci/run on a clean machine)
#
# apt-get needs root: as root it runs directly, otherwise through sudo (which may ask for the
# password). Without either, or without apt-get, it prints one line naming the missing packages
# and exits 1.
set -euo pipefail

# True when Debian package $1 (or what svc uses from it) is present.
has() {
  case "$1" in
    postgresql) compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null ;;
    chromium) [ -x /usr/bin/chromium ] ;;
    redis-tools) command -v redis-benchmark >/dev/null 2>&1 ;;
    iproute2) command -v ss >/dev/null 2>&1 ;;
    nodejs) command -v npm >/dev/null 2>&1 ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

[ "$#" -gt 0 ] || set -- run
wanted=()
purpose=""
for group in "$@"; do
  case "$group" in
    run) wanted+=(redis-server g++ make python3 nodejs) purpose="${purpose:+$purpose and }svc" ;;
    test) wanted+=(postgresql chromium) purpose="${purpose:+$purpose and }the tests" ;;
    bench) wanted+=(wrk webdis redis-tools valgrind iproute2 postgresql chromium) purpose="${purpose:+$purpose and }the benches" ;;
    all) wanted+=(redis-server g++ make python3 nodejs postgresql chromium wrk webdis redis-tools valgrind iproute2) purpose="${purpose:+$purpose and }svc, its tests and benches" ;;
    *) echo "usage: bash scripts/install-deps.sh [run] [test] [bench] [all]" >&2; exit 2 ;;
  esac
done
current_servers=()
for group in "$@"; do
  case "$group" in
    test) [[ " ${current_servers[*]-} " == *" redis "* ]] || current_servers+=(redis) ;;
    all) current_servers=(redis valkey) ;;
  esac
done

# Builds the current server $1 (redis or valkey) of the tests into build-current-server.sh's cache
# unless one is there: its output goes to a log file, named in the one warning line when the build
# fails.
build_current_server() {
  local pkg="$1" name script log bin licence file
  case "$pkg" in
    redis) name=Redis licence="Redis 8 is tri-licensed RSALv2/SSPLv1/AGPLv3" file=LICENSE.txt ;;
    *) name=Valkey licence="Valkey is BSD-3-Clause" file=COPYING ;;
  esac
  script="$(dirname "$0")/build-current-server.sh"
  if bash "$script" "$pkg" --cached >/dev/null 2>&1; then return 0; fi
  for tool in apt-get make cc tar dpkg; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "svc: no current $name server for the newer-command tests (no $tool here; they will be skipped): bash scripts/build-current-server.sh $pkg" >&2
      return 0
    fi
  done
  log="$(mktemp "${TMPDIR:-/tmp}/svc-current-server.XXXXXX.log")"
  echo "building a current $name server from Debian's source package for the newer-command tests (once, a few minutes; log: $log)" >&2
  if bash "$script" "$pkg" >"$log.path" 2>"$log"; then
    bin="$(tail -n 1 "$log.path")"
    echo "built: $bin ($licence: $(dirname "$(dirname "$bin")")/$file)" >&2
    rm -f "$log" "$log.path"
  else
    rm -f "$log.path"
    echo "svc: could not build a current $name server (Debian's archive unreachable? last line: $(tail -n 1 "$log" | cut -c1-160); log: $log); the newer-command tests will be skipped" >&2
  fi
}

# Builds each current server the groups asked for.
build_current_servers() {
  local pkg
  for pkg in "${current_servers[@]-}"; do [ -z "$pkg" ] || build_current_server "$pkg"; done
}

need=()
for pkg in "${wanted[@]}"; do
  if ! has "$pkg" && [[ " ${need[*]-} " != *" $pkg "* ]]; then
    need+=("$pkg")
    # Debian's nodejs comes without npm
    if [ "$pkg" = nodejs ]; then need+=(npm); fi
  fi
done
if [ "${#need[@]}" -eq 0 ]; then
  build_current_servers
  exit 0
fi

SUDO=""
if [ "$EUID" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
    SUDO="sudo"
  else
    echo "svc: Debian packages missing for $purpose: ${need[*]}; install them as root: apt-get install ${need[*]} (or: sudo bash scripts/install-deps.sh $*)" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "svc: Debian packages missing for $purpose: ${need[*]} (no apt-get here: install them with the system's package manager)" >&2
  exit 1
fi
echo "installing for $purpose: ${need[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
build_current_servers
