package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
)

// BenchmarkIdle reports the size of the controller's binary, built as
// make build-controller builds it, and its memory when idle: started with
// --no-leader-elect against fakeAPI (an empty cluster), ready, then idle
// for 5 s. HOTRELOAD_CONTROLLER_BIN measures a binary built elsewhere, such
// as from an earlier commit, with the same harness.
func BenchmarkIdle(b *testing.B) {
	bin := os.Getenv("HOTRELOAD_CONTROLLER_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "hotreload-controller")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", binary.LDFlags("bench", ""), "-o", bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
	}
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	api := newFakeAPI(b, http.StatusOK)
	kc := kubeconfig(b, api.URL, "t0ken")
	const mib = 1 << 20
	for range b.N {
		p, err := binary.Start(bin, binary.Options{}, "--kubeconfig", kc, "--no-leader-elect")
		if err != nil {
			b.Fatal(err)
		}
		if !poll.Until(30*time.Second, func() bool { return p.Status("/-/ready") == http.StatusOK }) {
			p.Kill()
			b.Fatalf("not ready after 30s:\n%s", p.Logs())
		}
		time.Sleep(5 * time.Second)
		m, err := memoryOf(p.Pid())
		if _, serr := p.Stop(); err == nil {
			err = serr
		}
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.Size())/1e6, "MB-binary")
		b.ReportMetric(float64(m.RSS)/mib, "MiB-rss")
		b.ReportMetric(float64(m.Anon)/mib, "MiB-anon")
		b.ReportMetric(float64(m.File)/mib, "MiB-file")
	}
}

// rss is a process's resident memory from /proc/<pid>/status: the issue
// asks the controller's binary size and RSS before and after typed clients.
// The sidecar's memory figures are cgroup working sets (test/cost).
type rss struct{ RSS, Anon, File int64 }

func memoryOf(pid int) (rss, error) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return rss{}, err
	}
	s, err := proc.NewStatus()
	if err != nil {
		return rss{}, err
	}
	return rss{RSS: int64(s.VmRSS), Anon: int64(s.RssAnon), File: int64(s.RssFile)}, nil
}
