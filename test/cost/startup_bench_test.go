package cost

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStartup measures, with 10 kubelet volumes of 2 keys each, the
// time from starting the process to hotreload's metrics port listening and
// to its /-/ready answering 200 (every volume hashed and watched), and to
// the floor program's "ready" line (its watches added): 20 starts of each,
// in turn, and their medians.
func BenchmarkStartup(b *testing.B) {
	hr, fl := binaries(b)
	a := newApp(b)
	_, dirs := volumes(b, 10, 2)
	const starts = 20
	args := []string{"--web.listen-address=127.0.0.1:0", "--webhook-url=" + a.url()}
	for _, d := range dirs {
		args = append(args, "--volume-dir="+d)
	}
	var listen, ready, floor []float64
	for range starts {
		l, r := timeStart(b, hr, args, true)
		listen, ready = append(listen, ms(l)), append(ready, ms(r))
		_, f := timeStart(b, fl, append([]string{"--url=" + a.url()}, dirs...), false)
		floor = append(floor, ms(f))
	}
	cost("start-up, 10 volumes, median of %d starts: hotreload's metrics port listening %.1f ms, ready (every volume hashed and watched) %.1f ms; floor ready (its watches added) %.1f ms",
		starts, median(listen), median(ready), median(floor))
	b.ReportMetric(median(ready), "hotreload-ready-ms")
	b.ReportMetric(median(floor), "floor-ready-ms")
}

// timeStart runs bin with args, and returns how long after its start
// hotreload logged that it listens and answered 200 on /-/ready, or the
// floor program printed "ready" (as ready); then stops it.
func timeStart(tb testing.TB, bin string, args []string, hotreload bool) (listening, ready time.Duration) {
	tb.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	pw.Close()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	lines := bufio.NewScanner(pr)
	var addr string
	for addr == "" && lines.Scan() {
		switch line := lines.Text(); {
		case !hotreload && line == "ready":
			return 0, time.Since(start)
		case hotreload:
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				listening, addr = time.Since(start), m[1]
			}
		}
	}
	if addr == "" {
		tb.Fatalf("%s exited or closed its output before it was ready", bin)
	}
	go io.Copy(io.Discard, pr) // the rest of its log
	deadline := start.Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return listening, time.Since(start)
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not ready within a minute", bin)
		}
		time.Sleep(200 * time.Microsecond)
	}
}
