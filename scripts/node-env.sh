# shellcheck shell=bash
# Sourced (not run) by scripts/quickstart.sh and .ci/run, from the repository root:
#   svc_use_node <min-major> [<max-major>]
# Keeps the `node` on PATH when its major version is in [min, max] (no max: any newer). Otherwise installs Node.js 24 LTS
# from the npm registry into .tools/node (once) and puts it first on PATH: the npm package
# `node-<platform>-<arch>@24` is the platform package that `node@24` installs from its preinstall
# script (binary in bin/, headers in include/node); taking it directly needs no install script. It
# also exports npm_config_nodedir=<that package>, so native addons (better-sqlite3, hnswlib-node) are
# compiled against the headers of the Node.js that runs them, not of the system Node.js.
# Needs a working `npm` (any Node.js >= 18 with its npm will do; scripts/install-deps.sh installs
# Debian's when there is none).
SVC_NODE_LTS=24

svc_use_node() {
  local min="$1" max="${2:-999}" major=0 pkg dir bin
  if command -v node >/dev/null 2>&1; then
    major="$(node -p 'process.versions.node.split(".")[0]')"
  fi
  if [ "$major" -ge "$min" ] && [ "$major" -le "$max" ]; then
    return 0
  fi
  pkg="$(node -p '(process.platform === "darwin" && process.arch === "arm64" ? "node-bin" : "node") + "-" + process.platform + "-" + process.arch')"
  dir="$PWD/.tools/node/node_modules/$pkg"
  bin="$dir/bin/node"
  if [ ! -x "$bin" ] || [ "$("$bin" -p 'process.versions.node.split(".")[0]')" != "$SVC_NODE_LTS" ]; then
    echo "system Node.js $(node -v 2>/dev/null || echo none) is not $min$([ "$max" = 999 ] && echo ' or newer' || echo "..$max"): installing Node.js $SVC_NODE_LTS from the npm registry ($pkg@$SVC_NODE_LTS) into .tools/node" >&2
    mkdir -p .tools/node
    npm install --prefix .tools/node --no-audit --no-fund --loglevel=error "$pkg@$SVC_NODE_LTS" >/dev/null
  fi
  export PATH="$dir/bin:$PATH"
  export npm_config_nodedir="$dir"
  echo "using Node.js $(node -v) from .tools/node" >&2
}

# Installs node_modules from package-lock.json when missing, out of date, or built for another
# Node.js ABI (native addons must match the Node.js that loads them); records the ABI afterwards.
svc_npm_ci() {
  local abi
  abi="$(node -p 'process.versions.modules')"
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
    || [ "$(cat node_modules/.svc-node-abi 2>/dev/null)" != "$abi" ]; then
    npm ci --no-audit --no-fund
    echo "$abi" > node_modules/.svc-node-abi
  fi
}
