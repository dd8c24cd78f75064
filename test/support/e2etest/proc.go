package e2etest

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
)

// Proc is a running hotreload that belongs to a test: a failure to start,
// to scrape or to stop fails the test, the process is killed when the test
// ends, and its logs are written to the test log if the test failed.
type Proc struct {
	*binary.Process
	tb testing.TB
}

// Options tune StartWith. The zero value runs this test binary as
// hotreload (see RunMain).
type Options struct {
	// Binary is the path to run, such as Release(tb); "" means this test
	// binary.
	Binary string
	// Env is added to the environment of the process.
	Env []string
	// Stderr, if set, also receives everything the process writes to
	// stderr.
	Stderr io.Writer
}

func (o Options) binary(tb testing.TB) (string, []string) {
	tb.Helper()
	if o.Binary != "" {
		return o.Binary, o.Env
	}
	bin, env := self(tb)
	return bin, append(env, o.Env...)
}

// Start runs hotreload with args and returns once it serves its endpoints,
// as binary.Start does.
func Start(tb testing.TB, args ...string) *Proc {
	tb.Helper()
	return StartWith(tb, Options{}, args...)
}

// StartWith is Start with options.
func StartWith(tb testing.TB, opts Options, args ...string) *Proc {
	tb.Helper()
	bin, env := opts.binary(tb)
	p, err := binary.Start(bin, binary.Options{Env: env, Stderr: opts.Stderr}, args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		p.Kill()
		if strings.Contains(p.Logs(), "WARNING: DATA RACE") {
			tb.Errorf("the race detector found a data race in hotreload")
		}
		if tb.Failed() {
			tb.Logf("hotreload %s\n--- stderr:\n%s--- stdout:\n%s", strings.Join(p.Args, " "), p.Logs(), p.Stdout())
		}
	})
	return &Proc{Process: p, tb: tb}
}

// Run runs hotreload with args, expecting it to exit by itself within
// timeout (a bad command line, --version); it fails the test if it does
// not.
func Run(tb testing.TB, timeout time.Duration, args ...string) binary.Result {
	tb.Helper()
	bin, env := self(tb)
	r, err := binary.Run(bin, env, timeout, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// WaitLog waits until a log line contains every one of substrs and fails
// the test if none does within timeout.
func (p *Proc) WaitLog(timeout time.Duration, substrs ...string) {
	p.tb.Helper()
	poll.Eventually(p.tb, timeout, func() bool { return p.CountLog(substrs...) > 0 },
		"no log line with %q", substrs)
}

// WaitReady waits until GET /-/ready answers 200.
func (p *Proc) WaitReady(timeout time.Duration) {
	p.tb.Helper()
	poll.Eventually(p.tb, timeout, func() bool { return p.Status("/-/ready") == http.StatusOK },
		"GET /-/ready never answered 200")
}

// Scrape returns the metrics exposed at /metrics, parsed.
func (p *Proc) Scrape() map[string]*dto.MetricFamily {
	p.tb.Helper()
	return p.ScrapePath("/metrics")
}

// ScrapePath returns the metrics exposed at path, parsed. It fails the test
// if they cannot be read.
func (p *Proc) ScrapePath(path string) map[string]*dto.MetricFamily {
	p.tb.Helper()
	mfs, err := binary.Scrape(p.URL(path))
	if err != nil {
		p.tb.Fatal(err)
	}
	return mfs
}

// Metric returns the sum of the samples of the metric family name whose
// labels include labels (nil matches every series), and whether there was
// at least one; see binary.Value.
func (p *Proc) Metric(name string, labels map[string]string) (float64, bool) {
	p.tb.Helper()
	return binary.Value(p.Scrape(), name, labels)
}

// MustMetric is Metric that fails the test if no series matches.
func (p *Proc) MustMetric(name string, labels map[string]string) float64 {
	p.tb.Helper()
	v, ok := p.Metric(name, labels)
	if !ok {
		p.tb.Fatalf("no metric %s%v", name, labels)
	}
	return v
}

// Signal sends sig to the process, failing the test if it cannot.
func (p *Proc) Signal(sig os.Signal) {
	p.tb.Helper()
	if err := p.Process.Signal(sig); err != nil {
		p.tb.Fatal(err)
	}
}

// Stop sends SIGTERM and fails the test unless the process exits with code
// 0 within binary.StopTimeout. It returns how long the exit took.
func (p *Proc) Stop() time.Duration {
	p.tb.Helper()
	took, err := p.Process.Stop()
	if err != nil {
		p.tb.Fatal(err)
	}
	return took
}
