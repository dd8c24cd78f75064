# host.sh, sourced by up.sh and run.sh: what the kubelet changes on the host
# outside the state directory, which up.sh saves, down.sh restores and run.sh
# checks.

# The sysctls the kubelet sets.
kubelet_sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
