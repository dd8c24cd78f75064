package footprint

import (
	"fmt"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// readOnlyRanges returns the mappings of the running executable that
// cannot be written (code, read-only data).
func readOnlyRanges() ([]span, error) {
	self, err := procfs.Self()
	if err != nil {
		return nil, fmt.Errorf("find this process in /proc: %w", err)
	}
	exe, err := self.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the executable: %w", err)
	}
	maps, err := self.ProcMaps()
	if err != nil {
		return nil, fmt.Errorf("read the mappings: %w", err)
	}
	var out []span
	for _, m := range readOnly(maps, exe) {
		out = append(out, span{m.StartAddr, m.EndAddr})
	}
	return out, nil
}

// unmap applies MADV_DONTNEED to ranges and returns how many bytes they
// span.
func unmap(ranges []span) (uint64, error) {
	var total uint64
	for _, r := range ranges {
		// A raw system call: unix.Madvise wants the range as a []byte,
		// which Go code may not make from an address it did not allocate.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_DONTNEED); errno != 0 {
			return total, fmt.Errorf("madvise %x-%x: %w", r.start, r.end, errno)
		}
		total += uint64(r.end - r.start)
	}
	return total, nil
}

// readOnly returns the mappings of the file path that are private and
// not writable.
func readOnly(maps []*procfs.ProcMap, path string) []*procfs.ProcMap {
	var out []*procfs.ProcMap
	for _, m := range maps {
		if m.Pathname == path && m.Perms.Private && !m.Perms.Write && m.EndAddr > m.StartAddr {
			out = append(out, m)
		}
	}
	return out
}

// resident returns VmRSS and RssFile of this process in bytes (zero if
// they cannot be read).
func resident() (rss, file uint64) {
	self, err := procfs.Self()
	if err != nil {
		return 0, 0
	}
	s, err := self.NewStatus()
	if err != nil {
		return 0, 0
	}
	return s.VmRSS, s.RssFile
}
