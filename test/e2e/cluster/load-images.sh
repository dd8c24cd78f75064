#!/usr/bin/env bash
# load-images.sh: import the image archives that images.sh made into the
# cluster's containerd, then tag, for every image reference in examples/, the
# local image of the same program (shipped-images.txt) with that reference.
# Nothing is pulled: no registry is reachable. The examples' manifests are
# applied byte for byte as shipped; only the images behind their names are
# the ones built from this checkout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${E2E_STATE:?}" "${E2E_IMAGES:?}"
ctr="ctr -a $E2E_STATE/containerd/containerd.sock -n k8s.io"
die() { echo "e2e images: $*" >&2; exit 1; }

for archive in "$E2E_IMAGES"/*.tar; do
	$ctr images import --no-unpack=false "$archive" >/dev/null
done

# normalize REF: the name containerd and the kubelet give REF, as
# docker.io/library/nginx:latest for nginx.
normalize() {
	local ref=$1 first
	first=${ref%%/*}
	if [ "$first" = "$ref" ]; then
		ref=docker.io/library/$ref
	elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
		ref=docker.io/$ref
	fi
	[[ ${ref##*/} == *[:@]* ]] || ref=$ref:latest
	echo "$ref"
}
# local_for REPOSITORY: the local image shipped-images.txt maps it to.
local_for() {
	awk -v repo="$1" '$1 !~ /^#/ && $1 == repo {print $2; exit}' "$here/shipped-images.txt"
}

refs=$(cd "$root" && grep -rhoE --include='*.yaml' '^[[:space:]-]*image:[[:space:]]*[^[:space:]#]+' examples |
	sed -E 's/^[[:space:]-]*image:[[:space:]]*//; s/^["'\'']//; s/["'\'']$//' | sort -u)
[ -n "$refs" ] || die "found no image reference in $root/examples"
tagged=()
for ref in $refs; do
	repo=${ref%@*}
	[[ ${repo##*/} == *:* ]] && repo=${repo%:*}
	local_image=$(local_for "$repo")
	[ -n "$local_image" ] || die "an example names the image $ref, and no line of test/e2e/cluster/shipped-images.txt maps $repo to a local image"
	$ctr images tag --force "$(normalize "$local_image")" "$(normalize "$ref")" >/dev/null
	tagged+=("$ref")
done
echo "e2e images: loaded $(cd "$E2E_IMAGES" && ls -- *.tar | sed 's/\.tar$//' | tr '\n' ' ')and tagged ${tagged[*]}"
