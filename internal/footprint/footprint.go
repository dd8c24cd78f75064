// Package footprint gives back to the kernel, once start-up is over, the
// memory that only start-up used.
//
// Start-up touches most of the binary: some 170 packages run an init, each
// in its own part of the code, and the kernel maps every page it faults in
// together with its neighbours (fault-around, 64 KiB). Those pages stay
// mapped, and counted in the process's resident memory, for as long as it
// runs, though an idle sidecar never runs that code again. Start-up also
// allocates: flag parsing, the first hash of every volume, the first
// content check; the Go runtime keeps the freed heap for a while.
//
// Release unmaps the binary's code and read-only data (madvise
// MADV_DONTNEED on its read-only file mappings) and returns the free heap
// (debug.FreeOSMemory). The code pages stay in the page cache, where they
// are shared with every other process running the same file and are the
// first the kernel reclaims; a page the sidecar runs again is mapped again
// by a minor fault, without reading the disk. Writable mappings (the
// binary's data, the heap, stacks) are never touched.
//
// Measuring and logging what was given back runs code too, and each page of
// it faults in with its neighbours: Release therefore unmaps once more after
// its report, by plain system calls on the ranges it found the first time.
package footprint

import "runtime/debug"

// Stats are what Release measured: resident memory (VmRSS) and its
// file-backed part (RssFile) before and after, in bytes, and how many bytes
// of the binary's read-only mappings it unmapped. On systems other than
// Linux only the heap is returned and the figures are zero.
type Stats struct {
	RSSBefore, RSSAfter   uint64
	FileBefore, FileAfter uint64
	Unmapped              uint64
}

// Release returns the free heap to the kernel, unmaps the binary's code
// and read-only data, calls report (if not nil) with what it measured, and
// unmaps those mappings again, so that the pages report and the measuring
// ran are not left mapped. Call it once start-up is over. An error means
// only that some memory could not be released; the process runs on as
// before.
func Release(report func(Stats, error)) {
	var s Stats
	s.RSSBefore, s.FileBefore = resident()
	debug.FreeOSMemory()
	ranges, err := readOnlyRanges()
	if err == nil {
		s.Unmapped, err = unmap(ranges)
	}
	s.RSSAfter, s.FileAfter = resident()
	if report != nil {
		report(s, err)
	}
	_, _ = unmap(ranges) // what report and resident touched; a failure was reported
}

// span is a range of addresses [start, end).
type span struct{ start, end uintptr }
