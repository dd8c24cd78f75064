// Package e2e is hotreload's real-cluster suite: Go tests that run hotreload
// in real pods, next to real apps, with a real kubelet writing the volumes.
// `make e2e` brings the cluster up (cluster/up.sh), runs them with the build
// tag e2e, and tears the cluster down; see CONTRIBUTING.md at the repository's root.
package e2e
