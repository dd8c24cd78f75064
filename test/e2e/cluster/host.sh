# host.sh, sourced by up.sh, down.sh and run.sh: what the cluster changes on
# the host outside its state directory, which up.sh saves, down.sh restores
# and run.sh checks; and the addresses the cluster uses, which exist only on
# this machine.

# The sysctls the cluster sets: the kubelet's, and ip_forward (the bridge CNI
# plugin turns it on; Service traffic from a pod to another pod is routed
# through the host).
cluster_sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
	net.ipv4.conf.all.route_localnet)

# The pod network: one bridge, and the first /24 of the cluster's range for
# the one node (a Node that a test registers without a kubelet gets the
# next). The bridge's own address (the pods' gateway) is also where the API
# server listens, so that the kubernetes Service has an endpoint pods can
# reach; nothing outside this machine can (see the HRE2E-* chains in up.sh).
bridge=hre2e0
cluster_cidr=10.244.0.0/16
pod_cidr=10.244.0.0/24
gateway=10.244.0.1
service_cidr=10.96.0.0/12
kubernetes_service_ip=10.96.0.1
# The iptables chains of the cluster, by prefix: the kubelet's and kube-proxy's
# KUBE-*, and up.sh's own HRE2E-*, which seal the pod network in.
chain_prefixes='KUBE-|HRE2E-'
# The paths the cluster may create outside its state directory: libcni's
# cache (containerd 1.6 cannot move it) and the kubelet's legacy log links.
created_dirs=(/var/lib/cni /var/log/containers)
