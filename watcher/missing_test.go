package watcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMissingVolume checks a directory of Options.Dirs that is not there (a
// typo in the mount path): within the grace period it is waited for quietly
// and the watcher is ready; after it, a warning says so at a bounded rate,
// hotreload_volume_missing names it and Ready fails with its path, until it
// appears. A directory declared optional is only waited for.
func TestMissingVolume(t *testing.T) {
	base := t.TempDir()
	typo, optional := filepath.Join(base, "confg"), filepath.Join(base, "extra")
	const grace, repeat = 300 * time.Millisecond, 400 * time.Millisecond
	h := start(t, Options{Dirs: []string{typo}, OptionalDirs: []string{optional}, PollInterval: 20 * time.Millisecond}, func(w *Watcher) {
		w.grace, w.repeat = grace, repeat
	})
	began := time.Now()
	warnings := func() int { return strings.Count(h.logs.String(), `msg="volume missing for`) }
	missing := func(dir string) float64 { // the series's value, or 0 if there is none
		mfs, err := h.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "hotreload_volume_missing" && m.GetLabel()[0].GetValue() == dir {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	if err := h.w.Ready(); err != nil {
		t.Errorf("Ready within the grace period: %v, want nil", err)
	}
	if warnings() != 0 || missing(typo) != 0 {
		t.Errorf("within the grace period: %d warnings, metric %v; want none", warnings(), missing(typo))
	}

	t.Cleanup(func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	})
	waitFor(t, "the warning", func() bool { return warnings() == 1 })
	if since := time.Since(began); since < grace-50*time.Millisecond {
		t.Errorf("warned %s after start, before the grace period of %s", since, grace)
	}
	err := h.w.Ready()
	if err == nil || !strings.Contains(err.Error(), "volume "+typo+" missing for") || strings.Contains(err.Error(), optional) {
		t.Errorf("Ready = %v, want an error naming %s alone", err, typo)
	}
	if got := missing(typo); got != 1 {
		t.Errorf("hotreload_volume_missing{dir=%q} = %v, want 1", typo, got)
	}
	if got := missing(optional); got != 0 {
		t.Errorf("hotreload_volume_missing{dir=%q} = %v for an optional volume, want 0", optional, got)
	}
	// The poll ticks every 20 ms; the warning comes again after repeat only.
	time.Sleep(repeat + repeat/2)
	if n := warnings(); n != 2 {
		t.Errorf("%d warnings %s after the first, want 2 (one every %s)", n, repeat+repeat/2, repeat)
	}
	if strings.Contains(h.logs.String(), "dir="+optional+" err=") {
		t.Errorf("an optional volume was warned about:\n%s", h.logs)
	}

	writeTree(t, typo, map[string]string{"a.conf": "a"})
	h.eventually(t, typo, mustHash(t, typo))
	waitFor(t, "ready", func() bool { return h.w.Ready() == nil })
	if n, err := testutil.GatherAndCount(h.reg, "hotreload_volume_missing"); err != nil || n != 0 {
		t.Errorf("hotreload_volume_missing has %d series once the volume is there, want none (%v)", n, err)
	}

	// Removed later: the same grace period, from the removal.
	if err := os.RemoveAll(typo); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "not ready", func() bool { return h.w.Ready() != nil })
	if got := missing(typo); got != 1 {
		t.Errorf("hotreload_volume_missing{dir=%q} = %v after the removal, want 1", typo, got)
	}
	writeTree(t, typo, map[string]string{"a.conf": "a"})
	waitFor(t, "ready again", func() bool { return h.w.Ready() == nil })
}
