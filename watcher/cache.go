package watcher

import "time"

// What a hash saw, kept for the next one: a fast path, reached through
// seen's methods alone (the walk calls stamp, reuse, keep and done; the
// resync and the poll call unchanged). Without it every walk reads every
// file, and the resync walks and reads every volume. With it:
//
//   - a walk reads only the files whose stat changed: BenchmarkChangeCPU's
//     plain-with-symlink/files=10000 in test/cost (a walk of 10,000 files,
//     one rewritten), and BenchmarkTreeUpdate's walk here;
//   - the resync and the poll stat what the last hash listed and read, and
//     walk only a volume whose stats differ; the version directory that
//     ..data names is vouched for by the root's stat, so the resync of a
//     kubelet volume stats its root, not its files: BenchmarkIdleResync in
//     test/cost.
//
// A kubelet update writes every file anew (new inodes in a new version
// directory), so it is read in full whatever this remembers.

// racyWindow is how old a change must be, when a hash starts, for its stat
// to vouch for it. File times come from a clock that ticks coarsely (1–10
// ms) and a write sets them when it starts: a file changed within the
// window could change again, at the same size and times, after it was read
// (git's "racily clean" problem), so it is read again next time, and the
// volume is walked at the next resync.
const racyWindow = time.Second

// fileStamp is what a stat shows of a file or directory: enough to tell,
// without reading it, that it has not changed. Any write changes the
// modification and change times, a rename-over gives a new inode, a chmod
// or chown the change time; an entry added to or removed from a directory
// changes the directory's times.
type fileStamp struct {
	dev, ino           uint64
	size, mtime, ctime int64 // times in nanoseconds since the epoch
	ok                 bool  // the system gave inode numbers and times
}

// settled reports whether st last changed long enough (racy) before start
// to vouch for its content.
func (st fileStamp) settled(start time.Time, racy time.Duration) bool {
	limit := start.Add(-racy).UnixNano()
	return st.ok && st.mtime < limit && st.ctime < limit
}

// fileKey is a file's identity in the digest cache: a rename or a new path
// to it finds its digest, a new inode does not.
type fileKey struct{ dev, ino uint64 }

type digestEntry struct {
	stamp fileStamp
	sum   [32]byte
}

type stamped struct {
	path  string
	stamp fileStamp
}

// seen is what one hash of a volume saw: the digest of every file it read,
// by inode, with the file's stamp (the next hash reads only the files
// whose stamp changed), and the stamps that vouch for the whole volume
// (the resync's check): the root as given, every directory listed and
// every file read, except inside the version directory that ..data names.
// The kubelet never changes a published version (the volume is read-only
// in every container); it writes a new one and swaps ..data, which changes
// the root's stamp. Someone on the node who edits a published version is
// undone by the kubelet's next sync, which finds the files differ from the
// payload and writes a new version. seen is not changed once the hash is
// done: the next hash reads it while it makes its own, and the resync
// reads it from another goroutine.
type seen struct {
	files  map[fileKey]digestEntry
	stamps []stamped
	// whole says that the stamps vouch for everything the app sees: each
	// is settled, no symlink but the kubelet's own was followed (a symlink
	// can show something else while no stat here changes), nothing was
	// left out (an unreadable entry, a dangling link), and the volume was
	// not half-way through an update.
	whole bool

	start time.Time     // when the hash started
	racy  time.Duration // racyWindow; tests shorten it
}

// newSeen starts what a hash that starts now sees, expecting about files
// files; racy is its racyWindow (0: racyWindow). A walk sizes the map for
// the last hash's files: growing it is a measurable part of a walk of
// 10,000 files (BenchmarkTreeUpdate's walk). The plain tree's update
// expects none: it keeps only the files it reads again.
func newSeen(files int, racy time.Duration) *seen {
	if racy == 0 {
		racy = racyWindow
	}
	return &seen{files: make(map[fileKey]digestEntry, files), whole: true, start: time.Now(), racy: racy}
}

// size is the number of files s remembers.
func (s *seen) size() int {
	if s == nil {
		return 0
	}
	return len(s.files)
}

// stamp records the stamp st of a directory listed or a file read at path.
func (s *seen) stamp(path string, st fileStamp) {
	s.stamps = append(s.stamps, stamped{path, st})
	if !st.settled(s.start, s.racy) {
		s.whole = false
	}
}

// reuse returns the digest that last holds for the file whose stamp is st,
// and keeps it, if last read it with that stamp.
func (s *seen) reuse(last *seen, st fileStamp) ([32]byte, bool) {
	if last == nil || !st.ok {
		return [32]byte{}, false
	}
	e, ok := last.files[fileKey{st.dev, st.ino}]
	if !ok || e.stamp != st {
		return [32]byte{}, false
	}
	s.files[fileKey{st.dev, st.ino}] = e
	return e.sum, true
}

// keep remembers the digest sum of the file just read (size bytes), whose
// stamp before the read was st, and reports whether the stamp vouches for
// it: it changed well before the hash started, and its size is what was
// read. If not, the next hash reads the file again.
func (s *seen) keep(st fileStamp, size int64, sum [32]byte) bool {
	if st.size != size || !st.settled(s.start, s.racy) {
		s.whole = false
		return false
	}
	s.files[fileKey{st.dev, st.ino}] = digestEntry{st, sum}
	return true
}

// done ends the hash: whole says that nothing the stamps cannot vouch for
// was met.
func (s *seen) done(whole bool) *seen {
	s.whole = s.whole && whole
	return s
}

// unchanged reports whether every stamp is as it was, so that the volume
// shows what it showed to the hash that made s.
func (s *seen) unchanged() bool {
	if s == nil || !s.whole {
		return false
	}
	for _, s := range s.stamps {
		if st, err := statStamp(s.path); err != nil || st != s.stamp {
			return false
		}
	}
	return true
}

// setSeen publishes what the last hash of v saw, for the resync.
func (w *Watcher) setSeen(v *volume, s *seen, watchNeed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v.seen = s
	if watchNeed > 0 {
		v.watchNeed = watchNeed
	}
}
