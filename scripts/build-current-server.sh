#!/usr/bin/env bash
# Builds a current Valkey or Redis server from Debian's source package (the newest version in the
# unstable and experimental distributions) and caches the binary, for the kv tests of newer
# commands and for users who want svc's supervised mode on a newer server
# (`SVC_KV_REDIS_SERVER_BIN=<printed path>`).
#
#   scripts/build-current-server.sh [valkey|redis] [--cached]     (default valkey)
#
# Prints the path of the built `*-server` binary on its last line. Nothing of the system's apt
# configuration is touched: the source index is kept in the cache directory
# (`SVC_SERVER_CACHE`, default `${XDG_CACHE_HOME:-$HOME/.cache}/svc/servers`), and a binary already
# built for the package's newest version is reused. `--cached` asks nothing of the network: it
# prints the newest binary already in the cache, or exits 1 when there is none.
#
# Needs: apt-get (Debian's archive reachable), tar, make, a C compiler. Built without TLS and with
# libc malloc (no extra build dependencies); about 2-3 minutes of 2 cores.
#
# Licences (printed again from the source before building):
# - Valkey: BSD-3-Clause (COPYING in the source).
# - Redis 8.x: tri-licensed RSALv2 / SSPLv1 / AGPLv3 (LICENSE.txt in the source): fine for running
#   tests and for self-hosting, but read it before you redistribute a build or offer it as a service.
set -euo pipefail

pkg=valkey
cached_only=""
for arg in "$@"; do
  case "$arg" in
    --cached) cached_only=1 ;;
    *) pkg="$arg" ;;
  esac
done
case "$pkg" in
  valkey) bin=valkey-server ;;
  redis) bin=redis-server ;;
  *) echo "usage: $0 [valkey|redis] [--cached]" >&2; exit 2 ;;
esac

cache="${SVC_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/svc/servers}"
if [ -n "$cached_only" ]; then
  # the newest version built (directory names `<pkg>-<upstream>-<debian revision>`)
  newest="$(compgen -G "$cache/$pkg-*/bin/$bin" | sort -V | tail -n 1 || true)"
  [ -n "$newest" ] || { echo "no $pkg build in $cache" >&2; exit 1; }
  echo "$newest"
  exit 0
fi
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$cache/src"
# experimental: where Debian has Redis >= 8.2 (XACKDEL, XDELEX, the new BITOP operators) while
# unstable still has 8.0
printf '%s\n' "deb-src http://deb.debian.org/debian unstable main" \
  "deb-src http://deb.debian.org/debian experimental main" > "$apt_dir/sources.list"
apt_opts=(
  -o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
  # an unreachable archive fails in seconds, not minutes
  -o "Acquire::Retries=0" -o "Acquire::http::Timeout=15"
  # the private directories are not the _apt user's: fetch as the calling user (no warning as root)
  -o "APT::Sandbox::User=$(id -un)"
)

apt-get "${apt_opts[@]}" -qq update >&2
# the newest version of the package over both distributions (Debian's version order)
version=""
for v in $(apt-cache "${apt_opts[@]}" showsrc "$pkg" | awk '/^Version:/ { print $2 }'); do
  if [ -z "$version" ] || dpkg --compare-versions "$v" gt "$version"; then version="$v"; fi
done
[ -n "$version" ] || { echo "no source package $pkg in Debian unstable or experimental" >&2; exit 1; }
# the directory name without the Debian epoch (`5:8.0.6-3` -> `8.0.6-3`: no colon in paths)
out="$cache/$pkg-${version#*:}"
if [ -x "$out/bin/$bin" ]; then
  echo "cached: $pkg $version" >&2
  echo "$out/bin/$bin"
  exit 0
fi

work="$cache/src/$pkg-${version#*:}"
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only "$pkg=$version" >&2)
orig="$(ls "$work"/*.orig.tar.* | head -n 1)"
mkdir -p "$work/tree"
tar -xf "$orig" -C "$work/tree"
tree="$(find "$work/tree" -mindepth 1 -maxdepth 1 -type d | head -n 1)"

for f in COPYING LICENSE.txt LICENSE; do
  if [ -f "$tree/$f" ]; then
    echo "== licence of $pkg $version ($f), first lines:" >&2
    head -n 5 "$tree/$f" >&2
    break
  fi
done

make -C "$tree" -j"$(nproc)" BUILD_TLS=no MALLOC=libc >&2
mkdir -p "$out/bin"
cp "$tree/src/$bin" "$out/bin/$bin"
for f in COPYING LICENSE.txt LICENSE; do [ -f "$tree/$f" ] && cp "$tree/$f" "$out/"; done
rm -rf "$work"
echo "built: $pkg $version" >&2
echo "$out/bin/$bin"
