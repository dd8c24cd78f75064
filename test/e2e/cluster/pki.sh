#!/usr/bin/env bash
# pki.sh DIR NODE APISERVER_IP SERVICE_IP: a throwaway CA and the certificates
# of the test cluster, made with openssl: the API server's (for the address it
# listens on, the kubernetes Service's address and names, and 127.0.0.1), the
# kubelet's, and a client certificate for each component, with the identity
# the API server's bootstrap RBAC roles name. Kept while DIR exists; down.sh
# removes it with the state.
set -euo pipefail
usage="usage: pki.sh DIR NODE APISERVER_IP SERVICE_IP"
dir=${1:?$usage}
node=${2:?$usage}
apiserver_ip=${3:?$usage}
service_ip=${4:?$usage}
mkdir -p "$dir"
cd "$dir"
[ -f done ] && exit 0
# ECDSA P-256 keys: a 2048-bit RSA key took up to a second and a half to
# make on the shared 2 cores, and the cluster needs ten.
key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)
openssl req -x509 "${key[@]}" -nodes -keyout ca.key -out ca.crt -days 30 -subj "/CN=hotreload-e2e-ca" 2>/dev/null
# cert NAME CN [ORG] [SAN]: NAME.crt and NAME.key signed by the CA; a SAN makes a server certificate.
cert() {
	local name=$1 cn=$2 org=${3:-} san=${4:-} subj
	subj="/CN=$cn"
	[ -n "$org" ] && subj="/O=$org$subj"
	openssl req "${key[@]}" -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature"
		if [ -n "$san" ]; then
			echo "extendedKeyUsage=serverAuth,clientAuth"
			echo "subjectAltName=$san"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"$name.ext"
	openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" -days 30 -extfile "$name.ext" 2>/dev/null
	rm -f "$name.csr" "$name.ext"
}
cert apiserver kube-apiserver "" "IP:$apiserver_ip,IP:$service_ip,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert kubelet "$node" "" "IP:127.0.0.1,DNS:$node"
cert admin hotreload-e2e-admin system:masters
cert node "system:node:$node" system:nodes
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert controller-manager system:kube-controller-manager
cert scheduler system:kube-scheduler
cert proxy system:kube-proxy
openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
touch done
