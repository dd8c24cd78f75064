#!/usr/bin/env bash
# images.sh OUT: build the e2e suite's images with buildah, FROM scratch, and
# save each as a docker-archive OUT/NAME.tar for up.sh to import:
#
#   localhost/hotreload:e2e                  `make image BASE=scratch`, from this checkout, as users get it
#   localhost/hotreload-controller:e2e       `make image-controller BASE=scratch`, the same way
#   localhost/hotreload-e2e/pause:e2e        the pod sandbox (images/pause)
#   localhost/hotreload-e2e/testapp:e2e      the suite's observer app (images/testapp)
#   localhost/hotreload-e2e/nginx:e2e        Debian's nginx-light, uid 101
#   localhost/hotreload-e2e/prometheus:e2e   Debian's prometheus, uid 65534
#   localhost/hotreload-e2e/alertmanager:e2e Debian's prometheus-alertmanager, uid 65534
#   localhost/hotreload-e2e/reloader:e2e     stakater Reloader, uid 65534, only when
#                                            HOTRELOAD_PEER_RELOADER names its binary (make compare)
#   localhost/hotreload-e2e/configmap-reload:e2e  configmap-reload, uid 65534, only when
#                                            HOTRELOAD_PEER_CONFIGMAP_RELOAD names its binary (make compare-memory)
#
# buildah keeps its storage under OUT/.storage while it builds, and removes
# it after. (buildah's blob-info cache in /var/lib/containers/cache stays, as
# after any `make image`.)
set -euo pipefail
out=${1:?usage: images.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
storage=$out/.storage
mkdir -p "$storage"
cat >"$storage/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$storage/root"
runroot = "$storage/run"
CONF
export CONTAINERS_STORAGE_CONF=$storage/storage.conf
buildah="buildah --storage-driver vfs"

# save NAME IMAGE: the image as a docker-archive for containerd.
save() {
	rm -f "$out/$1.tar"
	$buildah push -q "$2" "docker-archive:$out/$1.tar:$2" >/dev/null
}

# rootfs DIR FILE...: copy each host FILE, and the shared libraries it links,
# into DIR at the same path.
rootfs() {
	local dir=$1 f lib
	shift
	for f in "$@"; do
		cp -L --parents "$f" "$dir"
		if ldd "$f" >/dev/null 2>&1; then
			for lib in $(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
				cp -L --parents "$lib" "$dir"
			done
		fi
	done
}

# image NAME USER ENTRYPOINT_JSON DIR: an image FROM scratch holding DIR.
image() {
	local name=$1 user=$2 entrypoint=$3 dir=$4 c
	c=$($buildah from scratch)
	$buildah copy "$c" "$dir" / >/dev/null
	$buildah config --user "$user" --entrypoint "$entrypoint" --cmd '' "$c"
	$buildah commit -q "$c" "localhost/hotreload-e2e/$name:e2e" >/dev/null
	$buildah rm "$c" >/dev/null
	save "$name" "localhost/hotreload-e2e/$name:e2e"
}

stage=$(mktemp -d)
trap 'rm -rf "$stage" "$storage"' EXIT
passwd() { # passwd DIR: the users the images run as
	mkdir -p "$1/etc"
	printf 'root:x:0:0:root:/:/sbin/nologin\nnginx:x:101:101:nginx:/nonexistent:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$1/etc/passwd"
	printf 'root:x:0:\nnginx:x:101:\nnogroup:x:65534:\n' >"$1/etc/group"
	printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$1/etc/nsswitch.conf"
}

# The Go programs of the suite: static, like hotreload.
for p in pause testapp; do
	mkdir -p "$stage/$p"
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$stage/$p/$p" "./test/e2e/images/$p")
done
image pause 65534:65534 '["/pause"]' "$stage/pause"
image testapp 65532:65532 '["/testapp"]' "$stage/testapp"

mkdir -p "$stage/nginx/tmp" "$stage/nginx/etc/nginx/conf.d"
rootfs "$stage/nginx" /usr/sbin/nginx /etc/nginx/mime.types
cp "$here/../images/nginx/nginx.conf" "$stage/nginx/etc/nginx/nginx.conf"
passwd "$stage/nginx"
chmod 1777 "$stage/nginx/tmp"
image nginx 101:101 '["/usr/sbin/nginx", "-g", "daemon off;"]' "$stage/nginx"

mkdir -p "$stage/prometheus/prometheus" "$stage/prometheus/etc/prometheus"
rootfs "$stage/prometheus" /usr/bin/prometheus
mkdir -p "$stage/prometheus/usr/share"
cp -r /usr/share/prometheus "$stage/prometheus/usr/share/"
passwd "$stage/prometheus"
image prometheus 65534:65534 '["/usr/bin/prometheus"]' "$stage/prometheus"

mkdir -p "$stage/alertmanager/alertmanager" "$stage/alertmanager/etc/alertmanager"
rootfs "$stage/alertmanager" /usr/bin/prometheus-alertmanager
mkdir -p "$stage/alertmanager/usr/share/prometheus"
cp -r /usr/share/prometheus/alertmanager "$stage/alertmanager/usr/share/prometheus/" # default.tmpl
passwd "$stage/alertmanager"
image alertmanager 65534:65534 '["/usr/bin/prometheus-alertmanager"]' "$stage/alertmanager"

# peer NAME VAR: the image of a peer of make compare, FROM scratch, from the
# binary that the variable VAR names, if set: a binary built from the peer's
# public source outside this repository.
peer() {
	local name=$1 bin=${!2:-}
	[ -n "$bin" ] || return 0
	[ -x "$bin" ] || { echo "e2e images: $2=$bin is not an executable file" >&2; exit 1; }
	mkdir -p "$stage/$name"
	cp "$bin" "$stage/$name/$name"
	image "$name" 65534:65534 "[\"/$name\"]" "$stage/$name"
}
peer reloader HOTRELOAD_PEER_RELOADER                 # TestCompareReloader (tools/peer-reloader.sh)
peer configmap-reload HOTRELOAD_PEER_CONFIGMAP_RELOAD # TestCompareMemory

# hotreload exactly as users build it.
make -C "$root" --no-print-directory image BASE=scratch IMAGE=localhost/hotreload:e2e >"$stage/make-image.log" 2>&1 ||
	{ cat "$stage/make-image.log" >&2; exit 1; }
save hotreload localhost/hotreload:e2e
make -C "$root" --no-print-directory image-controller BASE=scratch CONTROLLER_IMAGE=localhost/hotreload-controller:e2e >"$stage/make-image.log" 2>&1 ||
	{ cat "$stage/make-image.log" >&2; exit 1; }
save hotreload-controller localhost/hotreload-controller:e2e

echo "e2e images: $(cd "$out" && ls -- *.tar | tr '\n' ' ')"
