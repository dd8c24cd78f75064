package watcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

// BenchmarkFairness measures how long a change in a 10-file volume takes to
// be reported, alone and while a 10,000-file volume beside it is re-hashed
// over and over, and prints both side by side. With one hashing goroutine
// for all volumes the small volume waits for a whole hash of the large one.
func BenchmarkFairness(b *testing.B) {
	const rounds = 10
	base := b.TempDir()
	small, large := filepath.Join(base, "small"), filepath.Join(base, "large")
	files := make(map[string]string)
	for i := range 10 {
		files[fmt.Sprintf("f%02d.conf", i)] = "x"
	}
	writeTree(b, small, files) // plain: a kubelet volume edited in place waits for the settle bound
	files = make(map[string]string)
	for i := range 10000 {
		files[fmt.Sprintf("d%02d/f%04d.conf", i%100, i)] = fmt.Sprintf("value %d\n", i)
	}
	writeTree(b, large, files)
	start := time.Now()
	if _, err := HashDir(large); err != nil {
		b.Fatal(err)
	}
	hashLarge := time.Since(start)

	var alone, beside []time.Duration
	for b.Loop() {
		alone = append(alone, detectionLatency(b, small, "", rounds)...)
		beside = append(beside, detectionLatency(b, small, large, rounds)...)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	a, s := median(alone), median(beside)
	b.ReportMetric(ms(a), "alone-ms")
	b.ReportMetric(ms(s), "beside-10k-ms")
	b.ReportMetric(ms(hashLarge), "hash-10k-ms")
	fmt.Printf("BenchmarkFairness: 10-file volume change detected in %.2f ms alone, %.2f ms beside a 10,000-file volume being re-hashed (one hash of it: %.0f ms); medians of %d changes each\n",
		ms(a), ms(s), ms(hashLarge), len(alone))
	fmt.Printf("COST: fairness: a 10-file volume's change seen in %.2f ms alone, %.2f ms while a 10,000-file volume is re-hashed (one hash of it %.0f ms)\n",
		ms(a), ms(s), ms(hashLarge))
}

// detectionLatency runs a watcher on small (and large, which is marked dirty
// again as soon as each hash of it ends) and returns, for rounds changes
// written into small, the time from the write to its Change.
func detectionLatency(b *testing.B, small, large string, rounds int) []time.Duration {
	b.Helper()
	dirs := []string{small}
	if large != "" {
		dirs = []string{large, small}
	}
	w, err := New(nil, nil, Options{Dirs: dirs, PollInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	waitFor(b, "Ready", func() bool { return w.Ready() == nil })
	if large != "" {
		busy := w.vols[0]
		go func() {
			for ctx.Err() == nil {
				w.mu.Lock()
				if !busy.dirty && !busy.running {
					w.markLocked(busy)
				}
				w.mu.Unlock()
				time.Sleep(100 * time.Microsecond)
			}
		}()
		time.Sleep(10 * time.Millisecond) // let its first re-hash start
	}

	var lat []time.Duration
	for i := range rounds {
		if err := os.WriteFile(filepath.Join(small, "f00.conf"), []byte(fmt.Sprint(i, time.Now().UnixNano())), 0o644); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		deadline := time.After(time.Minute)
	wait:
		for {
			select {
			case c := <-w.Changes():
				if c.Dir == small {
					lat = append(lat, time.Since(start))
					break wait
				}
			case <-deadline:
				b.Fatalf("no Change for %s within a minute", small)
			}
		}
	}
	return lat
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSwapToChange measures the watcher's own part of the
// swap-to-request latency: from the kubelet's rename of ..data in a 2-key
// volume to the Change on the channel, in-process.
func BenchmarkSwapToChange(b *testing.B) {
	const swaps = 200
	dir := filepath.Join(b.TempDir(), "vol")
	vol := kubelet.New(dir)
	files := map[string]string{"app.properties": "v=0", "conf.d/nested.conf": "n=0"}
	if _, err := vol.Write(payload(files)); err != nil {
		b.Fatal(err)
	}
	w, err := New(nil, nil, Options{Dirs: []string{dir}, PollInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(b, "Ready", func() bool { return w.Ready() == nil })
	var swapped time.Time
	vol.AfterSwap = func() { swapped = time.Now() }
	var lat []time.Duration
	for i := range swaps {
		files["app.properties"] = fmt.Sprint("v=", i+1)
		if _, err := vol.Write(payload(files)); err != nil {
			b.Fatal(err)
		}
		select {
		case c := <-w.Changes():
			lat = append(lat, c.Time.Sub(swapped))

		case <-time.After(timeout):
			b.Fatal("no Change")
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(ms(p50), "p50-ms")
	fmt.Printf("COST: watcher only, ..data swap to Change (in-process, 2-key volume, %d swaps): p50 %.3f ms p99 %.3f ms\n", swaps, ms(p50), ms(p99))
}
