#!/usr/bin/env bash
# peer-reloader.sh: print the path of a stakater Reloader binary for make
# compare (test/e2e/compare_test.go), as the last line. Reloader is a peer we
# measure against, never part of this repository: neither its code nor a
# build recipe of its own is kept here.
#
# Where it comes from, first found:
#   1. HOTRELOAD_PEER_RELOADER, a binary you built;
#   2. $PEERS/reloader/reloader-$VERSION, a binary built earlier;
#   3. $PEERS/reloader/src-$VERSION, a checkout of its public source at the
#      tag $VERSION, built into (2) with its own go.mod (modules from the Go
#      module proxy).
# PEERS is $HOTRELOAD_PEERS_CACHE, else /var/cache/hotreload-peers; VERSION
# is $RELOADER_VERSION, else v1.4.21. `go install
# github.com/stakater/Reloader@VERSION` cannot do it: its go.mod has replace
# directives, which go install refuses (and the proxy answered 403 for it on
# 2026-11-26).
set -euo pipefail
version=${RELOADER_VERSION:-v1.4.21}
peers=${HOTRELOAD_PEERS_CACHE:-/var/cache/hotreload-peers}
die() { echo "peer-reloader: $*" >&2; exit 1; }

if [ -n "${HOTRELOAD_PEER_RELOADER:-}" ]; then
	[ -x "$HOTRELOAD_PEER_RELOADER" ] || die "HOTRELOAD_PEER_RELOADER=$HOTRELOAD_PEER_RELOADER is not an executable file"
	echo "$HOTRELOAD_PEER_RELOADER"
	exit 0
fi
bin=$peers/reloader/reloader-$version
src=$peers/reloader/src-$version
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
[ -f "$src/go.mod" ] || die "no Reloader $version: set HOTRELOAD_PEER_RELOADER to a binary, or put its source in $src (git clone --depth 1 --branch $version https://github.com/stakater/Reloader $src) and run again"
grep -q '^module github.com/stakater/Reloader$' "$src/go.mod" || die "$src/go.mod is not github.com/stakater/Reloader's"
start=$(date +%s)
tmp=$(mktemp "$bin.XXXXXX")
trap 'rm -f "$tmp"' EXIT
(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp" .) >&2
chmod 0755 "$tmp"
mv "$tmp" "$bin"
echo "peer-reloader: built Reloader $version from $src in $(($(date +%s) - start))s: $bin" >&2
echo "$bin"
