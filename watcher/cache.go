package watcher

import "time"

// racyWindow is how old a file's last change must be, when a hash starts,
// for its digest to be remembered. File times come from a clock that ticks
// coarsely (1–10 ms) and a write sets them when it starts: a file changed
// within the window could change again, at the same size and times, after it
// was read (git's "racily clean" problem), so it is read again next time.
const racyWindow = time.Second

// fileStamp is what a stat shows of a regular file: enough to tell, without
// reading it, that its content cannot have changed since a digest was taken.
// Any write changes the modification and change times (a rename-over gives a
// new inode, a chmod or chown the change time).
type fileStamp struct {
	dev, ino           uint64
	size, mtime, ctime int64 // times in nanoseconds since the epoch
	ok                 bool  // the system gave inode numbers and times
}

// digestKey is a file's identity in the cache.
type digestKey struct{ dev, ino uint64 }

// digestEntry is a remembered digest, valid while the file's stamp is the
// same.
type digestEntry struct {
	stamp fileStamp
	sum   [32]byte
}

// digestCache remembers the digests of the files of one volume, so that a
// re-hash reads only the files whose stamp changed. It belongs to the
// volume's goroutine. A kubelet update writes every file anew (new inodes
// in a new version directory), so it helps there only between the updates
// of one version; it saves most of the reading for a plain directory, where
// one edit changes one file.
type digestCache struct {
	old, next map[digestKey]digestEntry
}

// lookup returns the remembered digest of a file whose stamp is st.
func (c *digestCache) lookup(st fileStamp) ([32]byte, bool) {
	if c == nil || !st.ok {
		return [32]byte{}, false
	}
	e, ok := c.old[digestKey{st.dev, st.ino}]
	if !ok || e.stamp != st {
		return [32]byte{}, false
	}
	c.keep(st, e.sum)
	return e.sum, true
}

// keep remembers sum for the file whose stamp is st, for the next hash.
func (c *digestCache) keep(st fileStamp, sum [32]byte) {
	if c == nil || !st.ok {
		return
	}
	if c.next == nil {
		c.next = make(map[digestKey]digestEntry, len(c.old)) // grown once, not 10,000 times
	}
	c.next[digestKey{st.dev, st.ino}] = digestEntry{stamp: st, sum: sum}
}

// settled reports whether a file whose stamp is st was last changed long
// enough (racy; 0 means racyWindow) before start for its digest to be
// remembered.
func settled(st fileStamp, start time.Time, racy time.Duration) bool {
	if racy == 0 {
		racy = racyWindow
	}
	limit := start.Add(-racy).UnixNano()
	return st.ok && st.mtime < limit && st.ctime < limit
}

// commit makes what the last hash kept the cache of the next one; files
// that were not seen again are forgotten.
func (c *digestCache) commit() {
	if c == nil {
		return
	}
	c.old, c.next = c.next, nil
}

// drop forgets what the last hash kept (it was not complete).
func (c *digestCache) drop() {
	if c != nil {
		c.next = nil
	}
}
