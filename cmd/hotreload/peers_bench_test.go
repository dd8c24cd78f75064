//go:build linux

package main_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

const (
	// envCatcher makes BenchmarkSwapToSignal a SIGHUP catcher that
	// appends the time it got each SIGHUP to hups in this directory.
	envCatcher = "PEERS_TEST_SIGHUP_CATCHER"
	// envLatencies is the file where BenchmarkSwapToSignal, inside the
	// PID namespace, writes its latencies for the outside to report.
	envLatencies = "PEERS_TEST_LATENCIES"

	// catcherName is the catcher's argv[0], which --process-name matches.
	catcherName = "hrbench-catcher"
	// signalSwaps is the number of swaps measured; each takes a little
	// over the signal target's 100ms check that the target survived.
	signalSwaps = 100
)

// BenchmarkSwapToSignal measures the time from a kubelet update to the
// SIGHUP arriving at the target, with --debounce=0, in a fresh PID
// namespace: from the start of kubelet.Volume.Write (which writes the new
// version's files, then renames ..data) to the moment the target's
// signal.Notify channel delivers the SIGHUP, both read from the wall clock.
// The target is the test binary in catcher mode, named by its argv[0]. Each
// swap waits for hotreload to count the reload, which it does 100ms after
// the signal once it has seen the target survive, so no two reloads
// coalesce.
//
// Like the other benchmarks of the binary, it does its whole measurement
// once, whatever b.N is, prints a figure line and reports p50-ms and
// p99-ms. Without a PID namespace (not root, no unshare) it is skipped.
func BenchmarkSwapToSignal(b *testing.B) {
	if dir := os.Getenv(envCatcher); dir != "" {
		catchSIGHUP(b, dir) // never returns
	}
	out := filepath.Join(b.TempDir(), "latencies")
	bin, inside := inPIDNamespace(b, envLatencies+"="+out)
	if !inside {
		lat := readLatencies(b, out)
		slices.Sort(lat)
		p50, p99 := percentile(lat, 50), percentile(lat, 99)
		fmt.Printf("swap-to-signal latency (debounce=0): p50=%.2fms p99=%.2fms max=%.2fms over %d swaps, from the start of the kubelet's Write to the SIGHUP received\n",
			ms(p50), ms(p99), ms(lat[len(lat)-1]), len(lat))
		b.ReportMetric(ms(p50), "p50-ms")
		b.ReportMetric(ms(p99), "p99-ms")
		return
	}

	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	catchDir := b.TempDir()
	hups := filepath.Join(catchDir, "hups")
	startPeer(b, catcherName, &exec.Cmd{
		Path: exe,
		Args: []string{catcherName, "-test.run=^$", "-test.bench=^BenchmarkSwapToSignal$", "-test.benchtime=1x"},
		Env:  append(os.Environ(), envCatcher+"="+catchDir),
	})
	poll.Eventually(b, 20*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(catchDir, "ready"))
		return err == nil
	}, "the SIGHUP catcher is not ready")

	vol := kubelet.New(filepath.Join(b.TempDir(), "vol"))
	e2etest.Write(b, vol, true, e2etest.Payload("app.conf", "swap=0\n"))
	hr := e2etest.StartWith(b, e2etest.Options{Binary: bin},
		"--volume-dir="+vol.Dir, "--signal=SIGHUP", "--process-name="+catcherName, "--debounce=0")
	hr.WaitReady(10 * time.Second)

	success := map[string]string{"target": "signal:" + catcherName, "result": "success"}
	lat := make([]time.Duration, 0, signalSwaps)
	b.ResetTimer()
	for i := 1; i <= signalSwaps; i++ {
		t0 := time.Now()
		e2etest.Write(b, vol, true, e2etest.Payload("app.conf", fmt.Sprintf("swap=%d\n", i)))
		var got []time.Time
		poll.EventuallyMsg(b, 10*time.Second, func() bool {
			got = readHups(b, hups)
			return len(got) >= i
		}, func() string { return fmt.Sprintf("swap %d: %d SIGHUPs received", i, len(got)) })
		if len(got) != i {
			b.Fatalf("swap %d: %d SIGHUPs received, want one per swap", i, len(got))
		}
		lat = append(lat, got[i-1].Sub(t0))
		waitMetric(b, hr, 10*time.Second, "hotreload_reloads_total", success, equals(float64(i)))
	}
	b.StopTimer()
	hr.Stop()

	var s strings.Builder
	for _, d := range lat {
		fmt.Fprintln(&s, int64(d))
	}
	if err := os.WriteFile(os.Getenv(envLatencies), []byte(s.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}

// catchSIGHUP is the catcher: it appends the wall-clock time of every
// SIGHUP, in Unix nanoseconds, to dir/hups, once it has written dir/ready.
// It runs until it is killed.
func catchSIGHUP(b *testing.B, dir string) {
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGHUP)
	f, err := os.OpenFile(filepath.Join(dir, "hups"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	for range c {
		now := time.Now().UnixNano()
		if _, err := fmt.Fprintln(f, now); err != nil {
			b.Fatal(err)
		}
	}
}

// readHups reads the times the catcher wrote.
func readHups(tb testing.TB, path string) []time.Time {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var ts []time.Time
	for line := range strings.Lines(string(b)) {
		if !strings.HasSuffix(line, "\n") {
			break // being written
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		ts = append(ts, time.Unix(0, ns))
	}
	return ts
}

// readLatencies reads what the benchmark wrote inside the namespace.
func readLatencies(tb testing.TB, path string) []time.Duration {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("latencies from the PID namespace: %v", err)
	}
	var lat []time.Duration
	for _, f := range strings.Fields(string(b)) {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		lat = append(lat, time.Duration(ns))
	}
	if len(lat) == 0 {
		tb.Fatalf("%s: no latencies", path)
	}
	return lat
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted, by the
// nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
