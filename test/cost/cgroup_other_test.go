//go:build !linux

package cost

// execInCgroup: memory cgroups are Linux's; BenchmarkMemory is built on
// Linux only.
func execInCgroup() {}
