//go:build linux

package cost

import (
	"bufio"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Tests of the helpers that say where BenchmarkMemory's memory goes, on
// this test binary itself: if a Go release changes what they rely on (the
// function table, the heap's 64 MiB blocks), they fail here rather than
// print a wrong breakdown.

func TestComponent(t *testing.T) {
	for pkg, want := range map[string]string{
		"github.com/hotreload/hotreload/watcher":                    "watcher",
		"github.com/prometheus/client_golang/prometheus":            "github.com/prometheus/client_golang",
		"github.com/prometheus/client_golang/prometheus/collectors": "client_golang collectors",
		"github.com/prometheus/client_golang/prometheus/promhttp":   "client_golang promhttp",
		"github.com/prometheus/exporter-toolkit/web":                "github.com/prometheus/exporter-toolkit",
		"github.com/alecthomas/kingpin/v2":                          "github.com/alecthomas/kingpin",
		"google.golang.org/protobuf/internal/impl":                  "google.golang.org/protobuf",
		"go.yaml.in/yaml/v2":                                        "go.yaml.in/yaml",
		"runtime":                                                   "runtime",
		"internal/runtime/maps":                                     "runtime",
		"net/http":                                                  "net/http",
		"vendor/golang.org/x/net/http2/hpack":                       "net/http",
		"crypto/tls":                                                "crypto",
		"encoding/json":                                             "std encoding",
		"internal/poll":                                             "std internal",
		"":                                                          "(compiler-generated)",
	} {
		if got := component(pkg); got != want {
			t.Errorf("component(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// textOffset returns the offset in the executable file of the code at pc,
// from this process's mappings (which also holds for a PIE).
func textOffset(t *testing.T, exe string, pc uintptr) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(fl[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		off, _ := strconv.ParseUint(fl[2], 16, 64)
		if uint64(pc) >= start && uint64(pc) < end {
			return int64(off + uint64(pc) - start)
		}
	}
	t.Fatalf("no mapping of %s holds %#x", exe, pc)
	return 0
}

func TestImage(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	im := loadImage(t, exe)
	im.path = exe
	// The page of a function of this package is this package's code.
	pg := textOffset(t, exe, reflect.ValueOf(component).Pointer()) / int64(pageSize)
	if im.code[pg]["test/cost"] == 0 {
		t.Errorf("the page of component() holds %v, want some of test/cost", im.code[pg])
	}
	if s := im.sectionOf(pg * int64(pageSize)); s != ".text" {
		t.Errorf("the page of component() is in %s, want .text", s)
	}
	// This test runs: the pages of its code are mapped.
	m := mappedPages(t, os.Getpid(), im)
	if !m.file[pg] {
		t.Errorf("the page of component(), which the test just called, is not mapped")
	}
	secs := fmt.Sprint(im.bySection(m.file))
	if !strings.Contains(secs, ".text") || !strings.Contains(secs, ".gopclntab") {
		t.Errorf("mapped pages by section %s: want .text and .gopclntab among them", secs)
	}
}

var keep []byte

func TestAnonymous(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keep = make([]byte, 4<<20) // 4 MiB of heap, written
	for i := range keep {
		keep[i] = 1
	}
	a := anonymous(t, os.Getpid(), exe)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if a.heap < 4<<10 || (!raceEnabled && a.heap > float64(ms.HeapSys+ms.StackSys)/1024) {
		t.Errorf("Go heap arenas %.0f KiB resident: want at least the 4 MiB just written, at most the %d KiB the runtime holds for heap and stacks", a.heap, (ms.HeapSys+ms.StackSys)>>10)
	}
	if a.data == 0 {
		t.Errorf("no resident data or bss of the binary: %+v", a)
	}
	keep = nil
}
