package watcher

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxHashAttempts bounds how often a hash is redone because ..data was
// swapped while it was being read.
const maxHashAttempts = 3

var (
	errNotDir       = errors.New("is a file, not a directory")
	errSymlinkLoop  = errors.New("symlink loop")
	errDanglingLink = errors.New("dangling symlink")
	errNotRegular   = errors.New("not a regular file")
)

// emptyHash is the hash of a directory without any regular file. It is the
// last known hash of a volume that was never seen.
var emptyHash = sha256.Sum256(nil)

// Record kinds in the hash stream.
const (
	kindFile       = 'f' // a readable regular file: length and SHA-256 of its bytes
	kindUnreadable = 'u' // a directory that could not be read, or a file that failed otherwise
	kindMeta       = 'm' // a file that could not be read: its size, mtime, inode and device
	kindAlias      = 'a' // a second path to a directory already hashed
)

// HashDir returns the content hash of the directory root: SHA-256 over, for
// every regular file that root's visible entries resolve to, sorted by
// visible relative path, the path (slash separated, relative to root), a NUL,
// a kind byte, the file's length and the SHA-256 of its bytes.
//
// It hashes what an app reading root sees: every visible entry is resolved
// as the app would resolve it, symlinks are followed (to files and to
// directories), and entries whose name starts with ".." are skipped at every
// level, so the kubelet's ..data link and version directories never appear in
// the hash, only what the visible names show. A kubelet volume is therefore
// hashed through its visible links (key -> ..data/key): between the swap of
// ..data and the kubelet's creation of a new key's link, the new key is not
// in the hash, as the app cannot see it yet. The hash is redone if ..data was
// swapped while it was being read. Modes, times and owners of readable files
// are not hashed.
//
// Symlink loops and dangling links are left out. A regular file that cannot
// be read (permission denied) adds its size, modification time, inode and
// device instead of its content, so that its replacement or rewrite still
// changes the hash, and so does it becoming readable. A directory that cannot
// be read adds a marker. A directory reached a second time through another
// symlink adds a marker naming the first path. The error is non-nil only if
// root itself cannot be read.
//
// HashDir does not judge whether root is in a consistent state; the Watcher
// does (see the package documentation).
func HashDir(root string) (sum [32]byte, err error) {
	res, err := hasher{}.hash(root, nil, nil)
	return res.sum, err
}

// hasher computes content hashes. Tests set open to simulate unreadable
// files when running as root, and racy to have digests remembered at once.
type hasher struct {
	open func(name string) (*os.File, error) // nil: openRegular
	racy time.Duration                       // 0: racyWindow
}

// problem is an entry that could not be hashed as it should.
type problem struct {
	path string // visible relative path
	err  error
}

// fileMeta is what can be seen of a file that cannot be read. The change
// time is left out on purpose: the kubelet's fsGroup handling and any chmod
// or chown change it without changing the content. A rotation by the
// kubelet writes a new file (new inode); a rewrite in place changes the
// modification time or the size.
type fileMeta struct {
	size     int64
	mtime    int64 // nanoseconds since the epoch
	dev, ino uint64
}

// hashResult is the outcome of one hash of a directory.
type hashResult struct {
	sum [32]byte

	// version is the target of ..data ("" if root has no ..data link), and
	// versionSum the hash of the records read from inside that version
	// directory: the kubelet never changes a version directory once ..data
	// names it, so a different versionSum under the same version is someone
	// else at work (an rm -rf half-way, a hand edit).
	version    string
	versionSum [32]byte

	// broken says why root is in a state that is never reported ("" if
	// it is not): ..data names no directory, or every visible entry
	// dangles. partial says why root looks half-way through an update ("" if
	// it does not). See the package documentation.
	broken  string
	partial string

	problems   []problem
	unreadable map[string]fileMeta // what can be seen of each unreadable file, by visible path
	watched    int                 // directories passed to watch
	seen       *seen               // for the next hash, and the resync
	tree       *plainTree          // for the next hash, if root is a plain tree (plain.go)
}

// hash hashes root, redoing it if ..data was swapped meanwhile. last, if
// not nil, gives the digests of files whose stamp is unchanged. watch, if
// not nil, is called with each real directory whose entries decide what the
// app sees, before it is listed, so that a change after the listing makes an
// event: the root, and every directory walked outside the version directory
// that ..data names (the kubelet never changes a published version: it
// swaps ..data, in the root).
func (h hasher) hash(root string, last *seen, watch func(dir string)) (hashResult, error) {
	for attempt := 1; ; attempt++ {
		res, real, err := h.hashOnce(root, last, watch)
		if err != nil {
			return hashResult{}, err
		}
		after, _ := os.Readlink(filepath.Join(real, dataLink))
		if after == res.version || attempt == maxHashAttempts {
			return res, nil
		}
	}
}

// record is one visible path that contributes to the hash.
type record struct {
	rel   string // visible relative path, slash separated
	kind  byte
	ref   string    // the file to read (kindFile), or the first path (kindAlias)
	stamp fileStamp // kindFile: what the walk's stat showed
}

// walk holds the state of one hash walk.
type walk struct {
	h       hasher
	last    *seen // the last hash's, whose digests it reuses (cache.go)
	next    *seen // this hash's, for the next one and the resync
	watch   func(dir string)
	watched map[string]bool // directories passed to watch

	dirs     map[string]string // every real directory walked: its visible path
	visited  map[fileID]string // every real directory walked, by its first visible path
	onPath   map[fileID]bool   // real directories between the root and the current one
	records  []record
	problems []problem
	links    bool // a symlink other than the kubelet's own was followed
	kubeletFacts
}

// hashOnce walks root once, and returns the result and root's real path.
func (h hasher) hashOnce(root string, last *seen, watch func(string)) (hashResult, string, error) {
	real, info, err := resolveDir(root)
	if err != nil {
		return hashResult{}, "", fmt.Errorf("hash %s: %w", root, err)
	}
	w := h.newWalk(last, watch, last.size())
	w.watchDir(real)
	w.stamp(root, stampOf(info)) // stat'ed by the resync as given, through any symlink
	id := idOf(real, info)
	w.visited[id], w.onPath[id], w.dirs[real] = ".", true, "."

	res := hashResult{}
	res.version, _ = os.Readlink(filepath.Join(real, dataLink))
	w.versionDir(real, res.version)
	entries, err := os.ReadDir(real)
	if err != nil {
		return hashResult{}, "", fmt.Errorf("hash %s: %w", root, err)
	}
	visible := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if name == dataLink+"_tmp" {
			w.dataTmp = true
		}
		if hidden(name) {
			continue
		}
		visible[name] = true
		p := filepath.Join(real, name)
		switch {
		case e.Type()&fs.ModeSymlink == 0:
			w.visit(name, p)
		case w.visitLink(name, p):
			w.dangling++
		}
	}

	read, unreadable := w.read()
	res.sum, res.versionSum = fold(read)
	res.unreadable = unreadable
	res.broken, res.partial = w.judge(real, visible)
	res.problems = w.problems
	res.watched = len(w.watched)
	res.seen = w.next.done(!w.links && len(w.problems) == 0 && res.partial == "" && res.broken == "")
	res.tree = w.tree(real, read, res)
	return res, real, nil
}

// newWalk starts a walk that expects about files files.
func (h hasher) newWalk(last *seen, watch func(string), files int) *walk {
	return &walk{
		h: h, last: last, next: newSeen(files, h.racy), watch: watch, watched: make(map[string]bool),
		dirs:    make(map[string]string),
		visited: make(map[fileID]string),
		onPath:  make(map[fileID]bool),
	}
}

// watchDir passes dir to watch, once, unless it is inside the published
// version.
func (w *walk) watchDir(dir string) {
	if w.watched[dir] || w.published(dir) {
		return
	}
	w.watched[dir] = true
	if w.watch != nil {
		w.watch(dir)
	}
}

// stamp records the stamp st of a directory listed or a file read, for the
// resync, unless it is inside the published version.
func (w *walk) stamp(path string, st fileStamp) {
	if !w.published(path) {
		w.next.stamp(path, st)
	}
}

// visitLink adds what the visible symlink name (at p) shows, and reports
// whether it dangles. The kubelet's links (..data/key) are resolved
// through the version directory (kubelet.go).
func (w *walk) visitLink(name, p string) (dangles bool) {
	link, err := os.Readlink(p)
	if err != nil {
		w.vanished = true // replaced since the listing: an event follows
		return false
	}
	rest, kubelet := strings.CutPrefix(link, dataLink+"/")
	if kubelet && w.dataDir != "" {
		w.kubeletLink(name, rest)
		return false
	}
	_, err = os.Stat(p)
	if dangles = gone(err); dangles && kubelet { // ..data is gone: a moment of a deletion
		w.vanishedLinkOf(name)
		return true
	}
	w.visit(name, p) // records a dangling link as a problem
	return dangles
}

// visit adds the entry at the real path p, seen at the visible path rel.
func (w *walk) visit(rel, p string) {
	info, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			w.vanished = true // vanished meanwhile: an event follows
		} else {
			w.problem(rel, err)
		}
		return
	}
	w.visitInfo(rel, p, info)
}

// visitInfo adds the entry at the real path p, seen at the visible path rel,
// whose Lstat is info.
func (w *walk) visitInfo(rel, p string, info os.FileInfo) {
	viaLink := info.Mode()&fs.ModeSymlink != 0
	if viaLink {
		w.links = true
		resolved, err := filepath.EvalSymlinks(p)
		if err == nil {
			info, err = os.Stat(resolved)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, lerr := os.Lstat(p); lerr == nil {
				w.problem(rel, fmt.Errorf("%w: %w", errDanglingLink, err))
			} else {
				w.vanished = true
			}
			return
		case err != nil:
			w.problem(rel, err) // "too many links" for a loop of symlinks
			return
		}
		p = resolved
	}
	switch {
	case info.IsDir():
		w.walkDir(rel, p, info)
	case info.Mode().IsRegular():
		if viaLink {
			w.watchDir(filepath.Dir(p)) // before the file is read
		}
		w.records = append(w.records, record{rel: rel, kind: kindFile, ref: p, stamp: stampOf(info)})
	default:
		// Devices, FIFOs and sockets are not content; opening a FIFO
		// would block.
	}
}

// walkDir adds the real directory dir, seen at the visible path rel.
func (w *walk) walkDir(rel, dir string, info os.FileInfo) {
	id := idOf(dir, info)
	if w.onPath[id] {
		w.problem(rel, errSymlinkLoop)
		return
	}
	if first, ok := w.visited[id]; ok {
		w.records = append(w.records, record{rel: rel, kind: kindAlias, ref: first})
		return
	}
	w.visited[id], w.dirs[dir] = rel, rel
	w.onPath[id] = true
	defer delete(w.onPath, id)

	w.watchDir(dir)
	w.stamp(dir, stampOf(info))
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			w.vanished = true
			return
		}
		w.problem(rel, err)
		w.records = append(w.records, record{rel: rel, kind: kindUnreadable})
		return
	}
	w.versionDirListed(rel, dir, entries)
	for _, e := range entries {
		if !hidden(e.Name()) {
			w.visit(rel+"/"+e.Name(), filepath.Join(dir, e.Name()))
		}
	}
}

func (w *walk) problem(rel string, err error) {
	w.problems = append(w.problems, problem{path: rel, err: err})
}

// entry is what one record adds to the hash: its visible path, kind, size
// and digest.
type entry struct {
	rel       string
	kind      byte
	inVersion bool  // read from inside the version directory that ..data names
	n         uint8 // bytes of digest used: 32 for a file's SHA-256, 24 for fileMeta
	size      int64
	digest    [32]byte
	alias     string // kindAlias: the first path, in place of digest
}

// read reads the files of the walk in the order of their visible paths and
// returns its entries, and what was seen of the files that could not be
// read.
func (w *walk) read() (entries []entry, unreadable map[string]fileMeta) {
	slices.SortFunc(w.records, func(a, b record) int { return strings.Compare(a.rel, b.rel) })
	entries = make([]entry, 0, len(w.records))
	d := sha256.New()
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	for _, r := range w.records {
		e := entry{rel: r.rel, kind: r.kind}
		switch r.kind {
		case kindFile:
			var meta fileMeta
			var err error
			if e, meta, err = w.file(r, d, *buf); errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotRegular) {
				w.vanished = true // vanished or replaced meanwhile: an event follows
				continue
			} else if err != nil {
				w.problem(r.rel, err)
			}
			if e.kind == kindMeta {
				if unreadable == nil {
					unreadable = make(map[string]fileMeta)
				}
				unreadable[r.rel] = meta
			}
		case kindAlias:
			e.size, e.alias = int64(len(r.ref)), r.ref
		}
		e.inVersion = w.inVersion(r.ref)
		entries = append(entries, e)
	}
	return entries, unreadable
}

// file returns the entry of the regular file r: its digest, from the last
// hash if its stamp is unchanged, else read; or, if it cannot be read,
// what a stat shows of it (meta, with the error). A file read is kept for the
// next hash if it last changed well before the walk started (see
// racyWindow).
func (w *walk) file(r record, d hash.Hash, buf []byte) (entry, fileMeta, error) {
	e := entry{rel: r.rel, kind: kindFile, n: sha256.Size, size: r.stamp.size}
	if sum, ok := w.next.reuse(w.last, r.stamp); ok {
		e.digest = sum
		w.stamp(r.ref, r.stamp)
		return e, fileMeta{}, nil
	}
	size, st, err := w.h.digest(d, r.ref, buf)
	if errors.Is(err, fs.ErrPermission) {
		meta, serr := metaOf(r.ref)
		if serr != nil {
			return e, meta, serr // vanished meanwhile
		}
		e.kind, e.size = kindMeta, meta.size
		e.n = uint8(copy(e.digest[:], meta.bytes()))
		return e, meta, err
	}
	if err != nil {
		e.kind = kindUnreadable
		return e, fileMeta{}, err
	}
	d.Sum(e.digest[:0])
	e.size = size
	if w.next.keep(st, size, e.digest) {
		w.stamp(r.ref, st)
	}
	return e, fileMeta{}, nil
}

// fold returns the hash of entries (sorted by visible path) and the hash of
// those read from inside the version directory.
func fold(entries []entry) (sum, versionSum [32]byte) {
	total, version := sha256.New(), sha256.New()
	var b []byte
	for _, e := range entries {
		b = append(b[:0], e.rel...)
		b = append(b, 0, e.kind)
		if e.kind != kindUnreadable {
			b = binary.BigEndian.AppendUint64(b, uint64(e.size))
			if e.kind == kindAlias {
				b = append(b, e.alias...)
			} else {
				b = append(b, e.digest[:e.n]...)
			}
		}
		total.Write(b)
		if e.inVersion {
			version.Write(b)
		}
	}
	total.Sum(sum[:0])
	version.Sum(versionSum[:0])
	return sum, versionSum
}

// bytes encodes m for the hash.
func (m fileMeta) bytes() []byte {
	b := make([]byte, 0, 24)
	b = binary.BigEndian.AppendUint64(b, uint64(m.mtime))
	b = binary.BigEndian.AppendUint64(b, m.dev)
	b = binary.BigEndian.AppendUint64(b, m.ino)
	return b
}

// bufPool holds the read buffers of the walks, shared by the volumes. A
// buffer per walk is as fast, but the first hashes of 10 volumes then
// allocate 320 KiB that the heap holds until a collection, which an idle
// sidecar may never run (BenchmarkMemory: 840 KiB allocated at start
// against 520).
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// digest resets d and feeds it the bytes of the regular file name. It
// returns the number of bytes read and the stamp of the file opened, as
// its stat showed before the read.
func (h hasher) digest(d hash.Hash, name string, buf []byte) (int64, fileStamp, error) {
	d.Reset()
	open := h.open
	if open == nil {
		open = openRegular
	}
	f, err := open(name)
	if err != nil {
		return 0, fileStamp{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, fileStamp{}, fmt.Errorf("stat %s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return 0, fileStamp{}, errNotRegular
	}
	// f hidden behind io.Reader: *os.File's WriteTo would ignore buf.
	n, err := io.CopyBuffer(d, struct{ io.Reader }{f}, buf)
	if err != nil {
		return 0, fileStamp{}, fmt.Errorf("read %s: %w", name, err)
	}
	return n, stampOf(info), nil
}

// resolveDir returns the real path of the directory path and its stat, or
// errNotDir if it is not a directory.
func resolveDir(path string) (string, os.FileInfo, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, err
	}
	info, err := os.Stat(real)
	if err == nil && !info.IsDir() {
		err = errNotDir
	}
	return real, info, err
}

// gone reports whether err says that a path no longer leads to an entry.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
