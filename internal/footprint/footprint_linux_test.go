package footprint

import (
	"os"
	"slices"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	maps := []byte(`00400000-0094d000 r-xp 00000000 fd:01 1234 /usr/bin/hotreload
0094d000-00eef000 r--p 0054d000 fd:01 1234 /usr/bin/hotreload
00ef1000-00f86000 rw-p 00af1000 fd:01 1234 /usr/bin/hotreload
00f86000-00fab000 rw-p 00000000 00:00 0
01000000-01001000 r--s 00000000 fd:01 1234 /usr/bin/hotreload
7f0000000000-7f0000001000 r-xp 00000000 fd:01 99 /usr/bin/hotreload-other
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0 [vdso]
`)
	got := readOnlyMappings(maps, "/usr/bin/hotreload")
	want := []mapping{{0x400000, 0x94d000}, {0x94d000, 0xeef000}}
	if !slices.Equal(got, want) {
		t.Errorf("readOnlyMappings = %x, want %x (code and read-only data of that file only: not its data, not a shared mapping, not another file)", got, want)
	}
}

// written lives in the binary's writable data: Release must leave it as
// the program last set it (MADV_DONTNEED on it would bring back the value
// in the file).
var written = [4]int{1, 2, 3, 4}

func TestRelease(t *testing.T) {
	written[2] = 42
	s, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if s.Unmapped == 0 {
		t.Fatalf("Release unmapped nothing: %+v", s)
	}
	if s.FileBefore == 0 || s.FileAfter >= s.FileBefore {
		t.Errorf("the file-backed resident memory did not shrink: %d -> %d bytes", s.FileBefore, s.FileAfter)
	}
	if written != [4]int{1, 2, 42, 4} {
		t.Errorf("writable data changed by Release: %v", written)
	}
	// The code runs on: the test binary's pages are mapped back as needed.
	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		t.Fatal(err)
	}
}
