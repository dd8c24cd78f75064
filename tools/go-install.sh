#!/usr/bin/env bash
# go-install.sh NAME PACKAGE VERSION [LDFLAGS]: build the Go command PACKAGE
# at VERSION from the Go module proxy into a cache outside the clone, keyed
# by name and version, and print the binary's path as the last line. Does
# nothing when the cache already holds it. Used for the release tools that
# must not join go.mod: helm (its dependency graph, containerd and oras among
# it, would move the versions the controller links) and cyclonedx-gomod.
#
# The cache is $HOTRELOAD_TOOLS_CACHE, else /var/cache/hotreload-tools when it
# can be written (CI runs on a fresh clone of the same machine), else
# ${XDG_CACHE_HOME:-$HOME/.cache}/hotreload-tools. `go install pkg@version`
# checks every module against the checksum database, as go.sum would.
#
# go-install.sh --path NAME VERSION prints where the binary is or would be,
# and builds nothing.
set -euo pipefail

cache_root() {
	if [ -n "${HOTRELOAD_TOOLS_CACHE:-}" ]; then
		echo "$HOTRELOAD_TOOLS_CACHE"
	elif mkdir -p /var/cache/hotreload-tools 2>/dev/null && [ -w /var/cache/hotreload-tools ]; then
		echo /var/cache/hotreload-tools
	else
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/hotreload-tools"
	fi
}

if [ "${1:-}" = --path ]; then
	[ $# -eq 3 ] || { echo "usage: go-install.sh --path NAME VERSION" >&2; exit 2; }
	echo "$(cache_root)/$2/$3/$2"
	exit 0
fi
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
	echo "usage: go-install.sh NAME PACKAGE VERSION [LDFLAGS]" >&2
	exit 2
fi
name=$1 pkg=$2 version=$3 ldflags="-s -w ${4:-}"
dir="$(cache_root)/$name/$version"
bin="$dir/$name"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
start=$(date +%s)
# A temporary GOBIN, then a rename: a build that is interrupted leaves no
# half-written binary in the cache.
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-buildvcs=false \
	go install -trimpath -ldflags "$ldflags" "$pkg@$version" >&2
mv "$tmp/$(basename "$pkg")" "$bin"
echo "$name $version: built in $(($(date +%s) - start))s, cached in $dir" >&2
echo "$bin"
