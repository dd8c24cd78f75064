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
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// dataLink is the symlink through which the kubelet publishes the current
// version directory of a ConfigMap, Secret, downwardAPI or projected volume.
const dataLink = "..data"

// maxHashAttempts bounds how often a hash is redone because the kubelet
// swapped ..data while it was being read.
const maxHashAttempts = 3

var (
	errNotDir       = errors.New("is a file, not a directory")
	errSymlinkLoop  = errors.New("symlink loop")
	errDanglingLink = errors.New("dangling symlink")
)

// emptyHash is the hash of a directory without any regular file. It is the
// last known hash of a volume that was never seen.
var emptyHash = sha256.Sum256(nil)

// Record kinds in the hash stream.
const (
	kindFile       = 'f' // a readable regular file: length and SHA-256 of its bytes
	kindUnreadable = 'u' // a file or directory that could not be read
	kindAlias      = 'a' // a second path to a directory already hashed
)

// HashDir returns the content hash of the directory root: SHA-256 over, for
// every regular file that root's visible entries resolve to, sorted by
// visible relative path, the path (slash separated, relative to root), a NUL,
// a kind byte, the file's length and the SHA-256 of its bytes.
//
// Symlinks are followed, to files and to directories. Entries whose name
// starts with ".." are skipped at every level, so the kubelet's version
// directories never appear in the hash, only what the visible names show;
// for a kubelet volume (root/..data is a symlink to a directory) the items
// are read through ..data as it was at one instant, and the hash is redone
// if ..data was swapped meanwhile. Modes, times and owners are not hashed.
//
// Symlink loops and dangling links are left out. A file or directory that
// cannot be read adds a marker instead of its content, so that it becoming
// readable later changes the hash. A directory reached a second time through
// another symlink adds a marker naming the first path. The error is non-nil
// only if root itself cannot be read.
func HashDir(root string) (sum [32]byte, err error) {
	res, err := hasher{open: openRegular}.hash(root)
	return res.sum, err
}

// hasher computes content hashes. open is how files are opened; tests
// replace it to simulate unreadable files when running as root.
type hasher struct {
	open func(name string) (*os.File, error)
}

// problem is an entry that could not be hashed as it should.
type problem struct {
	path string // visible relative path
	err  error
}

// hashResult is the outcome of one hash of a directory.
type hashResult struct {
	sum      [32]byte
	dirs     map[string]fileID // real paths of the directories to watch
	problems []problem
}

// hash hashes root, redoing it if the kubelet swapped ..data meanwhile.
func (h hasher) hash(root string) (hashResult, error) {
	for attempt := 1; ; attempt++ {
		res, before, err := h.hashOnce(root)
		if err != nil {
			return hashResult{}, err
		}
		after, _ := os.Readlink(filepath.Join(root, dataLink))
		if after == before || attempt == maxHashAttempts {
			return res, nil
		}
	}
}

// record is one visible path that contributes to the hash.
type record struct {
	rel  string // visible relative path, slash separated
	kind byte
	ref  string // the file to read (kindFile), or the first path (kindAlias)
}

// walk holds the state of one hash walk.
type walk struct {
	visited  map[fileID]string // every real directory walked, by its first visible path
	onPath   map[fileID]bool   // real directories between the root and the current one
	dirs     map[string]fileID
	fileDirs map[string]bool // real parent directories of files reached by symlinks
	records  []record
	problems []problem
}

// hashOnce walks root once. It returns the ..data link target read before
// the walk ("" if there is none).
func (h hasher) hashOnce(root string) (hashResult, string, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return hashResult{}, "", fmt.Errorf("hash %s: %w", root, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return hashResult{}, "", fmt.Errorf("hash %s: %w", root, err)
	}
	if !info.IsDir() {
		return hashResult{}, "", fmt.Errorf("hash %s: %w", root, errNotDir)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return hashResult{}, "", fmt.Errorf("hash %s: %w", root, err)
	}

	w := &walk{
		visited:  make(map[fileID]string),
		onPath:   make(map[fileID]bool),
		dirs:     make(map[string]fileID),
		fileDirs: make(map[string]bool),
	}
	rootID := idOf(real, info)
	w.visited[rootID] = "."
	w.onPath[rootID] = true
	w.dirs[real] = rootID

	// A kubelet volume: read the items through the version directory that
	// ..data names now, and skip the visible links that point into it, so
	// the hash shows exactly one version even between the swap and the
	// kubelet's update of the visible links.
	target, _ := os.Readlink(filepath.Join(real, dataLink))
	var dataDir string
	var dataEntries []os.DirEntry
	if target != "" {
		dir := target
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(real, dir)
		}
		dir, err = filepath.EvalSymlinks(dir)
		if err == nil {
			var dirInfo os.FileInfo
			dirInfo, err = os.Stat(dir)
			if err == nil && dirInfo.IsDir() {
				dataEntries, err = os.ReadDir(dir)
				if err == nil {
					id := idOf(dir, dirInfo)
					w.visited[id] = "."
					w.onPath[id] = true
					w.dirs[dir] = id
					dataDir = dir
				}
			}
		}
		// Otherwise ..data is dangling or mid-swap: hash the visible
		// entries as they are; the retry in hash covers a swap.
	}

	taken := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if hidden(name) {
			continue
		}
		if dataDir != "" && e.Type()&fs.ModeSymlink != 0 {
			if link, err := os.Readlink(filepath.Join(real, name)); err == nil && link == path.Join(dataLink, name) {
				continue // the kubelet's visible link; read through dataDir below
			}
		}
		taken[name] = true
		w.visit(name, filepath.Join(real, name))
	}
	for _, e := range dataEntries {
		name := e.Name()
		if hidden(name) || taken[name] {
			continue
		}
		w.visit(name, filepath.Join(dataDir, name))
	}

	for d := range w.fileDirs {
		if _, ok := w.dirs[d]; ok {
			continue
		}
		if info, err := os.Stat(d); err == nil {
			w.dirs[d] = idOf(d, info)
		}
	}

	sum := h.sum(w)
	return hashResult{sum: sum, dirs: w.dirs, problems: w.problems}, target, nil
}

// hidden reports whether a name is skipped: the kubelet's "..data",
// "..data_tmp" and "..<timestamp>" entries, and anything else starting
// with "..".
func hidden(name string) bool {
	return strings.HasPrefix(name, "..")
}

// visit adds the entry at the real path p, seen at the visible path rel.
func (w *walk) visit(rel, p string) {
	info, err := os.Lstat(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // vanished meanwhile: an event follows
			w.problem(rel, err)
		}
		return
	}
	viaLink := info.Mode()&fs.ModeSymlink != 0
	if viaLink {
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if _, lerr := os.Lstat(p); lerr == nil {
					w.problem(rel, fmt.Errorf("%w: %w", errDanglingLink, err))
				}
				return
			}
			w.problem(rel, err) // e.g. "too many links" for a loop of symlinks
			return
		}
		info, err = os.Stat(resolved)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				w.problem(rel, err)
			}
			return
		}
		p = resolved
	}
	switch {
	case info.IsDir():
		w.walkDir(rel, p, info)
	case info.Mode().IsRegular():
		w.records = append(w.records, record{rel: rel, kind: kindFile, ref: p})
		if viaLink {
			w.fileDirs[filepath.Dir(p)] = true
		}
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
	w.visited[id] = rel
	w.onPath[id] = true
	defer delete(w.onPath, id)
	w.dirs[dir] = id

	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		w.problem(rel, err)
		w.records = append(w.records, record{rel: rel, kind: kindUnreadable})
		return
	}
	for _, e := range entries {
		if hidden(e.Name()) {
			continue
		}
		w.visit(rel+"/"+e.Name(), filepath.Join(dir, e.Name()))
	}
}

func (w *walk) problem(rel string, err error) {
	w.problems = append(w.problems, problem{path: rel, err: err})
}

// sum reads the files of the walk in the order of their visible paths and
// returns the hash.
func (h hasher) sum(w *walk) [32]byte {
	slices.SortFunc(w.records, func(a, b record) int { return strings.Compare(a.rel, b.rel) })

	total := sha256.New()
	file := sha256.New()
	buf := make([]byte, 32<<10)
	var num [8]byte
	for _, r := range w.records {
		kind, size, digest := r.kind, int64(0), []byte(nil)
		switch r.kind {
		case kindFile:
			var err error
			size, err = h.digest(file, r.ref, buf)
			switch {
			case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotRegular):
				continue // vanished or replaced meanwhile: an event follows
			case err != nil:
				w.problem(r.rel, err)
				kind = kindUnreadable
			default:
				digest = file.Sum(nil)
			}
		case kindAlias:
			size = int64(len(r.ref))
			digest = []byte(r.ref)
		}
		total.Write([]byte(r.rel))
		total.Write([]byte{0, kind})
		if kind != kindUnreadable {
			binary.BigEndian.PutUint64(num[:], uint64(size))
			total.Write(num[:])
			total.Write(digest)
		}
	}
	var sum [32]byte
	total.Sum(sum[:0])
	return sum
}

var errNotRegular = errors.New("not a regular file")

// digest resets d and feeds it the bytes of the regular file name. It
// returns the number of bytes read.
func (h hasher) digest(d hash.Hash, name string, buf []byte) (int64, error) {
	d.Reset()
	f, err := h.open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return 0, errNotRegular
	}
	// A plain loop: io.CopyBuffer would take *os.File's WriteTo, which
	// ignores buf and allocates its own for every file.
	var n int64
	for {
		m, err := f.Read(buf)
		d.Write(buf[:m])
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", name, err)
		}
	}
}
