#!/usr/bin/env bash
# pki.sh DIR NODE: a throwaway CA and the certificates of the test cluster, made
# with openssl. Kept while DIR exists; down.sh removes it with the state.
set -euo pipefail
dir=${1:?usage: pki.sh DIR NODE}
node=${2:?usage: pki.sh DIR NODE}
mkdir -p "$dir"
cd "$dir"
[ -f done ] && exit 0
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj "/CN=hotreload-e2e-ca" 2>/dev/null
# cert NAME CN [ORG] [SAN]: NAME.crt and NAME.key signed by the CA; a SAN makes a server certificate.
cert() {
	local name=$1 cn=$2 org=${3:-} san=${4:-} subj
	subj="/CN=$cn"
	[ -n "$org" ] && subj="/O=$org$subj"
	openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
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
cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert kubelet "$node" "" "IP:127.0.0.1,DNS:$node"
cert admin hotreload-e2e-admin system:masters
cert node "system:node:$node" system:nodes
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
touch done
