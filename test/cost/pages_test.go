//go:build linux

package cost

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// image is what the benchmark knows of one copy of a sidecar's binary: its
// sections, and whose code each page of its text holds. Go keeps its
// function table (.gopclntab) in stripped binaries, so the release build
// can be read as it ships.
type image struct {
	path     string
	pages    int          // file pages
	sections []section    // in file order
	code     []pageShares // by file page: the packages whose code it holds
}

type section struct {
	name      string
	off, size int64 // in the file
}

// pageShares maps a package (or module) to its share of one page of code.
type pageShares map[string]float64

func loadImage(tb testing.TB, path string) *image {
	tb.Helper()
	f, err := elf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	im := &image{path: path, pages: int((fi.Size() + int64(pageSize) - 1) / int64(pageSize))}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOBITS && s.Size > 0 && s.Offset > 0 {
			im.sections = append(im.sections, section{s.Name, int64(s.Offset), int64(s.Size)})
		}
	}
	text, pcln := f.Section(".text"), f.Section(".gopclntab")
	if text == nil || pcln == nil {
		tb.Fatalf("%s: no .text or .gopclntab section", path)
	}
	data, err := pcln.Data()
	if err != nil {
		tb.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		tb.Fatalf("%s: read the function table: %v", path, err)
	}
	im.code = make([]pageShares, im.pages)
	for _, fn := range tab.Funcs {
		if fn.End <= fn.Entry || fn.Entry < text.Addr {
			continue
		}
		owner := component(fn.PackageName())
		start := int64(text.Offset + (fn.Entry - text.Addr))
		end := start + int64(fn.End-fn.Entry)
		for off := start; off < end; {
			pg := off / int64(pageSize)
			next := min(end, (pg+1)*int64(pageSize))
			if pg < int64(im.pages) {
				if im.code[pg] == nil {
					im.code[pg] = pageShares{}
				}
				im.code[pg][owner] += float64(next - off)
			}
			off = next
		}
	}
	for _, sh := range im.code { // each page split in full among its owners
		var sum float64
		for _, b := range sh {
			sum += b
		}
		for k := range sh {
			sh[k] /= sum
		}
	}
	return im
}

// component names the part of a program a package belongs to, as the
// breakdown prints it: the module for other people's modules, hotreload's
// own packages one by one, and the standard library by area.
func component(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	switch {
	case pkg == "":
		return "(compiler-generated)"
	case strings.HasPrefix(pkg, "github.com/hotreload/hotreload/"):
		return strings.TrimPrefix(pkg, "github.com/hotreload/hotreload/")
	case strings.HasPrefix(pkg, "github.com/prometheus/client_golang/prometheus/collectors"),
		strings.HasPrefix(pkg, "github.com/prometheus/client_golang/prometheus/internal"):
		return "client_golang collectors"
	case strings.HasPrefix(pkg, "github.com/prometheus/client_golang/prometheus/promhttp"):
		return "client_golang promhttp"
	case strings.Contains(first, "."): // another module: name it by its path up to the repository
		parts := strings.SplitN(pkg, "/", 4)
		if len(parts) >= 3 && (first == "github.com" || first == "golang.org" || first == "gopkg.in") {
			return strings.Join(parts[:3], "/")
		}
		return strings.Join(parts[:min(2, len(parts))], "/")
	case pkg == "runtime" || strings.HasPrefix(pkg, "runtime/") || strings.HasPrefix(pkg, "internal/runtime/"):
		return "runtime"
	case strings.HasPrefix(pkg, "net/http") || strings.HasPrefix(pkg, "vendor/golang.org/x/net/") || pkg == "net/textproto" || pkg == "mime" || strings.HasPrefix(pkg, "mime/"):
		return "net/http"
	case strings.HasPrefix(pkg, "crypto") || strings.HasPrefix(pkg, "vendor/golang.org/x/crypto/") || strings.HasPrefix(pkg, "encoding/asn1"):
		return "crypto"
	case first == "internal" || first == "vendor":
		return "std internal"
	default:
		return "std " + first
	}
}

// sectionOf names the section that holds the file offset off.
func (im *image) sectionOf(off int64) string {
	for _, s := range im.sections {
		if off >= s.off && off < s.off+s.size {
			return s.name
		}
	}
	return "(headers, padding)"
}

// mapped is what a process has mapped of its binary, read from its page
// tables (/proc/PID/pagemap): by file page, whether the page is mapped from
// the file (shared with the page cache); and how many of the binary's
// writable pages it has written (copied, anonymous).
type mapped struct {
	file    []bool
	written int
}

// mappedPages reads which pages of the binary at path the process pid has
// mapped.
func mappedPages(tb testing.TB, pid int, im *image) mapped {
	tb.Helper()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer maps.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer pm.Close()
	out := mapped{file: make([]bool, im.pages)}
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != im.path {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			tb.Fatalf("/proc/%d/maps: %q", pid, sc.Text())
		}
		n := int((end - start) / uint64(pageSize))
		buf := make([]byte, 8*n)
		if _, err := pm.ReadAt(buf, int64(start/uint64(pageSize))*8); err != nil {
			tb.Fatalf("/proc/%d/pagemap: %v", pid, err)
		}
		for i := range n {
			e := binary.LittleEndian.Uint64(buf[8*i:])
			if e&(1<<63) == 0 { // not present
				continue
			}
			if e&(1<<61) == 0 { // an anonymous copy of a written page
				out.written++
				continue
			}
			if pg := int(off/uint64(pageSize)) + i; pg < im.pages {
				out.file[pg] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// bySection sums the pages set in pages by the section that holds them, in
// KiB, in the order of the file.
func (im *image) bySection(pages []bool) []kv {
	sums := map[string]float64{}
	var order []string
	for pg, in := range pages {
		if !in {
			continue
		}
		name := im.sectionOf(int64(pg) * int64(pageSize))
		if _, ok := sums[name]; !ok {
			order = append(order, name)
		}
		sums[name] += float64(pageSize) / 1024
	}
	out := make([]kv, 0, len(order))
	for _, name := range order {
		out = append(out, kv{name, sums[name]})
	}
	return out
}

// byComponent splits the code pages set in pages among the components whose
// code they hold, in KiB, largest first.
func (im *image) byComponent(pages []bool) []kv {
	sums := map[string]float64{}
	for pg, in := range pages {
		if in && im.code[pg] != nil {
			for c, share := range im.code[pg] {
				sums[c] += share * float64(pageSize) / 1024
			}
		}
	}
	out := make([]kv, 0, len(sums))
	for c, v := range sums {
		out = append(out, kv{c, v})
	}
	slices.SortFunc(out, func(a, b kv) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		return strings.Compare(a.k, b.k)
	})
	return out
}

type kv struct {
	k string
	v float64
}

// format prints kvs as "name 12, other 3" (KiB, no decimals), the first n
// of them and the rest summed as "others".
func format(kvs []kv, n int) string {
	var parts []string
	var rest float64
	for i, e := range kvs {
		if n > 0 && i >= n {
			rest += e.v
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", e.k, e.v))
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("others %.0f", rest))
	}
	return strings.Join(parts, ", ")
}

// diff returns the pages set in after but not in before.
func diff(before, after []bool) []bool {
	out := make([]bool, len(after))
	for i := range after {
		out[i] = after[i] && (i >= len(before) || !before[i])
	}
	return out
}

// anonParts splits a process's anonymous resident memory (the Anonymous
// lines of /proc/PID/smaps), in KiB, into the Go heap arenas (heap objects
// and goroutine stacks: the runtime reserves them in 64 MiB-aligned
// blocks), the binary's data (written copies of .data and .noptrdata, and
// the .bss mapped after them), and the rest: the runtime's structures
// outside the heap (spans, page summaries, GC work buffers, profiling
// buckets) and the main thread's stack.
type anonParts struct{ heap, data, other float64 }

func anonymous(tb testing.TB, pid int, bin string) anonParts {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		tb.Fatal(err)
	}
	type region struct {
		start, end uint64
		anon       float64
		isBin      bool
	}
	var regions []*region // contiguous anonymous mappings, and the binary's mappings
	var cur *region
	const arena = 64 << 20
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			lo, hi, _ := strings.Cut(f[0], "-")
			start, _ := strconv.ParseUint(lo, 16, 64)
			end, _ := strconv.ParseUint(hi, 16, 64)
			path := ""
			if len(f) >= 6 {
				path = f[5]
			}
			switch {
			case path == bin:
				cur = &region{start: start, end: end, isBin: true}
				regions = append(regions, cur)
			case path == "" && cur != nil && !cur.isBin && cur.end == start:
				cur.end = end // the same block goes on
			default:
				cur = &region{start: start, end: end}
				regions = append(regions, cur)
			}
			continue
		}
		if len(f) == 3 && f[0] == "Anonymous:" && cur != nil {
			n, _ := strconv.ParseFloat(f[1], 64)
			cur.anon += n
		}
	}
	var p anonParts
	for i, r := range regions {
		switch {
		case r.isBin, i > 0 && regions[i-1].isBin && regions[i-1].end == r.start:
			p.data += r.anon
		case r.start%arena == 0 && r.end%arena == 0:
			p.heap += r.anon
		default:
			p.other += r.anon
		}
	}
	return p
}
