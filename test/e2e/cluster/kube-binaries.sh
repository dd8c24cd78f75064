#!/usr/bin/env bash
# kube-binaries.sh [VERSION [DIR]]: build the control plane (kube-apiserver,
# kube-controller-manager, kube-scheduler), the node (kubelet, kube-proxy), and
# kubectl when none is on PATH, at VERSION (default 1.33.13) from the Go module
# proxy into DIR (default /var/cache/hotreload-e2e/kube/vVERSION), a cache
# outside the clone keyed by version. Does nothing when DIR already holds them.
# Its last line is DIR.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces the staging
# modules with ./staging paths. A wrapper module requires it and pins every
# staging module to v0.<minor>.<patch> instead.
set -euo pipefail
version=${1:-1.33.13}
dir=${2:-/var/cache/hotreload-e2e/kube/v$version}
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
command -v kubectl >/dev/null 2>&1 || cmds+=(kubectl)

missing=()
for c in "${cmds[@]}"; do [ -x "$dir/$c" ] || missing+=("$c"); done
if ((${#missing[@]} == 0)); then
	echo "kube binaries v$version: cached in $dir" >&2
	echo "$dir"
	exit 0
fi

start=$(date +%s)
work="$dir/.build"
mkdir -p "$work"
cd "$work"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -trimpath" CGO_ENABLED=0
go mod download "k8s.io/kubernetes@v$version" >&2
mod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$version.mod
{
	printf 'module hotreloade2ekube\n\n%s\n\n' "$(grep -E '^go ' "$mod")"
	grep -E '^godebug' "$mod" || true
	printf '\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$version"
	grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$mod" | awk -v v="v0.${version#1.}" '{printf "\t%s => %s %s\n", $1, $1, v}'
	printf ')\n'
} >go.mod
{
	printf 'package kube\n\nimport (\n'
	for c in "${cmds[@]}"; do [ "$c" = kubectl ] || printf '\t_ "k8s.io/kubernetes/cmd/%s/app"\n' "$c"; done
	printf '\t_ "k8s.io/kubectl/pkg/cmd"\n)\n'
} >kube.go
go mod tidy >/dev/null 2>&1 || go mod tidy >&2
minor=$(cut -d. -f2 <<<"$version")
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
for c in "${missing[@]}"; do
	s=$(date +%s)
	pkg="k8s.io/kubernetes/cmd/$c"
	go build -ldflags "$ld" -o "$dir/$c.tmp" "$pkg"
	mv "$dir/$c.tmp" "$dir/$c"
	echo "kube binaries v$version: built $c in $(($(date +%s) - s))s" >&2
done
cd /
rm -rf "$work"
echo "kube binaries v$version: cold build took $(($(date +%s) - start))s, cached in $dir" >&2
echo "$dir"
