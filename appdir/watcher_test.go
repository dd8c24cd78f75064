package appdir

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotreload/hotreload/internal/revision"
	"github.com/hotreload/hotreload/watcher"
)

// TestWatcherSeesOneChangePerWrite points hotreload's own watcher at an
// app's directory, as at a kubelet volume: every write and every restore
// is exactly one Change, to the content written in full (never a state
// half-way, which would be a Change of another hash), and a commit, which
// removes a version no one reads, is none.
func TestWatcherSeesOneChangePerWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app")
	d := open(t, dir)
	write(t, d, "0", watchPayload(0))

	w, err := watcher.New(nil, prometheus.NewRegistry(), watcher.Options{Dirs: []string{dir}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	initial, err := w.Initial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := initial[dir], appHash(t, watchPayload(0)); got != want {
		t.Fatalf("initial hash %x, want %x", got, want)
	}

	// expect reads the next Change: it must be content in full.
	expect := func(step string, want []revision.File) {
		t.Helper()
		select {
		case c := <-w.Changes():
			if h := appHash(t, want); c.Hash != h {
				t.Fatalf("%s: Change to %x, want %x (the content written)", step, c.Hash, h)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no Change within 10s", step)
		}
	}

	rnd := rand.New(rand.NewPCG(1, 2))
	running := watchPayload(0)
	var good []revision.File // what Restore would put back
	writes, restores, commits := 0, 0, 0
	for i := 1; i <= 60; i++ {
		switch op := rnd.IntN(4); {
		case op == 0 && good != nil:
			if _, err := d.Restore(); err != nil {
				t.Fatal(err)
			}
			restores++
			running, good = good, nil
			expect(fmt.Sprintf("restore %d", i), running)
		case op == 1:
			if err := d.Commit(); err != nil {
				t.Fatal(err)
			}
			commits++
			good = nil
		default:
			p := watchPayload(i)
			write(t, d, strconv.Itoa(i), p)
			writes++
			if good == nil {
				good = running
			}
			running = p
			expect(fmt.Sprintf("write %d", i), running)
		}
	}
	// A last write: had a commit or anything before made a Change, this
	// reads it instead and fails.
	write(t, d, "last", watchPayload(1000))
	expect("last write", watchPayload(1000))
	t.Logf("%d writes, %d restores, %d commits", writes, restores, commits)
	if restores == 0 || commits == 0 {
		t.Fatal("the sequence has no restore or no commit")
	}
}

// watchPayload is version i: keys that come and go, a nested directory
// that comes and goes, and a key whose content changes.
func watchPayload(i int) []revision.File {
	fs := files("always", strconv.Itoa(i), "k"+strconv.Itoa(i%3), "x")
	if i%2 == 0 {
		fs = append(fs, files("conf.d/sub/n.conf", strconv.Itoa(i))...)
	}
	return fs
}

// appHash is the watcher's hash of a directory holding files.
func appHash(t *testing.T, fs []revision.File) [32]byte {
	t.Helper()
	dir := t.TempDir()
	for _, f := range fs {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := watcher.HashDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
