#!/usr/bin/env bash
# up.sh: bring up a whole single-node Kubernetes on this machine:
#
#   etcd (Debian etcd-server)          http://127.0.0.1:2379
#   containerd + runc (Debian)         unix://$E2E_STATE/containerd/containerd.sock
#   pod network (Debian's CNI plugins) bridge hre2e0, 10.244.0.1 on 10.244.0.0/24
#   kube-apiserver                     https://10.244.0.1:6443, Node,RBAC, x509 client certs
#   kube-controller-manager            https://127.0.0.1:10257, every default controller
#   kube-scheduler                     https://127.0.0.1:10259
#   kubelet                            https://127.0.0.1:10250, node "localhost", InternalIP 10.244.0.1
#   kube-proxy (iptables mode)         Services on 10.96.0.0/12, health on 127.0.0.1:10256
#
# The kube binaries are built by kube-binaries.sh, all at one version. The API
# server listens on the bridge's address so that the kubernetes Service has an
# endpoint that pods reach through kube-proxy as in any cluster (Endpoints may
# not be loopback addresses). Everything stays on this machine: the HRE2E-*
# chains drop what would be forwarded between the bridge and any other
# interface, what reaches the bridge's range from another interface, and
# what the host sends to the service range that kube-proxy did not
# translate. There is no cluster DNS: nothing the examples or the suite run
# looks a name up (the controller finds the API server by the
# KUBERNETES_SERVICE_HOST address the kubelet gives every pod), so pods get an
# empty resolv.conf. The node is named "localhost" so that `kubectl logs`
# reaches the kubelet over loopback. The kubelet keeps its default
# syncFrequency (1m) unless E2E_SYNC_FREQUENCY says otherwise: the timings the
# suite prints are those users get.
#
# Every change to the host is recorded under $E2E_STATE for down.sh, which
# undoes it. Expects the binaries in $E2E_KUBE_BIN (run.sh provides them);
# images are loaded afterwards (load-images.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/host.sh"
: "${E2E_STATE:?}" "${E2E_KUBE_BIN:?}"
st=$E2E_STATE
node=${E2E_NODE:-localhost}
sync=${E2E_SYNC_FREQUENCY:-1m}
export KUBECONFIG=$st/admin.kubeconfig
t0=$(date +%s%N)
say() { printf 'e2e cluster [%5.1fs] %s\n' "$((($(date +%s%N) - t0) / 1000000))e-3" "$*"; }
die() { echo "e2e cluster: $*" >&2; exit 1; }

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

for port in 2379 2380 2381 6443 10248 10249 10250 10256 10257 10259; do
	if ss -Hltn "sport = :$port" | grep -q .; then
		die "port $port is in use on this machine; stop what listens there (ss -ltnp 'sport = :$port')"
	fi
done
# The pod and service ranges must be this cluster's alone.
ip link show "$bridge" >/dev/null 2>&1 && die "a link named $bridge exists already (ip link del $bridge if a killed run left it)"
for cidr in "$cluster_cidr" "$service_cidr"; do
	clash=$({ ip -4 route show table all root "$cidr"; ip -4 route show table all match "$cidr"; } | { grep -v '^default' || true; } | head -n 1)
	[ -z "$clash" ] || die "this machine already routes part of $cidr ($clash): the cluster's pod or service range would clash"
done

mkdir -p "$st"/{logs,pids,containerd,runc,kubelet,pod-logs,volume-plugins,flexvolume,cni/net.d,cni/bin,cni/ipam}

# Host state the cluster changes, saved for down.sh before anything runs.
sysctl -e "${cluster_sysctls[@]}" >"$st/sysctl.saved"
: >"$st/created-dirs"
for d in "${created_dirs[@]}"; do [ -e "$d" ] || echo "$d" >>"$st/created-dirs"; done
: >"$st/iptables-clean"
for ipt in iptables ip6tables; do
	command -v $ipt >/dev/null || continue
	for t in filter mangle nat; do
		$ipt -t $t -S 2>/dev/null | grep -qE -- "^-N ($chain_prefixes)" || echo "$ipt $t" >>"$st/iptables-clean"
	done
done

"$here/pki.sh" "$st/pki" "$node" "$gateway" "$kubernetes_service_ip"
pki=$st/pki
# kubeconfig NAME USER: $st/NAME.kubeconfig with the client certificate NAME.
kubeconfig() {
	cat >"$st/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://$gateway:6443
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$pki/$1.crt")
    client-key-data: $(base64 -w0 "$pki/$1.key")
contexts:
- name: e2e
  context: {cluster: e2e, user: $2}
current-context: e2e
KC
}
kubeconfig admin admin
kubeconfig node "system:node:$node"
kubeconfig controller-manager system:kube-controller-manager
kubeconfig scheduler system:kube-scheduler
kubeconfig proxy system:kube-proxy
say "certificates ready"

# The bridge, made here rather than by the CNI plugin at the first pod: the
# API server listens on its address. The plugin takes it as it finds it.
touch "$st/created-bridge"
ip link add "$bridge" type bridge
ip addr add "$gateway/${pod_cidr#*/}" dev "$bridge"
ip link set "$bridge" up
say "bridge $bridge up on $gateway/${pod_cidr#*/}"

start etcd etcd --name e2e --data-dir "$st/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster e2e=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
	--quota-backend-bytes 2147483648
wait_for 60 etcd curl -fsS http://127.0.0.1:2379/health || fail_with_log etcd
say "etcd up"

# The pod network: Debian's bridge, host-local and loopback plugins (containerd
# runs loopback itself), copied into the cluster's own CNI directory. No
# masquerade: nothing leaves the machine. Pods get a default route through
# the bridge, as in any cluster; the HRE2E-FORWARD chain stops it there.
for plugin in bridge host-local loopback; do
	cp /usr/lib/cni/$plugin "$st/cni/bin/$plugin"
done
cat >"$st/cni/net.d/10-hotreload-e2e.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "hotreload-e2e",
  "plugins": [{
    "type": "bridge",
    "bridge": "$bridge",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "$pod_cidr", "gateway": "$gateway"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "$st/cni/ipam"
    }
  }]
}
CNI
sed -e "s|@STATE@|$st|g" -e "s|@RUNC@|$(command -v runc)|g" "$here/containerd.toml" >"$st/containerd.toml"
start containerd containerd --config "$st/containerd.toml"
wait_for 60 containerd ctr -a "$st/containerd/containerd.sock" version || fail_with_log containerd
say "containerd up"

start kube-apiserver "$E2E_KUBE_BIN/kube-apiserver" \
	--etcd-servers=http://127.0.0.1:2379 \
	--bind-address="$gateway" --advertise-address="$gateway" --secure-port=6443 \
	--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--client-ca-file="$pki/ca.crt" \
	--kubelet-certificate-authority="$pki/ca.crt" \
	--kubelet-preferred-address-types=Hostname,InternalIP,ExternalIP \
	--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
	--kubelet-client-key="$pki/apiserver-kubelet-client.key" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--service-cluster-ip-range="$service_cidr" \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--allow-privileged=true --profiling=false --v=1
wait_for 120 kube-apiserver kubectl get --raw /readyz || fail_with_log kube-apiserver
say "kube-apiserver ready"

# The controller-manager allocates the node its pod range (the first of
# cluster_cidr: pod_cidr), runs the Deployments, ReplicaSets, namespaces,
# service accounts and EndpointSlices. Its flexvolume directory would
# default to one under /usr/libexec.
start kube-controller-manager "$E2E_KUBE_BIN/kube-controller-manager" \
	--bind-address=127.0.0.1 --secure-port=10257 \
	--kubeconfig="$st/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$st/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$st/controller-manager.kubeconfig" \
	--leader-elect=false --controllers='*' --use-service-account-credentials=true \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
	--allocate-node-cidrs=true --cluster-cidr="$cluster_cidr" --node-cidr-mask-size="${pod_cidr#*/}" \
	--service-cluster-ip-range="$service_cidr" \
	--flex-volume-plugin-dir="$st/flexvolume" --profiling=false --v=1
start kube-scheduler "$E2E_KUBE_BIN/kube-scheduler" \
	--bind-address=127.0.0.1 --secure-port=10259 \
	--kubeconfig="$st/scheduler.kubeconfig" \
	--authentication-kubeconfig="$st/scheduler.kubeconfig" \
	--authorization-kubeconfig="$st/scheduler.kubeconfig" \
	--leader-elect=false --profiling=false --v=1
wait_for 60 kube-controller-manager curl -fsSk https://127.0.0.1:10257/healthz || fail_with_log kube-controller-manager
wait_for 60 kube-scheduler curl -fsSk https://127.0.0.1:10259/healthz || fail_with_log kube-scheduler
say "kube-controller-manager and kube-scheduler healthy"

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
configMapAndSecretChangeDetectionStrategy: Watch # the default, said here since the suite's timings depend on it
podLogsDir: $st/pod-logs
volumePluginDir: $st/volume-plugins
# No cluster DNS, and not the host's resolvers either: a pod looks no name up.
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
serializeImagePulls: false
maxPods: 250
KC
start kubelet "$E2E_KUBE_BIN/kubelet" --config="$st/kubelet.yaml" --kubeconfig="$st/node.kubeconfig" \
	--root-dir="$st/kubelet" --hostname-override="$node" --node-ip="$gateway" --v=2
node_ready() {
	[ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for 120 "node $node to be Ready" node_ready || fail_with_log kubelet
pod_range() { kubectl get node "$node" -o jsonpath='{.spec.podCIDR}' | grep -q .; }
wait_for 60 "node $node to be given a pod range" pod_range || fail_with_log kube-controller-manager
got=$(kubectl get node "$node" -o jsonpath='{.spec.podCIDR}')
[ "$got" = "$pod_cidr" ] || die "node $node was given the pod range '$got', but the CNI config uses $pod_cidr"
say "kubelet up, node $node Ready, pod range $got (syncFrequency $sync)"

# kube-proxy: every Service traffic is masqueraded to the bridge's address,
# so that a pod reaching another pod through a ClusterIP gets the answer back
# through the host whether or not the kernel passes bridged traffic to
# iptables (br_netfilter). It sets no sysctl: no conntrack sizes or timeouts,
# and no NodePorts on loopback (which would need route_localnet).
cat >"$st/kube-proxy.yaml" <<KP
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: $node
clientConnection: {kubeconfig: $st/proxy.kubeconfig}
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $cluster_cidr
detectLocalMode: BridgeInterface
detectLocal: {bridgeInterface: $bridge}
nodePortAddresses: ["$gateway/32"]
iptables: {masqueradeAll: true, localhostNodePorts: false}
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
oomScoreAdj: 0
KP
start kube-proxy "$E2E_KUBE_BIN/kube-proxy" --config="$st/kube-proxy.yaml" --v=1
proxy_synced() {
	curl -fsS http://127.0.0.1:10256/healthz && iptables -t nat -S KUBE-SERVICES | grep -q -- "-d $kubernetes_service_ip/32"
}
wait_for 60 "kube-proxy to program the kubernetes Service" proxy_synced || fail_with_log kube-proxy
say "kube-proxy up: kubernetes Service $kubernetes_service_ip:443 -> $gateway:6443"

# Seal the pod network in, ahead of kube-proxy's own jumps. Nothing is
# forwarded between the bridge and another interface (the host reaches the
# pods, and the pods the host, without forwarding). Nothing reaches the
# cluster's range from another interface. What the host sends goes to the
# cluster's range only if that is the bridge's (the rest of it exists
# nowhere), and to the service range only as kube-proxy translates it to
# the bridge's range: untranslated (no such Service) or translated elsewhere,
# it is refused instead of following the default route out. (OUTPUT matches
# the address kube-proxy translated to, but still the interface of the
# untranslated one: these rules look at addresses only.)
iptables -N HRE2E-FORWARD
iptables -A HRE2E-FORWARD -i "$bridge" ! -o "$bridge" -j DROP
iptables -A HRE2E-FORWARD ! -i "$bridge" -o "$bridge" -j DROP
iptables -I FORWARD 1 -j HRE2E-FORWARD
iptables -N HRE2E-INPUT
iptables -A HRE2E-INPUT -i lo -j RETURN
iptables -A HRE2E-INPUT -i "$bridge" -j RETURN
iptables -A HRE2E-INPUT -d "$cluster_cidr" -j DROP
iptables -I INPUT 1 -j HRE2E-INPUT
iptables -N HRE2E-OUTPUT
iptables -A HRE2E-OUTPUT -d "$pod_cidr" -j RETURN
iptables -A HRE2E-OUTPUT -d "$cluster_cidr" -j REJECT
iptables -A HRE2E-OUTPUT -d "$service_cidr" -j REJECT
iptables -A HRE2E-OUTPUT -m conntrack --ctstate DNAT --ctorigdst "$service_cidr" -j REJECT
iptables -I OUTPUT 1 -j HRE2E-OUTPUT
say "pod network sealed in (iptables chains HRE2E-FORWARD, HRE2E-INPUT, HRE2E-OUTPUT)"

# The controller-manager's service account controller and CA publisher fill
# every namespace; pods of the default namespace need its ServiceAccount.
wait_for 60 "the default ServiceAccount" kubectl -n default get serviceaccount default || fail_with_log kube-controller-manager
wait_for 60 "the kube-root-ca.crt ConfigMap" kubectl -n default get configmap kube-root-ca.crt || fail_with_log kube-controller-manager
say "cluster up: export KUBECONFIG=$KUBECONFIG"
