#!/usr/bin/env bash
# down.sh: tear down what up.sh started and undo what it changed on the host:
# only the processes whose pids up.sh recorded (and the shims of our own
# containerd socket), then mounts (the pods' network namespaces among them),
# cgroups, the bridge and its pods' links, sysctls, /var/lib/cni,
# /var/log/containers, iptables chains, and the state directory. Safe to run
# twice, and on a half-started cluster. The kube binaries and image archives
# are kept.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/host.sh"
: "${E2E_STATE:?}"
st=$E2E_STATE
[ -d "$st" ] || exit 0
export KUBECONFIG=$st/admin.kubeconfig
sock=$st/containerd/containerd.sock
say() { echo "e2e cluster: $*"; }

alive() { [ -f "$st/pids/$1.pid" ] && kill -0 "$(cat "$st/pids/$1.pid")" 2>/dev/null; }
# stop NAME...: SIGTERM the recorded pids, all at once, and SIGKILL those
# still there 15 s later.
stop() {
	local name pid pids=() i
	for name in "$@"; do
		[ -f "$st/pids/$name.pid" ] || continue
		pid=$(cat "$st/pids/$name.pid")
		rm -f "$st/pids/$name.pid"
		kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
	done
	for ((i = 0; i < 150; i++)); do
		for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=; done
		[ -z "${pid:-}" ] && return 0
		sleep 0.1
	done
	for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
}

# 1. Stop what makes pods (so that nothing replaces the ones deleted next),
# then let the kubelet stop this node's pods, so that it unmounts their
# volumes and the CNI plugin releases their addresses and links.
stop kube-controller-manager kube-scheduler
if alive kube-apiserver && alive kubelet; then
	kubectl delete pods --all -A --field-selector "spec.nodeName=${E2E_NODE:-localhost}" \
		--grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 || true
fi
stop kube-proxy kubelet kube-apiserver etcd

# 2. Whatever is left in our containerd: kill its tasks, remove its containers.
if alive containerd; then
	for ns in $(ctr -a "$sock" namespaces ls -q 2>/dev/null); do
		for task in $(ctr -a "$sock" -n "$ns" tasks ls -q 2>/dev/null); do
			ctr -a "$sock" -n "$ns" tasks kill -s KILL "$task" >/dev/null 2>&1
		done
		for c in $(ctr -a "$sock" -n "$ns" containers ls -q 2>/dev/null); do
			ctr -a "$sock" -n "$ns" tasks delete -f "$c" >/dev/null 2>&1
			ctr -a "$sock" -n "$ns" containers rm "$c" >/dev/null 2>&1
		done
	done
fi
stop containerd
# Shims outlive containerd (they are reparented to init): ours name our socket.
for pid in $(pgrep -x containerd-shim-runc-v2 2>/dev/null); do
	if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-address $sock "; then
		kill -KILL "$pid" 2>/dev/null
	fi
done
# Container processes whose shim was killed: anything still in our kubepods cgroups.
for procs in /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/*/kubepods/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/*/cgroup.procs; do
	[ -f "$procs" ] && xargs -r kill -KILL <"$procs" 2>/dev/null
done

# 3. Mounts under the state directory (volumes, rootfs, shm), deepest first.
for m in $(awk -v st="$st/" 'index($2, st) == 1 {print $2}' /proc/self/mounts | sort -r); do
	umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
done

# 4. The kubepods cgroups the kubelet made, deepest first.
for sub in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$sub" ] && find "$sub" -depth -type d -exec rmdir {} \; 2>/dev/null
done

# 5. The pod network: the links of pods whose namespace outlived them, then
# the bridge (its address and route go with it).
if [ -f "$st/created-bridge" ] && ip link show "$bridge" >/dev/null 2>&1; then
	for link in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
		ip link del "$link" 2>/dev/null
	done
	ip link del "$bridge"
fi

# 6. Host settings: sysctls, libcni's cache, the kubelet's legacy log links,
# iptables chains.
[ -f "$st/sysctl.saved" ] && sed 's/ = /=/' "$st/sysctl.saved" | xargs -r sysctl -q -w
find /var/log/containers -maxdepth 1 -type l -lname "$st/*" -delete 2>/dev/null
rm -f /var/lib/cni/results/hotreload-e2e-* 2>/dev/null
if [ -f "$st/created-dirs" ]; then
	while read -r d; do
		case $d in
		/var/lib/cni) rm -rf /var/lib/cni ;; # only libcni's cache of this cluster's pods
		*) rmdir "$d" 2>/dev/null ;;
		esac
	done <"$st/created-dirs"
fi
if [ -f "$st/iptables-clean" ]; then
	while read -r ipt t; do
		# Jumps into the cluster's chains from the built-in chains, then the chains.
		$ipt -t "$t" -S 2>/dev/null | grep -E "^-A [A-Z]+ .*-j ($chain_prefixes)" | grep -vE "^-A ($chain_prefixes)" | sed 's/^-A/-D/' |
			while read -r rule; do eval "$ipt -t $t $rule"; done
		for c in $($ipt -t "$t" -S 2>/dev/null | awk -v re="^($chain_prefixes)" '$1 == "-N" && $2 ~ re {print $2}'); do $ipt -t "$t" -F "$c"; done
		for c in $($ipt -t "$t" -S 2>/dev/null | awk -v re="^($chain_prefixes)" '$1 == "-N" && $2 ~ re {print $2}'); do $ipt -t "$t" -X "$c"; done
	done <"$st/iptables-clean"
fi

# 7. The state, unless asked to keep it for a post-mortem.
if [ "${E2E_KEEP_STATE:-0}" = 1 ]; then
	say "state kept in $st (E2E_KEEP_STATE=1)"
else
	rm -rf "$st"
fi
say "down"
