package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// BenchmarkViewSwapToRequest measures what a --view adds to the time from a
// kubelet update to the app's reload request: reading the source's new
// version, writing it into the app's directory with the kubelet's steps,
// and handing the reloader the change. Two release-built hotreloads run
// side by side, one watching its volume (--volume-dir), one writing a view
// of its volume, and the swaps alternate between them, each first half of
// the time, so that both see the same machine. --debounce=0; each swap waits for its request's answer.
func BenchmarkViewSwapToRequest(b *testing.B) {
	const swaps = 200
	type side struct {
		name string
		app  *e2etest.App
		vol  *kubelet.Volume
		p    *e2etest.Proc
		lat  []time.Duration
	}
	payload := func(i int) map[string]kubelet.File {
		return e2etest.Payload("app.properties", fmt.Sprint("v=", i), "conf.d/nested.conf", "n=0", "b", "x", "c", "y")
	}
	var sides []*side
	for _, name := range []string{"--volume-dir", "--view"} {
		s := &side{name: name, app: e2etest.NewApp(b), vol: benchVolume(b, payload(0))}
		if name == "--volume-dir" {
			s.p = benchStart(b, s.app, []string{s.vol.Dir}, "--debounce=0")
		} else {
			dir := filepath.Join(b.TempDir(), "app")
			s.p = benchStart(b, s.app, nil, "--debounce=0", "--view=ref=configmap/app,source="+s.vol.Dir+",dir="+dir)
		}
		sides = append(sides, s)
	}

	b.ResetTimer()
	for i := 1; i <= swaps; i++ {
		order := sides
		if i%2 == 0 { // each goes first half of the time: the first after an idle spell is slower
			order = []*side{sides[1], sides[0]}
		}
		for _, s := range order {
			t0 := time.Now()
			e2etest.Write(b, s.vol, true, payload(i))
			r := s.app.WaitAfter(t0, waitFor)
			s.lat = append(s.lat, r.Start.Sub(t0))
			poll.Eventually(b, waitFor, func() bool { return s.app.Completed(200) == i }, "%s: reload %d not answered", s.name, i)
		}
	}
	b.StopTimer()
	p50 := map[string]float64{}
	for _, s := range sides {
		slices.Sort(s.lat)
		p50[s.name] = ms(percentile(s.lat, 50))
		report(b, fmt.Sprintf("swap-to-request latency with %s (debounce=0): p50=%.2fms p99=%.2fms max=%.2fms over %d swaps",
			s.name, ms(percentile(s.lat, 50)), ms(percentile(s.lat, 99)), ms(s.lat[len(s.lat)-1]), swaps),
			map[string]float64{s.name[2:] + "-p50-ms": ms(percentile(s.lat, 50)), s.name[2:] + "-p99-ms": ms(percentile(s.lat, 99))})
		if s.app.Count() != swaps {
			b.Errorf("%s: %d swaps made %d reloads, want one each", s.name, swaps, s.app.Count())
		}
		s.p.Stop()
	}
	report(b, fmt.Sprintf("a view adds %.2fms at p50 (swaps alternating between the two)", p50["--view"]-p50["--volume-dir"]),
		map[string]float64{"view-added-p50-ms": p50["--view"] - p50["--volume-dir"]})
}
