package footprint

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestReadOnly(t *testing.T) {
	const exe = "/usr/bin/hotreload"
	mapping := func(start, end uintptr, perms string, path string) *procfs.ProcMap {
		return &procfs.ProcMap{StartAddr: start, EndAddr: end, Pathname: path, Perms: &procfs.ProcMapPermissions{
			Read: perms[0] == 'r', Write: perms[1] == 'w', Execute: perms[2] == 'x', Shared: perms[3] == 's', Private: perms[3] == 'p',
		}}
	}
	code := mapping(0x400000, 0x94d000, "r-xp", exe)
	rodata := mapping(0x94d000, 0xeef000, "r--p", exe)
	maps := []*procfs.ProcMap{
		code, rodata,
		mapping(0xef1000, 0xf86000, "rw-p", exe), // its data
		mapping(0xf86000, 0xfab000, "rw-p", ""),
		mapping(0x1000000, 0x1001000, "r--s", exe),                    // shared
		mapping(0x7f0000000000, 0x7f0000001000, "r-xp", exe+"-other"), // another file
		mapping(0x7ffd00000000, 0x7ffd00021000, "rw-p", "[stack]"),
		mapping(0x7ffd00100000, 0x7ffd00102000, "r-xp", "[vdso]"),
	}
	if got, want := readOnly(maps, exe), []*procfs.ProcMap{code, rodata}; !slices.Equal(got, want) {
		t.Errorf("readOnly = %v, want %v (code and read-only data of that file only: not its data, not a shared mapping, not another file)", got, want)
	}
}

// written lives in the binary's writable data: Release must leave it as
// the program last set it (MADV_DONTNEED on it would bring back the value
// in the file).
var written = [4]int{1, 2, 3, 4}

func TestRelease(t *testing.T) {
	written[2] = 42
	var (
		s         Stats
		err       error
		inReport  uint64 // file-backed resident memory once report ran its code
		reportRan bool
	)
	Release(func(st Stats, e error) {
		s, err, reportRan = st, e, true
		// Code that nothing ran before: its pages fault in now.
		var b bytes.Buffer
		if e := json.NewEncoder(&b).Encode(map[string]any{"s": st, "t": time.Now(), "u": url.URL{Scheme: "http", Host: "x"}}); e != nil {
			t.Error(e)
		}
		_, inReport = resident()
	})
	_, final := resident()
	if !reportRan {
		t.Fatal("Release did not call report")
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Unmapped == 0 {
		t.Fatalf("Release unmapped nothing: %+v", s)
	}
	if s.FileBefore == 0 || s.FileAfter >= s.FileBefore {
		t.Errorf("the file-backed resident memory did not shrink: %d -> %d bytes", s.FileBefore, s.FileAfter)
	}
	// What report ran was unmapped again: only the measuring is back.
	if final >= inReport {
		t.Errorf("file-backed resident memory %d bytes after Release, %d in its report: the pages report ran were left mapped", final, inReport)
	}
	if written != [4]int{1, 2, 42, 4} {
		t.Errorf("writable data changed by Release: %v", written)
	}
	// The code runs on: the test binary's pages are mapped back as needed.
	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		t.Fatal(err)
	}
}
