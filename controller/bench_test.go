package controller

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkCachedPodMemory reports the heap that a cache of 2000 pods
// holds, as a real cluster stores them (bigPod) and as TrimPod keeps them.
func BenchmarkCachedPodMemory(b *testing.B) {
	const pods = 2000
	heap := func(fill func(cache.Indexer)) float64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{mountsIndex: indexMounts})
		fill(idx)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(idx)
		return float64(after.HeapAlloc-before.HeapAlloc) / pods
	}
	for range b.N {
		full := heap(func(idx cache.Indexer) {
			for i := range pods {
				p := bigPod()
				p.Name, p.UID = fmt.Sprintf("p-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				_ = idx.Add(p)
			}
		})
		trimmed := heap(func(idx cache.Indexer) {
			for i := range pods {
				p := bigPod()
				p.Name, p.UID = fmt.Sprintf("p-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				t, _ := TrimPod(p)
				_ = idx.Add(t.(*corev1.Pod))
			}
		})
		b.ReportMetric(full, "full-B/pod")
		b.ReportMetric(trimmed, "trimmed-B/pod")
	}
}
