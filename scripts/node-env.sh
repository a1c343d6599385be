# shellcheck shell=bash
# Sourced (not run) by scripts/quickstart.sh and .ci/run, from the repository root:
#   svc_use_node <min-major> <max-major>
# Keeps the `node` on PATH when it is a version svc is tested on within [min, max] (see
# svc_node_fits). Otherwise installs Node.js $SVC_NODE_VERSION from the npm registry into
# .tools/node (once) and puts it first on PATH: the npm package `node-<platform>-<arch>` is the
# platform package that `node@24` installs from its preinstall script (binary in bin/, headers in
# include/node); taking it directly needs no install script. npm_config_nodedir is pointed at it,
# so native addons (better-sqlite3, hnswlib-node) are compiled against the headers of the Node.js
# that runs them, not of the system Node.js.
# Needs a working `npm` (any Node.js >= 18 with its npm; scripts/install-deps.sh installs
# Debian's when there is none).
#
# Why 24.18.1 and not the newest 24.x: from 24.19.0 on, Node's `node::ObjectWrap` header registers
# an environment cleanup hook that an addon built against it removes in its destructor; better-sqlite3
# 12 (the newest line that still runs on Node 20) wraps its statements with it, and a statement
# collected while the process exits then aborts the process ("RemoveEnvironmentCleanupHook ...
# Assertion failed: (env) != nullptr"; nodejs/node#65446). The abort follows the headers the
# addon was compiled against: built against 24.18.1 it does not happen. better-sqlite3 13 (Node-API)
# avoids it on every version but needs Node >= 22.
SVC_NODE_VERSION=24.18.1

# True when Node.js version $1 (e.g. v24.18.1) is in [min $2, max $3] majors and is not a 24.x
# from 24.19.0 on (see above).
svc_node_fits() {
  local v="${1#v}" major minor
  major="${v%%.*}"
  minor="${v#*.}"
  minor="${minor%%.*}"
  [ "$major" -ge "$2" ] && [ "$major" -le "$3" ] && ! { [ "$major" = 24 ] && [ "$minor" -ge 19 ]; }
}

svc_use_node() {
  local min="$1" max="$2" current="none" pkg dir bin
  if command -v node >/dev/null 2>&1; then
    current="$(node -v)"
    if svc_node_fits "$current" "$min" "$max"; then
      return 0
    fi
  fi
  pkg="$(node -p '(process.platform === "darwin" && process.arch === "arm64" ? "node-bin" : "node") + "-" + process.platform + "-" + process.arch')"
  dir="$PWD/.tools/node/node_modules/$pkg"
  bin="$dir/bin/node"
  if [ ! -x "$bin" ] || [ "$("$bin" -v)" != "v$SVC_NODE_VERSION" ]; then
    echo "system Node.js $current is not one svc runs on here ($min..$max): installing Node.js $SVC_NODE_VERSION from the npm registry ($pkg) into .tools/node" >&2
    mkdir -p .tools/node
    npm install --prefix .tools/node --no-audit --no-fund --loglevel=error "$pkg@$SVC_NODE_VERSION" >/dev/null
  fi
  export PATH="$dir/bin:$PATH"
  export npm_config_nodedir="$dir"
  echo "using Node.js $(node -v) from .tools/node" >&2
}

# Installs node_modules from package-lock.json when missing, out of date, or built for another
# Node.js (native addons must match the Node.js that loads them); records that version afterwards
# in node_modules/.svc-node, which bin/svc.js and the npm scripts (scripts/with-node.mjs) read to
# run on that Node.js in any later shell (scripts/addon-node.mjs).
svc_npm_ci() {
  local built
  built="$(node -v) ${npm_config_nodedir:-}"
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
    || [ "$(cat node_modules/.svc-node 2>/dev/null)" != "$built" ]; then
    npm ci --no-audit --no-fund
    echo "$built" > node_modules/.svc-node
  fi
}
