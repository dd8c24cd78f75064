package cost

// Benchmarks of what hotreload costs a pod, each beside the floor program in
// the same run. Each does its whole measurement once, whatever b.N is, and
// prints its figures on "COST:" lines; nothing about time or size is
// asserted, since a loaded machine prints loaded figures.

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

// payload is a flat ConfigMap of n keys; key changed has value version v.
func payload(n, changed, v int) map[string]kubelet.File {
	p := make(map[string]kubelet.File, n)
	for i := range n {
		val := fmt.Sprintf("key %d = some value of a typical length, version 0\n", i)
		if i == changed {
			val = fmt.Sprintf("key %d = some value of a typical length, version %d\n", i, v)
		}
		p[fmt.Sprintf("key%05d.conf", i)] = kubelet.File{Data: []byte(val)}
	}
	return p
}

// volumes writes n kubelet volumes of files keys each under a temporary
// directory.
func volumes(tb testing.TB, n, files int) (vols []*kubelet.Volume, dirs []string) {
	tb.Helper()
	base := tb.TempDir()
	for i := range n {
		v := kubelet.New(filepath.Join(base, fmt.Sprintf("vol%04d", i)))
		if _, err := v.Write(payload(files, -1, 0)); err != nil {
			tb.Fatal(err)
		}
		vols = append(vols, v)
		dirs = append(dirs, v.Dir)
	}
	return vols, dirs
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkIdle measures, with 10 kubelet volumes of 2 keys each, the idle
// CPU of hotreload and of the floor program over 25 s, scaled to a minute.
// Memory is BenchmarkMemory's.
func BenchmarkIdle(b *testing.B) {
	hr, fl := binaries(b)
	a := newApp(b)
	_, dirs := volumes(b, 10, 2)
	h := startHotreload(b, hr, a.url(), dirs)
	f := startFloor(b, fl, a.url(), dirs)
	const idle = 25 * time.Second
	time.Sleep(2 * time.Second) // let start-up work end before the idle window
	h0, hs0 := h.cpu()
	f0, fs0 := f.cpu()
	time.Sleep(idle) // the idle window being measured: nothing to wait for
	h1, hs1 := h.cpu()
	f1, fs1 := f.cpu()
	perMin := func(d time.Duration) float64 { return ms(d) * float64(time.Minute) / float64(idle) }
	cost("idle CPU, 10 volumes, over %s: hotreload %.2f ms/min (stat ticks %.0f ms/min), floor %.2f ms/min (stat %.0f ms/min) (goal: level with the floor, ~0.1 ms/min)",
		idle, perMin(hs1-hs0), perMin(h1-h0), perMin(fs1-fs0), perMin(f1-f0))
	b.ReportMetric(perMin(hs1-hs0), "idle-cpu-ms/min")
}

func threads(tb testing.TB, pid int) float64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	return float64(len(tasks))
}

// readAll opens, reads and SHA-256s every file that dir's visible names
// show, once, and returns the CPU time this thread spent on it.
func readAll(tb testing.TB, dir string) time.Duration {
	tb.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadCPU(tb)
	var walk func(string)
	walk = func(d string) {
		entries, err := os.ReadDir(d)
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue
			}
			p := filepath.Join(d, e.Name())
			if e.IsDir() {
				walk(p)
				continue
			}
			f, err := os.Open(p)
			if err != nil {
				tb.Fatal(err)
			}
			info, _ := f.Stat()
			if info.IsDir() {
				f.Close()
				walk(p)
				continue
			}
			h := sha256.New()
			io.Copy(h, f)
			f.Close()
			h.Sum(nil)
		}
	}
	walk(dir)
	return threadCPU(tb) - before
}

// threadCPU is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID;
// getrusage and schedstat count in ticks here).
func threadCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// baseline is the least CPU time of three readAll passes over dir.
func baseline(tb testing.TB, dir string) time.Duration {
	best := time.Duration(math.MaxInt64)
	for range 3 {
		best = min(best, readAll(tb, dir))
	}
	return best
}

// BenchmarkChangeCPU measures the CPU time hotreload spends on one change
// (the threads' run time before and after, averaged over several changes,
// each waited for at the app; the median of three rounds), for a kubelet
// volume of 10, 1,000 and 10,000 keys where one key changes, and for a plain
// directory of 10,000 files where one file is rewritten in place (as it is,
// and with a symlink in it, which makes it walked), beside the cost of
// reading every visible file once. For the kubelet volume, the floor
// program's cost is printed too, and that of the reading floor: the floor
// program reading every visible file once per swap and posting after the
// default debounce, the least that a sidecar deciding by content pays.
func BenchmarkChangeCPU(b *testing.B) {
	hr, fl := binaries(b)
	for _, bc := range []struct {
		files, changes int
	}{{10, 200}, {1000, 40}, {10000, 8}} {
		b.Run(fmt.Sprintf("kubelet/files=%d", bc.files), func(b *testing.B) {
			const rounds = 3
			ha, fa, ra := newApp(b), newApp(b), newApp(b)
			vols, dirs := volumes(b, 1, bc.files)
			h := startHotreload(b, hr, ha.url(), dirs)
			f := startFloor(b, fl, fa.url(), dirs)
			r := startFloor(b, fl, ra.url(), dirs, "--read", "--debounce=100ms")
			base := baseline(b, dirs[0])
			time.Sleep(time.Second) // let start-up work end
			var hcpu, fcpu, rcpu, hlat, flat []float64
			var swapped time.Time
			vols[0].AfterSwap = func() { swapped = time.Now() }
			for round := range rounds {
				m0 := h.metrics()
				_, hs0 := h.cpu()
				_, fs0 := f.cpu()
				_, rs0 := r.cpu()
				var lat, fl2 []time.Duration
				for i := 1; i <= bc.changes; i++ {
					n := round*bc.changes + i
					if _, err := vols[0].Write(payload(bc.files, n%bc.files, n)); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, ha.waitCount(b, n).Sub(swapped))
					fl2 = append(fl2, fa.waitCount(b, n).Sub(swapped))
					ra.waitCount(b, n)
				}
				time.Sleep(300 * time.Millisecond) // the default debounce, and the deletion's last events
				_, hs1 := h.cpu()
				_, fs1 := f.cpu()
				_, rs1 := r.cpu()
				m1 := h.metrics()
				n := time.Duration(bc.changes)
				per := func(name string) float64 { return (m1[name] - m0[name]) / float64(bc.changes) }
				slices.Sort(lat)
				slices.Sort(fl2)
				hcpu, fcpu, rcpu = append(hcpu, ms((hs1-hs0)/n)), append(fcpu, ms((fs1-fs0)/n)), append(rcpu, ms((rs1-rs0)/n))
				hlat, flat = append(hlat, ms(lat[len(lat)/2])), append(flat, ms(fl2[len(fl2)/2]))
				cost("CPU per change, kubelet volume of %d files, round %d of %d (1 key changed, %d changes, default --debounce): hotreload %.2f ms, floor %.2f ms, reading floor %.2f ms; per change %.2f walks, %.1f inotify events, %.2f garbage collections, %.0f KiB allocated",
					bc.files, round+1, rounds, bc.changes, hcpu[round], fcpu[round], rcpu[round], per("hotreload_volume_hashes_total"), per("hotreload_watch_events_total"), per("go_gc_duration_seconds_count"), per("go_memstats_alloc_bytes_total")/1024)
			}
			cost("CPU per change, kubelet volume of %d files, median of %d rounds: hotreload %.2f ms, floor %.2f ms, reading floor (reads every visible file once, posts after 100 ms) %.2f ms; hotreload %.2fx the reading floor; reading every visible file once %.2f ms, goal <= 2x = %.2f ms; swap-to-request p50 hotreload %.1f ms (debounce 100 ms included), floor %.1f ms",
				bc.files, rounds, median(hcpu), median(fcpu), median(rcpu), median(hcpu)/median(rcpu), ms(base), 2*ms(base), median(hlat), median(flat))
			b.ReportMetric(median(hcpu), "hotreload-cpu-ms/change")
			b.ReportMetric(ms(base), "read-all-ms")
			b.ReportMetric(median(rcpu), "reading-floor-cpu-ms/change")
		})
	}
	// A plain directory is updated from what inotify names; one with a
	// symlink in it is walked (a symlink can change what it shows without
	// an event in the directory): the walk is the baseline in the same run.
	for _, linked := range []bool{false, true} {
		name := "plain/files=10000"
		if linked {
			name = "plain-with-symlink/files=10000"
		}
		b.Run(name, func(b *testing.B) {
			const files, changes = 10000, 10
			a := newApp(b)
			dir := filepath.Join(b.TempDir(), "plain")
			for i := range files {
				p := filepath.Join(dir, fmt.Sprintf("d%02d/f%05d.conf", i%100, i))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(p, fmt.Appendf(nil, "key %d = some value of a typical length, version 0\n", i), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			kind := "updated from the paths events name"
			if linked {
				if err := os.Symlink("d00", filepath.Join(dir, "link")); err != nil {
					b.Fatal(err)
				}
				kind = "with a symlink, walked"
			}
			h := startHotreload(b, hr, a.url(), []string{dir})
			base := baseline(b, dir)
			time.Sleep(time.Second) // let start-up work end
			m0 := h.metrics()
			h0, hs0 := h.cpu()
			for i := 1; i <= changes; i++ {
				p := filepath.Join(dir, fmt.Sprintf("d%02d/f%05d.conf", i%100, i))
				if err := os.WriteFile(p, fmt.Appendf(nil, "key %d = some value of a typical length, version %d\n", i, i), 0o644); err != nil {
					b.Fatal(err)
				}
				a.waitCount(b, i)
			}
			time.Sleep(300 * time.Millisecond)
			h1, hs1 := h.cpu()
			m1 := h.metrics()
			n := time.Duration(changes)
			per := func(name string) float64 { return (m1[name] - m0[name]) / float64(changes) }
			cost("CPU per change, plain directory of %d files %s (1 file rewritten in place, %d changes, default --debounce): hotreload %.2f ms (stat %.1f ms), %.2f walks and %.1f inotify events per change; reading every file once %.2f ms",
				files, kind, changes, ms((hs1-hs0)/n), ms((h1-h0)/n), per("hotreload_volume_hashes_total"), per("hotreload_watch_events_total"), ms(base))
			b.ReportMetric(ms((hs1-hs0)/n), "hotreload-cpu-ms/change")
			b.ReportMetric(ms(base), "read-all-ms")
		})
	}
}

// BenchmarkLatency measures the time from the kubelet's rename of ..data in
// an update of a 2-key volume to the reload request at the app, at
// --debounce=0, for hotreload, the floor program and the reading floor
// (--read: it reads and hashes every visible file before the request, the
// least a sidecar that decides by content does), swap by swap in turn (each
// on its own volume, so that the others are idle meanwhile). It prints each
// of three rounds and their median, then one round with the tools idle for
// 50 ms before each swap, as a sidecar is before a config change: the
// machine's threads are asleep, and every wake-up costs more.
func BenchmarkLatency(b *testing.B) {
	const swaps, rounds, idle = 200, 3, 50 * time.Millisecond
	hr, fl := binaries(b)
	type tool struct {
		vol *kubelet.Volume
		app *app
		lat []time.Duration // of the round under way
	}
	tools := make([]*tool, 3) // hotreload, floor, reading floor
	for i := range tools {
		v, d := volumes(b, 1, 2)
		t := &tool{vol: v[0], app: newApp(b)}
		switch i {
		case 0:
			startHotreload(b, hr, t.app.url(), d, "--debounce=0")
		case 1:
			startFloor(b, fl, t.app.url(), d)
		case 2:
			startFloor(b, fl, t.app.url(), d, "--read")
		}
		tools[i] = t
	}
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return ms(s[max(int(math.Ceil(p/100*float64(len(s))))-1, 0)])
	}
	// round measures swaps, numbered from n0+1, waiting pause before each,
	// and returns each tool's p50 and p99.
	round := func(n0 int, pause time.Duration) (p50, p99 [3]float64) {
		for i := 1; i <= swaps; i++ {
			for _, t := range tools {
				time.Sleep(pause)
				var swapped time.Time
				t.vol.AfterSwap = func() { swapped = time.Now() }
				n := n0 + i
				if _, err := t.vol.Write(payload(2, 0, n)); err != nil {
					b.Fatal(err)
				}
				t.lat = append(t.lat, t.app.waitCount(b, n).Sub(swapped))
			}
		}
		for i, t := range tools {
			p50[i], p99[i] = pct(t.lat, 50), pct(t.lat, 99)
			t.lat = nil
		}
		return p50, p99
	}
	const each = "hotreload p50 %.2f ms p99 %.2f ms; floor p50 %.2f ms p99 %.2f ms; reading floor p50 %.2f ms p99 %.2f ms"
	var r50, r99 [3][]float64 // by tool, a figure per round
	for r := range rounds {
		p50, p99 := round(r*swaps, 0)
		for i := range tools {
			r50[i], r99[i] = append(r50[i], p50[i]), append(r99[i], p99[i])
		}
		cost("swap-to-request, --debounce=0, round %d of %d (%d swaps each, in turn): "+each,
			r+1, rounds, swaps, p50[0], p99[0], p50[1], p99[1], p50[2], p99[2])
	}
	var m50, m99 [3]float64
	for i := range tools {
		m50[i], m99[i] = median(r50[i]), median(r99[i])
	}
	cost("swap-to-request, --debounce=0, median of %d rounds: "+each+"; gap p50 %.2f ms, p99 %.2f ms (goal: p50 within 0.3 ms, p99 within 1 ms of the floor); reading floor's gap p50 %.2f ms",
		rounds, m50[0], m99[0], m50[1], m99[1], m50[2], m99[2], m50[0]-m50[1], m99[0]-m99[1], m50[2]-m50[1])
	i50, i99 := round(rounds*swaps, idle)
	cost("swap-to-request, --debounce=0, all idle %s before each swap (%d swaps each): "+each+"; gap p50 %.2f ms, p99 %.2f ms; reading floor's gap p50 %.2f ms",
		idle, swaps, i50[0], i99[0], i50[1], i99[1], i50[2], i99[2], i50[0]-i50[1], i99[0]-i99[1], i50[2]-i50[1])
	b.ReportMetric(m50[0], "hotreload-p50-ms")
	b.ReportMetric(m50[1], "floor-p50-ms")
	b.ReportMetric(m50[2], "reading-floor-p50-ms")
	b.ReportMetric(i50[0], "hotreload-idle-p50-ms")
	b.ReportMetric(i50[1], "floor-idle-p50-ms")
	b.ReportMetric(i50[2], "reading-floor-idle-p50-ms")
}

// median returns the median of xs (the lower middle one of an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
