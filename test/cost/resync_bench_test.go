package cost

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkIdleResync measures what the resync costs an idle sidecar, which
// BenchmarkIdle's window (shorter than the default 2m --resync-interval)
// does not see: with 10 kubelet volumes of 2 keys and nothing changing,
// hotreload with --resync-interval=5s beside hotreload without a resync and
// the floor program, over the same 30 s, nobody scraping. The window starts
// after the first resync: the volumes were written just before the start,
// and a file changed within a second of a hash is read again by the next
// one; in a pod the first resync comes two minutes after the start. It
// prints the CPU of each, the CPU of one resync (the difference, per
// resync), the idle CPU a minute at the default 2m interval that follows,
// and the growth of the anonymous memory (RssAnon) from 2 s after the
// start to the end of the window, the first resync included.
func BenchmarkIdleResync(b *testing.B) {
	const every, window = 5 * time.Second, 30 * time.Second
	hr, fl := binaries(b)
	a := newApp(b)
	_, dirs := volumes(b, 10, 2)
	h := startHotreload(b, hr, a.url(), dirs, fmt.Sprintf("--resync-interval=%s", every))
	h0 := startHotreload(b, hr, a.url(), dirs, "--resync-interval=0")
	f := startFloor(b, fl, a.url(), dirs)
	procs := []*proc{h, h0, f}
	cpu0, anon0 := make([]time.Duration, 3), make([]float64, 3)
	time.Sleep(2 * time.Second) // let start-up work end; the first resync is 3 s away
	for i, p := range procs {
		anon0[i] = kib(b, fmt.Sprintf("/proc/%d/status", p.pid()))["RssAnon"]
	}
	time.Sleep(every) // the first resync; nothing to wait for
	for i, p := range procs {
		_, cpu0[i] = p.cpu()
	}
	time.Sleep(window) // the idle window being measured
	cpu, anon := make([]float64, 3), make([]float64, 3)
	for i, p := range procs {
		_, c := p.cpu()
		cpu[i] = ms(c - cpu0[i])
		anon[i] = kib(b, fmt.Sprintf("/proc/%d/status", p.pid()))["RssAnon"] - anon0[i]
	}
	resyncs := float64(window / every)
	perResync := (cpu[0] - cpu[1]) / resyncs
	perMin := func(x float64) float64 { return x * float64(time.Minute) / float64(window) }
	atDefault := perMin(cpu[1]) + perResync*float64(time.Minute)/float64(2*time.Minute)
	cost("idle resync, 10 volumes, %s, nobody scraping: CPU hotreload --resync-interval=%s %.2f ms (%.0f resyncs), without resync %.2f ms, floor %.2f ms; one resync of 10 volumes %.3f ms; idle CPU at the default 2m resync %.3f ms/min (without resync %.3f, floor %.3f; configmap-reload 0.07 in issue #28)",
		window, every, cpu[0], resyncs, cpu[1], cpu[2], perResync, atDefault, perMin(cpu[1]), perMin(cpu[2]))
	cost("idle resync, 10 volumes: anonymous memory (RssAnon) over the %s after start-up, %.0f resyncs: hotreload --resync-interval=%s %+.0f KiB, without resync %+.0f KiB, floor %+.0f KiB",
		window+every, resyncs+1, every, anon[0], anon[1], anon[2])
	b.ReportMetric(perResync, "ms/resync")
	b.ReportMetric(atDefault, "idle-cpu-ms/min")
	b.ReportMetric(anon[0], "resync-anon-KiB")
}
