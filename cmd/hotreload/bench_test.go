package main

// Benchmarks of the binary, run by `make bench` (go test -run '^$' -bench .
// -benchtime 1x). Each one runs hotreload as a real process built as the
// Makefile builds it (e2etest.Release), since latency depends on how it is
// built (memory, as the kubelet counts it, is test/cost's BenchmarkMemory);
// the tests run the race-instrumented test binary as
// hotreload instead (e2etest.Start). Each one plays the kubelet, prints its
// figures with their targets, one per line, and reports them with
// b.ReportMetric. They assert nothing about time: a slow
// machine prints slow figures.
//
// Each benchmark does its whole measurement once, whatever b.N is: the
// figures are distributions over many swaps, not per-op costs.

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// report prints a figure line and records the metrics with b.
func report(b *testing.B, line string, metrics map[string]float64) {
	b.Helper()
	fmt.Println(line)
	for unit, v := range metrics {
		b.ReportMetric(v, unit)
	}
}

// benchVolume is volume for benchmarks.
func benchVolume(b *testing.B, payload map[string]kubelet.File) *kubelet.Volume {
	b.Helper()
	v := kubelet.New(b.TempDir() + "/vol")
	e2etest.Write(b, v, true, payload)
	return v
}

func benchStart(b *testing.B, app *e2etest.App, dirs []string, extra ...string) *e2etest.Proc {
	b.Helper()
	var args []string
	for _, d := range dirs {
		args = append(args, "--volume-dir="+d)
	}
	args = append(args, "--webhook-url="+app.URL("/-/reload"))
	p := e2etest.StartWith(b, e2etest.Options{Binary: e2etest.Release(b)}, append(args, extra...)...)
	p.WaitReady(waitFor)
	return p
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted, by the
// nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkSwapToRequest measures the time from a kubelet update to the
// reload request arriving at the app. It is measured from the start of
// kubelet.Volume.Write, which also writes the new version's files before
// its rename of ..data (a fraction of a millisecond), to the moment the
// app's handler starts. Each update waits for its request before the next.
func BenchmarkSwapToRequest(b *testing.B) {
	for _, bc := range []struct {
		debounce string
		swaps    int
		target   string
	}{
		{"0", 200, "target p99 <= 10ms"},
		{"100ms", 30, "default; expect about 100ms"},
	} {
		b.Run("debounce="+bc.debounce, func(b *testing.B) {
			app := e2etest.NewApp(b)
			vol := benchVolume(b, e2etest.Payload("app.properties", "v=0", "conf.d/nested.conf", "n=0"))
			p := benchStart(b, app, []string{vol.Dir}, "--debounce="+bc.debounce)

			b.ResetTimer()
			lat := make([]time.Duration, 0, bc.swaps)
			for i := 1; i <= bc.swaps; i++ {
				t0 := time.Now()
				e2etest.Write(b, vol, true, e2etest.Payload("app.properties", fmt.Sprint("v=", i), "conf.d/nested.conf", "n=0"))
				r := app.WaitAfter(t0, waitFor)
				lat = append(lat, r.Start.Sub(t0))
				// The next swap waits for this reload's answer, so that
				// no two reloads coalesce.
				poll.Eventually(b, waitFor, func() bool { return app.Completed(200) == i }, "reload %d not answered", i)
			}
			b.StopTimer()
			slices.Sort(lat)
			p50, p99 := percentile(lat, 50), percentile(lat, 99)
			report(b, fmt.Sprintf("swap-to-request latency (debounce=%s): p50=%.2fms p99=%.2fms max=%.2fms over %d swaps, from the start of the kubelet's Write (%s)",
				bc.debounce, ms(p50), ms(p99), ms(lat[len(lat)-1]), len(lat), bc.target),
				map[string]float64{"p50-ms": ms(p50), "p99-ms": ms(p99)})
			if app.Count() != bc.swaps {
				b.Errorf("%d swaps made %d reloads, want one each", bc.swaps, app.Count())
			}
			p.Stop()
		})
	}
}

// BenchmarkBurst counts the reloads for 5 volumes updated 10 times each in
// quick succession (a ConfigMap and Secrets updated together, again and
// again), at default flags.
func BenchmarkBurst(b *testing.B) {
	app := e2etest.NewApp(b)
	var (
		vols []*kubelet.Volume
		dirs []string
	)
	for i := range 5 {
		v := benchVolume(b, e2etest.Payload("key", fmt.Sprint("volume ", i, " update 0")))
		vols, dirs = append(vols, v), append(dirs, v.Dir)
	}
	sentinel := benchVolume(b, e2etest.Payload("sentinel", "start"))
	p := benchStart(b, app, append(dirs, sentinel.Dir))

	b.ResetTimer()
	start := time.Now()
	for u := 1; u <= 10; u++ {
		for i, v := range vols {
			e2etest.Write(b, v, true, e2etest.Payload("key", fmt.Sprint("volume ", i, " update ", u)))
		}
	}
	wrote := time.Since(start)
	// Wait until the burst is delivered, without counting the sentinel's
	// own reload unless the burst's last reload covered it too.
	fire := e2etest.Settle(b, p, app, sentinel)
	n := app.Count()
	if len(fire.Dirs) == 1 {
		n--
	}
	b.StopTimer()
	report(b, fmt.Sprintf("reloads for 5 volumes x 10 rapid updates: %d (written in %s; target <= 3)", n, wrote.Round(time.Millisecond)),
		map[string]float64{"reloads": float64(n)})
	p.Stop()
}

// BenchmarkSlowApp counts the requests to an app that takes 3s to reload
// while 5 updates arrive, each one after the previous one was fired, at
// default flags.
func BenchmarkSlowApp(b *testing.B) {
	app := e2etest.NewApp(b)
	app.SetDelay(3 * time.Second)
	vol := benchVolume(b, e2etest.Payload("key", "v0"))
	p := benchStart(b, app, []string{vol.Dir})

	b.ResetTimer()
	start := time.Now()
	for i := 1; i <= 5; i++ {
		e2etest.Write(b, vol, true, e2etest.Payload("key", fmt.Sprint("v", i)))
		poll.Eventually(b, waitFor, func() bool { return len(p.Fires()) >= i }, "update %d was not fired", i)
	}
	fires := p.Fires()
	lastFire := fires[len(fires)-1].Time
	poll.Eventually(b, 3*waitFor, func() bool {
		reqs := app.Requests()
		return len(reqs) > 0 && reqs[len(reqs)-1].Start.After(lastFire) && app.Completed(200) == len(reqs)
	}, "the last update was not delivered: %s", app)
	took := time.Since(start)
	b.StopTimer()
	report(b, fmt.Sprintf("reloads for a 3s app with 5 updates: %d, all delivered %s after the first update (target <= 2)",
		app.Count(), took.Round(100*time.Millisecond)),
		map[string]float64{"reloads": float64(app.Count())})
	p.Stop()
}
