#!/usr/bin/env bash
# run.sh: what `make e2e` does, in five timed phases: build (the kube binaries
# on a cache miss, and the images from this checkout), cluster up (a whole
# single-node Kubernetes on this machine: cluster/up.sh), images (loaded into
# its containerd under the names the examples ship with:
# cluster/load-images.sh), suite (the Go tests in this directory), and
# teardown (cluster/down.sh), which runs however the run ends: a failed test,
# Ctrl-C, SIGTERM. Then it checks that the host is as it was before.
#
# Needs root and cgroups; installs its Debian packages with apt-get. The kube
# binaries are built once per version into E2E_CACHE (outside the clone).
# One run at a time on a machine: a second waits for the first (a lock file).
#
#   E2E_KUBE_VERSION  version of every kube binary (default 1.33.13)
#   E2E_CACHE         binary cache (default /var/cache/hotreload-e2e)
#   E2E_STATE         cluster state, removed at the end (default /tmp/hotreload-e2e)
#   E2E_RUN           a -run pattern for the suite
#   E2E_TAGS          build tags of the suite (default e2e; make compare adds compare)
#   HOTRELOAD_PEER_RELOADER  a Reloader binary: images.sh makes an image of it (make compare)
#   HOTRELOAD_PEER_CONFIGMAP_RELOAD  a configmap-reload binary: images.sh makes an image of it (make compare-memory)
#   E2E_KEEP_STATE=1  keep the state directory (logs) after the run
set -euo pipefail
die() { echo "make e2e: $*" >&2; exit 1; }
# First, before anything that a user who is not root may not be allowed to do.
[ "$(id -u)" = 0 ] || die "needs root: it runs containerd and a kubelet, and changes cgroups and iptables (run: sudo make e2e)"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/cluster/host.sh"

# One cluster per machine (fixed ports, a fixed bridge and ranges): a second
# run waits for the first to end. The lock goes when this process does: the
# daemons that up.sh starts do not inherit it (9>&-), so that a run killed
# hard leaves nothing that holds it, and the next run cleans up after it.
lockdir=/run/lock
[ -d "$lockdir" ] || lockdir=/var/lock
lock=$lockdir/hotreload-e2e.lock
exec 9>"$lock"
if ! flock -n 9; then
	echo "make e2e: another make e2e runs on this machine (it holds $lock); waiting for it to end"
	flock 9
fi

# phase NAME: end the phase that runs (printing its time), and start NAME.
phase_name= phase_start=
phases=()
phase() {
	local now
	now=$(date +%s%N)
	if [ -n "$phase_name" ]; then
		phases+=("$(printf '%-12s %6.1fs' "$phase_name" "$(((now - phase_start) / 1000000))e-3")")
		echo "make e2e: phase $phase_name took ${phases[-1]##* }"
	fi
	phase_name=$1 phase_start=$now
}
phase build
version=${E2E_KUBE_VERSION:-1.33.13}
cache=${E2E_CACHE:-/var/cache/hotreload-e2e}
export E2E_STATE=${E2E_STATE:-/tmp/hotreload-e2e}
export E2E_KUBE_BIN=$cache/kube/v$version
export E2E_IMAGES=$E2E_STATE/images
export E2E_NODE=localhost

[ "$(uname -s)" = Linux ] || die "needs Linux"
if [ ! -d /sys/fs/cgroup/memory ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
	die "needs cgroups (v1 with the memory controller, or v2) mounted at /sys/fs/cgroup"
fi

# Debian packages: the cluster's parts, and the binaries the app images copy.
need=()
for pair in etcd:etcd-server containerd:containerd runc:runc buildah:buildah iptables:iptables \
	openssl:openssl curl:curl nginx:nginx-light prometheus:prometheus \
	prometheus-alertmanager:prometheus-alertmanager /usr/lib/cni/bridge:containernetworking-plugins \
	ip:iproute2 nsenter:util-linux; do
	command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if ((${#need[@]})); then
	command -v apt-get >/dev/null || die "missing ${need[*]}, and no apt-get to install them"
	echo "make e2e: installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v kubectl >/dev/null || export PATH=$E2E_KUBE_BIN:$PATH # kube-binaries.sh builds one if needed

"$here/cluster/kube-binaries.sh" "$version" "$E2E_KUBE_BIN" >/dev/null

# host_state prints what the cluster changes on the host outside its state
# directory, so that the run can check that down.sh undid all of it.
host_state() {
	sysctl -e "${cluster_sysctls[@]}"
	local ipt t d
	for ipt in iptables ip6tables; do
		command -v $ipt >/dev/null || continue
		for t in filter mangle nat raw; do $ipt -t $t -S 2>/dev/null | sed "s/^/$ipt -t $t /" || true; done
	done
	ip -o link show | awk -F': ' '{print "link", $2}'
	ip -4 route show table all
	ip -6 route show table all | sed 's/ expires [0-9]*sec//' # router advertisements count down
	for d in "${created_dirs[@]}" /var/run/netns /var/run/kubernetes /usr/libexec/kubernetes; do
		[ -e "$d" ] && echo "$d exists"
	done
	ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods 2>/dev/null || true
	awk -v st="$E2E_STATE" 'index($2, st) == 1' /proc/self/mounts
	pgrep -af -- "$E2E_STATE" || true
}

status=1
before=
finish() {
	trap - EXIT INT TERM
	phase teardown
	"$here/cluster/down.sh" || true
	if [ -n "$before" ]; then
		after=$(host_state)
		if [ "$before" != "$after" ]; then
			echo "make e2e: the host is not as it was before the run:" >&2
			diff <(echo "$before") <(echo "$after") >&2
			status=1
		else
			echo "make e2e: host restored (sysctls, iptables, links, routes, cgroups, mounts, /var/lib/cni, /var/log/containers, processes)"
		fi
	fi
	phase done
	echo "make e2e: phase times"
	printf '  %s\n' "${phases[@]}"
	if ((status == 0)); then echo "make e2e: PASS"; else echo "make e2e: FAIL (status $status)"; fi
	exit "$status"
}
trap finish EXIT
trap 'echo "make e2e: interrupted, tearing down" >&2; status=130; finish' INT TERM

"$here/cluster/down.sh" >/dev/null 2>&1 || true # what a run killed hard left behind
before=$(host_state)
mkdir -p "$E2E_STATE"
"$here/cluster/images.sh" "$E2E_IMAGES"
phase "cluster up"
"$here/cluster/up.sh" 9>&-
export KUBECONFIG=$E2E_STATE/admin.kubeconfig
phase images
"$here/cluster/load-images.sh"
phase suite

cd "$root"
set +e
go test -tags "${E2E_TAGS:-e2e}" -count=1 -v -parallel 8 -timeout 45m ${E2E_RUN:+-run "$E2E_RUN"} ./test/e2e/ 2>&1 | tee "$E2E_STATE/suite.log"
status=${PIPESTATUS[0]}
set -e
echo
echo "make e2e: figures"
grep -h 'E2E-FIGURE' "$E2E_STATE/suite.log" | sed 's/^.*E2E-FIGURE: */  /' || true
