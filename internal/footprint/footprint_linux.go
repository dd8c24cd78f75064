package footprint

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unmapBinary applies MADV_DONTNEED to every mapping of the running
// executable that cannot be written (code, read-only data) and returns how
// many bytes those mappings span.
func unmapBinary() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("find the executable: %w", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("read the mappings: %w", err)
	}
	var total uint64
	for _, m := range readOnlyMappings(maps, exe) {
		// A raw system call: unix.Madvise wants the range as a []byte,
		// which Go code may not make from an address it did not allocate.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED); errno != 0 {
			return total, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		total += m.end - m.start
	}
	return total, nil
}

type mapping struct{ start, end uint64 }

// readOnlyMappings returns the mappings of the file path in a
// /proc/PID/maps listing that are private and not writable.
func readOnlyMappings(maps []byte, path string) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) != 6 || f[5] != path || len(f[1]) != 4 || f[1][1] == 'w' || f[1][3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{start, end})
	}
	return out
}

// resident returns VmRSS and RssFile of /proc/self/status in bytes (zero if
// it cannot be read).
func resident() (rss, file uint64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss = kb << 10
		case "RssFile":
			file = kb << 10
		}
	}
	return rss, file
}
