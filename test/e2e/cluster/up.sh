#!/usr/bin/env bash
# up.sh: bring up a real single-node Kubernetes on this machine, all on 127.0.0.1:
#
#   etcd (Debian etcd-server)              http://127.0.0.1:2379
#   kube-apiserver (built, kube-binaries.sh) https://127.0.0.1:6443, Node,RBAC, x509 client certs
#   containerd + runc (Debian)             unix://$E2E_STATE/containerd/containerd.sock
#   kubelet (built)                        https://127.0.0.1:10250, node "localhost"
#
# There is no scheduler, controller-manager or kube-proxy: pods set
# spec.nodeName and hostNetwork, images are imported (never pulled). The node
# is named "localhost" so that `kubectl logs` reaches the kubelet over loopback.
# The kubelet keeps its default syncFrequency (1m) unless E2E_SYNC_FREQUENCY
# says otherwise: the timings the suite prints are those users get.
#
# Every change to the host is recorded under $E2E_STATE for down.sh, which
# undoes it; down.sh also runs first here, so a run that was killed hard is
# cleaned up by the next one. Expects the binaries in $E2E_KUBE_BIN and the
# image archives in $E2E_STATE/../images (run.sh provides both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/host.sh"
: "${E2E_STATE:?}" "${E2E_KUBE_BIN:?}" "${E2E_IMAGES:?}"
st=$E2E_STATE
node=${E2E_NODE:-localhost}
sync=${E2E_SYNC_FREQUENCY:-1m}
export KUBECONFIG=$st/admin.kubeconfig
ctr="ctr -a $st/containerd/containerd.sock -n k8s.io"
t0=$(date +%s%N)
say() { printf 'e2e cluster [%5.1fs] %s\n' "$((($(date +%s%N) - t0) / 1000000))e-3" "$*"; }

# wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	local deadline=$(($(date +%s) + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		if (($(date +%s) >= deadline)); then
			echo "e2e cluster: timed out waiting for $what; its log follows" >&2
			return 1
		fi
		sleep 0.2
	done
}
# start NAME CMD...: a daemon in its own session; its pid is recorded for down.sh.
start() {
	local name=$1
	shift
	setsid "$@" >"$st/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$st/pids/$name.pid"
}
fail_with_log() { tail -n 30 "$st/logs/$1.log" >&2; exit 1; }

for port in 2379 2380 2381 6443 10248 10250; do
	if ss -Hltn "sport = :$port" | grep -q .; then
		echo "e2e cluster: port $port is in use on this machine; stop what listens there (ss -ltnp 'sport = :$port')" >&2
		exit 1
	fi
done

mkdir -p "$st"/{logs,pids,containerd,runc,kubelet,pod-logs,volume-plugins,cni/net.d,cni/bin}

# Host state the kubelet changes, saved for down.sh before anything runs.
sysctl -e "${kubelet_sysctls[@]}" >"$st/sysctl.saved"
[ -d /var/log/containers ] || touch "$st/created-var-log-containers"
: >"$st/iptables-clean"
for ipt in iptables ip6tables; do
	command -v $ipt >/dev/null || continue
	for t in filter mangle nat; do
		$ipt -t $t -S 2>/dev/null | grep -q -- '^-N KUBE-' || echo "$ipt $t" >>"$st/iptables-clean"
	done
done

"$here/pki.sh" "$st/pki" "$node"
pki=$st/pki
# kubeconfig FILE CERT USER
kubeconfig() {
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $3
  user:
    client-certificate-data: $(base64 -w0 "$pki/$2.crt")
    client-key-data: $(base64 -w0 "$pki/$2.key")
contexts:
- name: e2e
  context: {cluster: e2e, user: $3}
current-context: e2e
KC
}
kubeconfig "$st/admin.kubeconfig" admin admin
kubeconfig "$st/node.kubeconfig" node "system:node:$node"
say "certificates ready"

start etcd etcd --name e2e --data-dir "$st/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster e2e=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
	--quota-backend-bytes 2147483648
wait_for 60 etcd curl -fsS http://127.0.0.1:2379/health || fail_with_log etcd
say "etcd up"

echo '{"cniVersion": "0.4.0", "name": "hostnetwork-only", "plugins": [{"type": "none-installed"}]}' \
	>"$st/cni/net.d/10-hostnetwork-only.conflist"
sed -e "s|@STATE@|$st|g" -e "s|@RUNC@|$(command -v runc)|g" "$here/containerd.toml" >"$st/containerd.toml"
start containerd containerd --config "$st/containerd.toml"
wait_for 60 containerd $ctr version || fail_with_log containerd
for archive in "$E2E_IMAGES"/*.tar; do
	$ctr images import --no-unpack=false "$archive" >/dev/null
done
say "containerd up, images: $($ctr images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

start kube-apiserver "$E2E_KUBE_BIN/kube-apiserver" \
	--etcd-servers=http://127.0.0.1:2379 \
	--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 \
	--endpoint-reconciler-type=none \
	--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--client-ca-file="$pki/ca.crt" \
	--kubelet-certificate-authority="$pki/ca.crt" \
	--kubelet-preferred-address-types=Hostname,InternalIP,ExternalIP \
	--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
	--kubelet-client-key="$pki/apiserver-kubelet-client.key" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--service-cluster-ip-range=10.96.0.0/12 \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--allow-privileged=true --profiling=false --v=1
wait_for 120 kube-apiserver kubectl get --raw /readyz || fail_with_log kube-apiserver
say "kube-apiserver ready"

cat >"$st/kubelet.yaml" <<KC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$st/containerd/containerd.sock
cgroupDriver: cgroupfs
failSwapOn: false
syncFrequency: $sync
# Without a controller-manager the kubelet's ConfigMap cache TTL would fall
# back to a minute; a watch pushes each change as it happens.
configMapAndSecretChangeDetectionStrategy: Watch
podLogsDir: $st/pod-logs
volumePluginDir: $st/volume-plugins
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
serializeImagePulls: false
maxPods: 250
KC
start kubelet "$E2E_KUBE_BIN/kubelet" --config="$st/kubelet.yaml" --kubeconfig="$st/node.kubeconfig" \
	--root-dir="$st/kubelet" --hostname-override="$node" --v=2
node_ready() {
	[ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for 120 "node $node to be Ready" node_ready || fail_with_log kubelet
say "kubelet up, node $node Ready (syncFrequency $sync)"

# What a controller-manager would make: the default ServiceAccount (the
# admission plugin requires it) and the kube-root-ca.crt ConfigMap that
# every service account token volume projects.
kubectl create serviceaccount default -n default >/dev/null 2>&1 || true
say "cluster up: export KUBECONFIG=$KUBECONFIG"
