package controller

import (
	"fmt"
	"runtime"
	"testing"
	"time"

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

// BenchmarkBurst reports the nudges of a burst: the case of issue #26 (50
// edits of one ConfigMap 200 ms apart, 5 pods that mount it, --coalesce
// 300ms) at a tenth of its time scale, so that it runs in real time in
// about a second: edits 20 ms apart, a 30 ms window. Beside it, the same
// burst without coalescing. tail-ms is how long after the last edit the
// last nudge was sent (at most the window).
func BenchmarkBurst(b *testing.B) {
	const gap, window = 20 * time.Millisecond, 30 * time.Millisecond
	for range b.N {
		off := burst(b, 0, gap)
		on := burst(b, window, gap)
		tail := time.Duration(0)
		for _, ts := range on.patches {
			tail = max(tail, ts[len(ts)-1].Sub(on.lastEdit))
		}
		b.ReportMetric(float64(on.total()), "patches/burst")
		b.ReportMetric(float64(off.total()), "uncoalesced-patches/burst")
		b.ReportMetric(float64(tail)/float64(time.Millisecond), "tail-ms")
	}
}
