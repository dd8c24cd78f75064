package appdir

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/internal/revision"
)

// envWriter makes the test binary a writer that never stops (crashWriter)
// instead of running tests; its value is the directory to write.
const envWriter = "APPDIR_TEST_WRITER"

// crashPayload is the content of version i: a key every version has, two
// of four keys that come and go, and a nested file of varying size, so
// that writes take a while and change the visible links.
func crashPayload(i int) []revision.File {
	fs := files("a", "a"+strconv.Itoa(i),
		"k"+strconv.Itoa(i%4), strconv.Itoa(i),
		"k"+strconv.Itoa((i+1)%4), strconv.Itoa(i),
		"nested/deep/x", strings.Repeat(strconv.Itoa(i%10), (i*7919)%(64<<10)))
	return fs
}

// crashWriter writes versions of crashPayload into dir for ever, with
// commits and restores between them.
func crashWriter(dir string) int {
	d, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	start := 0
	if v, ok := d.Current(); ok {
		start, _ = strconv.Atoi(v.Label)
		start++
	}
	for i := start; ; i++ {
		if err := d.Write(crashPayload(i), strconv.Itoa(i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		switch i % 5 {
		case 1:
			err = d.Commit()
		case 3:
			_, err = d.Restore()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
}

// TestKilledMidWrite kills a writer at random moments. Each time, before
// anything repairs it, ..data and ..last_good name versions written in
// full (an app reading through ..data reads one version, never a part of
// one); and Open, as the next start does, leaves the current version alone
// with exactly its links, and writes go on.
func TestKilledMidWrite(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "app")
	repaired := 0
	for round := range 40 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envWriter+"="+dir)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(5+rand.IntN(30)) * time.Millisecond) // a random moment, not a wait for an event
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: the writer ended by itself: %v", round, err)
		}

		for _, link := range []string{dataLink, goodLink} {
			target, err := os.Readlink(filepath.Join(dir, link))
			if err != nil {
				continue // none yet
			}
			checkVersion(t, round, filepath.Join(dir, target), link)
		}
		d, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: Open: %v", round, err)
		}
		if len(d.Cleaned()) > 0 {
			repaired++
		}
		cur, ok := d.Current()
		if !ok {
			continue // killed before the first swap
		}
		want, err := d.tops(cur.Name)
		if err != nil {
			t.Fatal(err)
		}
		var visible, versions []string
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			switch name := e.Name(); {
			case isVersionName(name):
				versions = append(versions, name)
			case name == dataTmp || name == goodTmp:
				t.Errorf("round %d: %s left after Open", round, name)
			case !hidden(name):
				visible = append(visible, name)
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Errorf("round %d: visible %s: %v", round, name, err)
				}
			}
		}
		if !slices.Equal(visible, want) {
			t.Errorf("round %d: visible entries %v after Open, want those of %s: %v", round, visible, cur.Label, want)
		}
		good, hasGood := d.LastGood()
		if len(versions) != 1+btoi(hasGood) || !slices.Contains(versions, cur.Name) || hasGood && !slices.Contains(versions, good.Name) {
			t.Errorf("round %d: versions %v after Open, want %s and last good %s", round, versions, cur.Name, good.Name)
		}
	}
	t.Logf("%d of 40 kills left something for Open to repair", repaired)
	if repaired == 0 {
		t.Error("no kill landed in a write: the test proves nothing")
	}
}

// checkVersion checks that the version directory at p, named by link, is
// complete: its label names a version and its files are that version's.
func checkVersion(t *testing.T, round int, p, link string) {
	t.Helper()
	label, err := os.ReadFile(filepath.Join(p, labelFile))
	if err != nil {
		t.Fatalf("round %d: %s names %s, without a label: %v", round, link, filepath.Base(p), err)
	}
	i, err := strconv.Atoi(string(label))
	if err != nil {
		t.Fatalf("round %d: %s: label %q", round, link, label)
	}
	v, err := revision.ReadVolume(p)
	if err != nil {
		t.Fatalf("round %d: read %s: %v", round, link, err)
	}
	if v.Sum() != revision.Sum(crashPayload(i)) {
		t.Fatalf("round %d: %s names version %d, whose files are not all there", round, link, i)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
