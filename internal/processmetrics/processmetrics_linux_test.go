package processmetrics

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func value(mf *dto.MetricFamily) float64 {
	m := mf.GetMetric()[0]
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// The same series as client_golang's process collector, with the same help
// and type, and the same values (read a moment apart).
func TestSameAsClientGolang(t *testing.T) {
	theirs := gather(t, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{ReportErrors: true}))
	ours := gather(t, New())
	if len(theirs) != 9 {
		t.Fatalf("client_golang's collector exported %d families here, want 9: %v", len(theirs), theirs)
	}
	for name, want := range theirs {
		got, ok := ours[name]
		if !ok {
			t.Errorf("no %s", name)
			continue
		}
		if got.GetHelp() != want.GetHelp() || got.GetType() != want.GetType() || len(got.GetMetric()) != 1 || len(got.GetMetric()[0].GetLabel()) != 0 {
			t.Errorf("%s: %v, want %v", name, got, want)
			continue
		}
		g, w := value(got), value(want)
		var ok2 bool
		switch name {
		case "process_max_fds", "process_virtual_memory_max_bytes", "process_start_time_seconds":
			ok2 = math.Abs(g-w) <= 0.01
		case "process_open_fds":
			ok2 = math.Abs(g-w) <= 2
		case "process_cpu_seconds_total":
			ok2 = g >= w && g-w <= 0.1
		case "process_virtual_memory_bytes", "process_resident_memory_bytes":
			ok2 = math.Abs(g-w) <= 0.1*w
		case "process_network_receive_bytes_total", "process_network_transmit_bytes_total":
			// The network namespace's counters: others use it too.
			ok2 = g >= w && g-w <= 0.01*w+1e7
		default:
			t.Errorf("%s: a metric this test does not know", name)
			continue
		}
		if !ok2 {
			t.Errorf("%s = %v, client_golang's %v", name, g, w)
		}
	}
	for name := range ours {
		if theirs[name] == nil {
			t.Errorf("%s: not one of client_golang's", name)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as prctl allows.
	const line = "4242 (a) b) S 1 4242 4242 0 -1 4194560 1197 0 0 0 31 7 0 0 20 0 8 0 1234567 1266008064 2845 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	got, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{utime: 31, stime: 7, startTicks: 1234567, vsize: 1266008064, rss: 2845}); got != want {
		t.Errorf("parseStat = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "4242 (cut", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1197 0 0 0 thirty 7 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) gave no error", bad)
		}
	}
}

func TestParseBootTime(t *testing.T) {
	got, err := parseBootTime([]byte("cpu  1 2 3\nintr 5 6 7\nctxt 99\nbtime 1764060000\nprocesses 4\n"))
	if err != nil || got != 1764060000 {
		t.Errorf("parseBootTime = %v, %v; want 1764060000", got, err)
	}
	if _, err := parseBootTime([]byte("cpu 1 2 3\n")); err == nil {
		t.Error("parseBootTime found a btime where there is none")
	}
}

func TestParseNetstat(t *testing.T) {
	const text = "TcpExt: SyncookiesSent InOctets\nTcpExt: 0 7\n" +
		"IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets InMcastOctets\n" +
		"IpExt: 0 0 0 6 0 0 745829882 320158156 0\n"
	in, out, err := parseNetstat([]byte(text))
	if err != nil || in != 745829882 || out != 320158156 {
		t.Errorf("parseNetstat = %v, %v, %v; want 745829882, 320158156 (IpExt's, not TcpExt's)", in, out, err)
	}
	for _, bad := range []string{"", "IpExt: InOctets OutOctets\n", "IpExt: InOctets\nIpExt: 5\n", "IpExt: InOctets OutOctets\nIpExt: 5 x\n"} {
		if _, _, err := parseNetstat([]byte(bad)); err == nil {
			t.Errorf("parseNetstat(%q) gave no error", bad)
		}
	}
}

func TestCountDirents(t *testing.T) {
	var b bytes.Buffer
	for _, name := range []string{".", "..", "0", "1", "10"} {
		rec := make([]byte, 24)
		binary.NativeEndian.PutUint16(rec[16:], uint16(len(rec)))
		copy(rec[19:], name)
		b.Write(rec)
	}
	if n, err := countDirents(b.Bytes()); err != nil || n != 3 {
		t.Errorf("countDirents = %d, %v; want 3 (not . and ..)", n, err)
	}
	if _, err := countDirents(b.Bytes()[:30]); err == nil {
		t.Error("countDirents of a cut record gave no error")
	}
}

// BenchmarkCollect gathers the process metrics with this collector and with
// client_golang's, and reports the garbage each leaves per scrape.
func BenchmarkCollect(b *testing.B) {
	for _, bc := range []struct {
		name string
		c    prometheus.Collector
	}{
		{"processmetrics", New()},
		{"client_golang", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(bc.c)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
