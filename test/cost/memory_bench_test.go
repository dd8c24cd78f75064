//go:build linux

package cost

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/kubemem"
	"github.com/hotreload/hotreload/test/support/poll"
)

// peerEnv names the configmap-reload binary that BenchmarkMemory measures
// beside hotreload. configmap-reload is not on the Go module proxy; without
// it the benchmark measures hotreload and the floor, and says so.
const peerEnv = "HOTRELOAD_PEER_CONFIGMAP_RELOAD"

// The schedule of BenchmarkMemory, in seconds from the moment every sidecar
// is ready.
const (
	scrapeEvery = 15 // a common Prometheus scrape interval
	scrapeAt    = 5  // the scrapes' offset in each interval
	probeEvery  = 10 // the kubelet's default periodSeconds
	sampleEvery = 5
	// window is how long the sidecars run before the change: past
	// hotreload's first resync (--resync-interval, 2m), which re-reads
	// every volume, and the Go runtime's forced collection (2 minutes
	// without one).
	window = 150
	// afterChange is how long they run after it: two more scrapes.
	afterChange = 30
)

// sidecar is one sidecar process in a memory cgroup of its own.
type sidecar struct {
	tool    string // hotreload, configmap-reload or floor
	scraped bool   // scraped every 15 s (and hotreload probed every 10 s), or left alone
	p       *proc
	cg      *memCgroup
	img     *image
	app     *app
	client  *http.Client // keeps its connection between scrapes, as Prometheus does

	ws          []uint64 // the working set at each sample of the phase under way
	scrapes     int
	firstScrape []bool    // the binary's pages the first scrape mapped
	laterPages  int       // the pages all later scrapes mapped
	allocs      []float64 // go_memstats_alloc_bytes_total at each later scrape
	last        map[string]float64
}

func (s *sidecar) name() string {
	if s.scraped {
		return s.tool + " (scraped)"
	}
	return s.tool + " (idle)"
}

// hasMetrics tells whether the tool serves /metrics (the floor does not).
func (s *sidecar) hasMetrics() bool { return s.tool != "floor" }

// BenchmarkMemory measures memory as the kubelet counts it. Each sidecar
// runs in a memory cgroup of its own (cgroup v1 or v2; needs root) and is
// the first to read its binary, as a container is the first time its image
// runs on a node; its figures are the cgroup's usage and working set (usage
// minus inactive file pages: what kubectl top, eviction and the OOM killer
// use). hotreload, configmap-reload (the binary that
// HOTRELOAD_PEER_CONFIGMAP_RELOAD names) and the floor program watch the
// same 10 kubelet volumes of 2 keys each. Each runs twice: left alone, and
// scraped every 15 s as Prometheus scrapes (OpenMetrics, asking for gzip,
// one kept connection), hotreload then also probed on /-/healthy and
// /-/ready every 10 s, as the examples' pods are. They run 150 s, past
// hotreload's first resync; then one volume changes and they run 30 s more.
//
// It prints the working set and usage side by side, sampled every 5 s, and
// the CPU each spent; then where the memory goes: anonymous (Go heap
// arenas, the binary's data, the runtime's other structures), active and
// inactive file pages, kernel; the binary's pages in the page cache and
// mapped, by section and by the packages whose code they hold; the pages a
// scrape and a change map; the garbage per scrape; the Go runtime's heap
// and stacks. Nothing is asserted: a loaded machine prints loaded figures.
func BenchmarkMemory(b *testing.B) {
	root := needCgroups(b)
	hr, fl := binaries(b)
	peer := os.Getenv(peerEnv)
	if peer == "" {
		cost("memory: configmap-reload not measured: %s names no binary (set it to a configmap-reload binary to measure it beside hotreload)", peerEnv)
	} else if _, err := os.Stat(peer); err != nil {
		b.Fatalf("%s: %v", peerEnv, err)
	}
	vols, dirs := volumes(b, 10, 2)

	type tool struct{ name, bin string }
	tools := []tool{{"hotreload", hr}}
	if peer != "" {
		tools = append(tools, tool{"configmap-reload", peer})
	}
	tools = append(tools, tool{"floor", fl})
	var all []*sidecar
	for _, t := range tools {
		for _, scraped := range []bool{false, true} {
			all = append(all, startSidecar(b, root, t.name, t.bin, scraped, dirs))
		}
	}
	cost("memory: 10 kubelet volumes of 2 keys; each sidecar in a memory cgroup of its own under %s, the first to read its binary (a fresh copy, dropped from the page cache; read-ahead on this disk %s); working set = usage - inactive file, as the kubelet computes it",
		root, readAhead(dirs[0]))

	t0 := time.Now()
	cpu0 := map[*sidecar]time.Duration{}
	var steady map[string]figures
	for sec := 1; sec <= window+afterChange; sec++ {
		time.Sleep(time.Until(t0.Add(time.Duration(sec) * time.Second))) // the schedule's clock, not a wait for an event
		if sec == scrapeAt {
			for _, s := range all {
				_, cpu0[s] = s.p.cpu()
			}
		}
		for _, s := range all {
			switch {
			case !s.scraped:
			case sec%scrapeEvery == scrapeAt && s.hasMetrics():
				s.scrape(b)
			case sec%probeEvery == 0 && s.tool == "hotreload":
				s.p.get("/-/healthy")
				s.p.get("/-/ready")
			}
		}
		if sec%sampleEvery == 0 {
			for _, s := range all {
				s.ws = append(s.ws, s.cg.stats(b).WorkingSet)
			}
		}
		if sec == window {
			steady = report(b, all, cpu0, fmt.Sprintf("%d s", window), window)
			change(b, all, vols[0])
		}
	}
	after := report(b, all, nil, fmt.Sprintf("%d s after one change", afterChange), afterChange)
	// The idle ones' first scrape, now that their figures are taken.
	for _, s := range all {
		if !s.scraped && s.hasMetrics() {
			s.scrape(b)
		}
	}
	for _, s := range all {
		if s.firstScrape != nil {
			cost("memory: a scrape, %s: the first mapped %s of the binary; later ones %.1f KiB each, and left %.0f KiB of garbage each",
				s.name(), pagesLine(s.img, s.firstScrape), pagesKiB(s.laterPages)/float64(max(s.scrapes-2, 1)), s.garbagePerScrape()/1024)
		}
	}
	for _, s := range all {
		if s.hasMetrics() {
			s.goRuntime()
		}
	}
	for _, name := range []string{"hotreload (scraped)", "configmap-reload (scraped)", "hotreload (idle)", "configmap-reload (idle)"} {
		if f, ok := steady[name]; ok {
			unit := strings.NewReplacer(" (", "-", ")", "", "configmap-reload", "cmr").Replace(name) + "-ws-MiB"
			b.ReportMetric(mib(f.mean), unit)
		}
	}
	if peer == "" {
		return
	}
	var goal []string
	for _, mode := range []string{"scraped", "idle"} {
		h, c := "hotreload ("+mode+")", "configmap-reload ("+mode+")"
		for _, phase := range []struct {
			name string
			f    map[string]figures
		}{{fmt.Sprintf("over %d s", window), steady}, {fmt.Sprintf("over %d s after one change", afterChange), after}} {
			verdict := "above"
			if phase.f[h].mean <= phase.f[c].mean {
				verdict = "at or below"
			}
			goal = append(goal, fmt.Sprintf("%s, %s: %s against %s MiB (%s)", mode, phase.name, kubemem.MiB(phase.f[h].mean), kubemem.MiB(phase.f[c].mean), verdict))
		}
	}
	cost("memory: goal, hotreload's mean working set at or below configmap-reload's: %s", strings.Join(goal, "; "))
}

// figures are a sidecar's cgroup figures at the end of a phase, and the
// mean of its working set over the phase.
type figures struct {
	kubemem.Stats
	mean uint64
}

// startSidecar runs tool's binary bin (a fresh copy of it) in a new memory
// cgroup on dirs, with a webhook to an app of its own, and waits until it
// is ready.
func startSidecar(b *testing.B, root, tool, bin string, scraped bool, dirs []string) *sidecar {
	b.Helper()
	s := &sidecar{tool: tool, scraped: scraped, app: newApp(b),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}}
	b.Cleanup(s.client.CloseIdleConnections)
	s.img = loadImage(b, bin) // from the original: reading the copy would charge its pages here
	s.cg = newMemCgroup(b, root, tool)
	s.img.path = uncachedCopy(b, bin, filepath.Join(b.TempDir(), "bin"))
	switch tool {
	case "hotreload":
		args := []string{"--web.listen-address=127.0.0.1:0", "--webhook-url=" + s.app.url()}
		for _, d := range dirs {
			args = append(args, "--volume-dir="+d)
		}
		s.p = startInCgroup(b, tool, s.img.path, s.cg, args...)
		poll.Eventually(b, time.Minute, func() bool {
			m := listeningRE.FindStringSubmatch(s.p.out.String())
			if m == nil {
				return false
			}
			s.p.addr = m[1]
			return s.p.get("/-/ready") == http.StatusOK
		}, "hotreload not ready:\n%s", &s.p.out)
	case "configmap-reload":
		addr := freeAddr(b)
		args := []string{"--web.listen-address=" + addr, "--webhook-url=" + s.app.url()}
		for _, d := range dirs {
			args = append(args, "--volume-dir="+d)
		}
		s.p = startInCgroup(b, tool, s.img.path, s.cg, args...)
		s.p.addr = addr
		// It watches every directory, then listens; a connection (not a
		// request, which would be its first scrape) says it listens.
		poll.Eventually(b, time.Minute, func() bool {
			if strings.Count(s.p.out.String(), "Watching directory") < len(dirs) {
				return false
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return false
			}
			c.Close()
			return true
		}, "configmap-reload not ready:\n%s", &s.p.out)
	case "floor":
		s.p = startInCgroup(b, tool, s.img.path, s.cg, append([]string{"--url=" + s.app.url()}, dirs...)...)
		poll.Eventually(b, time.Minute, func() bool { return strings.Contains(s.p.out.String(), "ready") },
			"floor not ready:\n%s", &s.p.out)
	default:
		b.Fatalf("no such tool %q", tool)
	}
	return s
}

// scrape scrapes the sidecar as Prometheus does, and records what the
// scrape mapped of its binary and what its Go runtime says.
func (s *sidecar) scrape(tb testing.TB) {
	tb.Helper()
	before := mappedPages(tb, s.p.pid(), s.img)
	req, err := binary.ScrapeRequest("http://" + s.p.addr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		tb.Fatalf("scrape %s: %v", s.name(), err)
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if body, err = gzip.NewReader(resp.Body); err != nil {
			tb.Fatalf("scrape %s: %v", s.name(), err)
		}
	}
	s.last = parseSamples(body)
	mapped := diff(before.file, mappedPages(tb, s.p.pid(), s.img).file)
	s.scrapes++
	if s.scrapes == 1 {
		s.firstScrape = mapped
		return
	}
	s.laterPages += count(mapped)
	s.allocs = append(s.allocs, s.last["go_memstats_alloc_bytes_total"])
}

// garbagePerScrape is what the heap allocated from one later scrape to the
// next (the first's includes what start-up and the first scrape allocate).
func (s *sidecar) garbagePerScrape() float64 {
	if len(s.allocs) < 2 {
		return 0
	}
	return (s.allocs[len(s.allocs)-1] - s.allocs[0]) / float64(len(s.allocs)-1)
}

// parseSamples returns the samples without labels of a text exposition
// (Prometheus text or OpenMetrics), by name.
func parseSamples(r io.Reader) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// report prints, side by side, every sidecar's working set (now, and the
// mean and range of the samples of the last secs seconds) and usage, the
// CPU each spent since cpu0 (if not nil), and for each where its memory
// goes. It returns the figures by sidecar name.
func report(tb testing.TB, all []*sidecar, cpu0 map[*sidecar]time.Duration, when string, secs int) map[string]figures {
	tb.Helper()
	stats := map[string]figures{}
	var ws, usage, cpu []string
	for _, s := range all {
		st := s.cg.stats(tb)
		stats[s.name()] = figures{st, mean(s.ws)}
		ws = append(ws, fmt.Sprintf("%s %s (mean %s, %s–%s)", s.name(), kubemem.MiB(st.WorkingSet), kubemem.MiB(mean(s.ws)), kubemem.MiB(slices.Min(s.ws)), kubemem.MiB(slices.Max(s.ws))))
		s.ws = s.ws[:0]
		usage = append(usage, fmt.Sprintf("%s %s", s.name(), kubemem.MiB(st.Usage)))
		if cpu0 != nil {
			_, c := s.p.cpu()
			cpu = append(cpu, fmt.Sprintf("%s %.2f", s.name(), ms(c-cpu0[s])*60/float64(window-scrapeAt)))
		}
	}
	cost("memory: working set (MiB) at %s (mean and range of the last %d s, sampled every %d s): %s", when, secs, sampleEvery, strings.Join(ws, ", "))
	cost("memory: usage (MiB) at %s: %s", when, strings.Join(usage, ", "))
	if cpu0 != nil {
		cost("memory: CPU (ms a minute) over %d s: %s", window-scrapeAt, strings.Join(cpu, ", "))
	}
	for _, s := range all {
		st := stats[s.name()].Stats
		m := mappedPages(tb, s.p.pid(), s.img)
		cached := cachedPages(tb, s.img.path)
		r := kib(tb, fmt.Sprintf("/proc/%d/smaps_rollup", s.p.pid()))
		a := anonymous(tb, s.p.pid(), s.img.path)
		cost("memory: %s at %s: usage %s MiB = anon %s + file %s (active %s, inactive %s) + kernel %s; the process: anonymous %.0f KiB (Go heap arenas %.0f, binary data and bss %.0f, runtime off-heap and main stack %.0f), %d threads; its binary (%.1f MiB): %.0f KiB in the page cache, %.0f KiB mapped (%s)",
			s.name(), when, kubemem.MiB(st.Usage), kubemem.MiB(st.Anon), kubemem.MiB(st.File), kubemem.MiB(st.ActiveFile), kubemem.MiB(st.InactiveFile), kubemem.MiB(st.Kernel),
			r["Anonymous"], a.heap, a.data, a.other, int(threads(tb, s.p.pid())),
			float64(s.img.pages*pageSize)/(1<<20), pagesKiB(count(cached)), pagesKiB(count(m.file)), format(s.img.bySection(m.file), 0))
		cost("memory: %s at %s: mapped code by package (KiB): %s", s.name(), when, componentsLine(s.img, m.file))
	}
	return stats
}

// change changes the first volume, waits for every sidecar to call its
// app, and prints the pages of its binary that the change mapped.
func change(tb testing.TB, all []*sidecar, v *kubelet.Volume) {
	tb.Helper()
	before := map[*sidecar]mapped{}
	for _, s := range all {
		before[s] = mappedPages(tb, s.p.pid(), s.img)
	}
	if _, err := v.Write(payload(2, 0, 1)); err != nil {
		tb.Fatal(err)
	}
	for _, s := range all {
		s.app.waitCount(tb, 1)
	}
	time.Sleep(time.Second) // hotreload logs and counts a delivery after its request; not a wait for an event
	for _, s := range all {
		d := diff(before[s].file, mappedPages(tb, s.p.pid(), s.img).file)
		cost("memory: a change, %s: mapped %s of the binary", s.name(), pagesLine(s.img, d))
	}
}

// pagesLine says how much of the binary pages holds, by section, and whose
// code.
func pagesLine(im *image, pages []bool) string {
	line := fmt.Sprintf("%.0f KiB", pagesKiB(count(pages)))
	if count(pages) == 0 {
		return line
	}
	line += " (" + format(im.bySection(pages), 0)
	if c := im.byComponent(pages); len(c) > 0 {
		line += "; code: " + format(c, 6)
	}
	return line + ")"
}

// componentsLine lists the largest components of the code in pages, then
// the ones the breakdown is about (the metrics libraries, the web server's
// TLS and basic auth, the command line), wherever they rank.
func componentsLine(im *image, pages []bool) string {
	all := im.byComponent(pages)
	const top = 10
	line := format(all, top)
	var named []string
	for i, c := range all {
		switch c.k {
		case "client_golang collectors", "client_golang promhttp", "github.com/prometheus/client_golang", "github.com/prometheus/procfs",
			"github.com/prometheus/exporter-toolkit", "github.com/prometheus/common", "github.com/alecthomas/kingpin":
			if i >= top {
				named = append(named, fmt.Sprintf("%s %.0f", c.k, c.v))
			}
		}
	}
	if len(named) > 0 {
		line += "; among the others: " + strings.Join(named, ", ")
	}
	return line
}

// goRuntime prints where the Go runtime says its memory goes, from the
// sidecar's last scrape. Its metadata figures are what it mapped, not what
// is resident: the resident part is in "runtime off-heap" of report.
func (s *sidecar) goRuntime() {
	k := func(n string) float64 { return s.last[n] / 1024 }
	cost("memory: Go runtime of %s at its last scrape (KiB): heap in use %.0f (live and not yet collected %.0f), free but not returned %.0f; stacks %.0f for %.0f goroutines; metadata mapped %.0f (GC %.0f, spans %.0f, profiling buckets %.0f, other %.0f)",
		s.name(), k("go_memstats_heap_inuse_bytes"), k("go_memstats_heap_alloc_bytes"), k("go_memstats_heap_idle_bytes")-k("go_memstats_heap_released_bytes"),
		k("go_memstats_stack_inuse_bytes"), s.last["go_goroutines"],
		k("go_memstats_gc_sys_bytes")+k("go_memstats_mspan_sys_bytes")+k("go_memstats_mcache_sys_bytes")+k("go_memstats_buck_hash_sys_bytes")+k("go_memstats_other_sys_bytes"),
		k("go_memstats_gc_sys_bytes"), k("go_memstats_mspan_sys_bytes"), k("go_memstats_buck_hash_sys_bytes"), k("go_memstats_other_sys_bytes"))
}

// freeAddr returns 127.0.0.1:port with a port nothing listens on.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// readAhead says how much the kernel reads ahead on the disk that holds
// dir (best effort: "unknown"). A fault in a binary reads this much around
// it into the page cache: charged to the cgroup's usage, inactive until
// used again.
func readAhead(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "unknown"
	}
	dev := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	for _, p := range []string{dev + "/queue/read_ahead_kb", dev + "/../queue/read_ahead_kb"} { // a disk, or a partition of one
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b)) + " KiB"
		}
	}
	return "unknown"
}

func mean(xs []uint64) uint64 {
	var sum uint64
	for _, x := range xs {
		sum += x
	}
	return sum / uint64(max(len(xs), 1))
}

func mib(n uint64) float64       { return float64(n) / (1 << 20) }
func pagesKiB(pages int) float64 { return float64(pages*pageSize) / 1024 }
