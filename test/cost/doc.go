// Package cost measures what hotreload costs a pod, beside a floor program
// (./floor: fsnotify on ..data and a POST, nothing else) measured in the same
// run, and beside configmap-reload where HOTRELOAD_PEER_CONFIGMAP_RELOAD
// names its binary: memory as the kubelet counts it (each sidecar in a
// memory cgroup of its own: usage and working set, idle and under a scrape,
// and where they go; BenchmarkMemory, which needs root), CPU per change
// (also beside the reading floor, ./floor --read --debounce: the least a
// sidecar that decides by content pays), swap-to-request latency (back to
// back, and with the tools idle before each swap; beside the reading floor
// too, at --debounce=0), start-up time and idle CPU. Its benchmarks (make
// bench) print every figure on a line starting "COST:"; they assert nothing
// about time or size.
package cost
