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
	"sync/atomic"
	"syscall"
	"time"
)

// dataLink is the symlink through which the kubelet publishes the current
// version directory of a ConfigMap, Secret, downwardAPI or projected volume.
const dataLink = "..data"

// maxHashAttempts bounds how often a hash is redone because the kubelet
// swapped ..data while it was being read.
const maxHashAttempts = 3

// maxLinkedNames bounds the items of a kubelet volume walked by linkedWalk.
// It saves a fixed 0.05-0.1 ms of latency per update; when it finds out
// only after the files that the volume must be walked in full (an update
// that removes a key, whose link the kubelet unlinks after the swap), it
// has read them for nothing: 64 small files take about 1 ms.
const maxLinkedNames = 64

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
	res, err := hasher{}.hash(root)
	return res.sum, err
}

// hasher computes content hashes. open is how files are opened; tests
// set it to simulate unreadable files when running as root. When it is nil,
// files are read with plain system calls (readRaw), without an *os.File.
type hasher struct {
	open func(name string) (*os.File, error)
	// racy is how long ago a file must have changed for its digest to be
	// remembered; 0 means racyWindow.
	racy time.Duration
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

	// version is the target of ..data ("" if root has no ..data link), and
	// versionSum the hash of the records read from inside that version
	// directory: the kubelet never changes a version directory once ..data
	// names it, so a different versionSum under the same version is someone
	// else at work (an rm -rf half-way, a hand edit).
	version    string
	versionSum [32]byte

	// broken says why root is in a state that is never reported ("" if
	// it is not): ..data names no directory, or every visible entry
	// dangles. partial says why root looks half-way through a kubelet
	// update ("" if it does not). See the package documentation.
	broken  string
	partial string

	// unreadable holds what can be seen of every file that could not be
	// read, by visible path.
	unreadable map[string]fileMeta

	// root is the real path of the root, and rootID its identity.
	root   string
	rootID fileID

	// linked says that the root was walked by the names of the version
	// directory (see linkedWalk).
	linked bool

	// skipped says that the files were not read (hashOpts.lazy): sum,
	// versionSum, problems and unreadable are not known.
	skipped bool

	// tree is what an event that names a path needs to update the hash
	// without a walk, if root is a plain tree (see plainTree), else nil.
	tree *plainTree
}

// hashOpts are the Watcher's ways to hash less.
type hashOpts struct {
	// cache, if not nil, gives the digests of files whose stat is
	// unchanged since they were read, and takes those of the files read.
	// The caller commits or drops what it took.
	cache *digestCache
	// lazy skips reading the files when the walk already shows a state
	// that is not reported (broken, or half-way through an update): the
	// result then has skipped set and no sum, problems or unreadable files.
	lazy bool
	// seen, if not nil, is given the target of ..data as soon as the hash
	// has read it (nil if root has no ..data link).
	seen *atomic.Pointer[string]
	// ahead, if not nil, is the target of ..data in the real root
	// ahead.root, read just before the hash: the hash takes it as its own
	// first read of ..data if it resolves root to the same directory.
	ahead *linkRead
	// last is the root as the last hash resolved it, if any.
	last rootSeen
}

// rootSeen is a root as a hash resolved it: its real path and identity.
type rootSeen struct {
	real string
	id   fileID
}

// linkRead is a target of ..data ("" if there is none) read in root.
type linkRead struct {
	root, target string
	// version and its stat, if set, are the directory that target names,
	// as resolveVersion found it: the hash need not look it up again.
	version     string
	versionInfo os.FileInfo
}

// hash hashes root, redoing it if the kubelet swapped ..data meanwhile.
func (h hasher) hash(root string) (hashResult, error) {
	return h.hashWith(root, hashOpts{})
}

// hashWith is hash with opts.
func (h hasher) hashWith(root string, opts hashOpts) (hashResult, error) {
	for attempt := 1; ; attempt++ {
		opts.cache.drop()
		res, err := h.hashOnce(root, opts)
		if err != nil {
			return hashResult{}, err
		}
		after, _ := os.Readlink(filepath.Join(root, dataLink))
		if after == res.version || attempt == maxHashAttempts {
			return res, nil
		}
		// Read before the next attempt lists anything: its first read,
		// if it was read in the directory hashed (root has no symlink).
		opts.ahead = nil
		if root == res.root {
			opts.ahead = &linkRead{root: root, target: after}
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
	visited  map[fileID]string // every real directory walked, by its first visible path
	onPath   map[fileID]bool   // real directories between the root and the current one
	dirs     map[string]fileID
	fileDirs map[string]bool // real parent directories of files reached by symlinks
	records  []record
	problems []problem
	vanished bool // an entry vanished while it was read: something is at work
	links    bool // a symlink was followed
	shared   bool // a regular file has other hard links
	aliased  bool // a directory was reached twice (kindAlias)

	dataDir     string    // the version directory ..data names, if any
	dataChanged time.Time // the latest mtime of a directory walked inside dataDir
	emptyDir    string    // an empty directory inside dataDir (visible path)
}

// hashOnce walks root once.
func (h hasher) hashOnce(root string, opts hashOpts) (hashResult, error) {
	start := time.Now()
	real, info, target, err := readRoot(root, opts)
	if err != nil {
		return hashResult{}, err
	}
	rootID := idOf(real, info)
	w := newWalk(real, rootID)
	res := hashResult{version: target, root: real, rootID: rootID}

	// A kubelet volume: the version directory that ..data names is watched
	// (the kubelet never writes into it, but someone else might), and its
	// top-level entries are compared with the visible ones below.
	var known *linkRead
	if a := opts.ahead; a != nil && a.root == real && a.versionInfo != nil {
		known = a // readRoot took its target too
	}
	dataDir, dataNames, dataEntries := w.versionDir(real, target, known, &res)
	if dataDir != "" && len(dataNames) > 0 && len(dataNames) <= maxLinkedNames {
		if linked, ok := h.linkedWalk(w, res, dataNames, dataEntries, opts, start); ok {
			return linked, nil
		}
		w = newWalk(real, rootID)
		res = hashResult{version: target, root: real, rootID: rootID}
		dataDir, dataNames, dataEntries = w.versionDir(real, target, known, &res)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return hashResult{}, fmt.Errorf("hash %s: %w", root, err)
	}
	// As listed (one lstat less): one created since is in the second
	// listing, which unsettled compares.
	if slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == dataLink+"_tmp" }) {
		res.partial = "..data_tmp exists: a swap is under way"
		if opts.lazy {
			// The rename of ..data follows within milliseconds, with its
			// own event: no need to walk or read what it replaces.
			res.skipped = true
			return res, nil
		}
	}

	visible, dangling := w.visitEntries(real, dataDir, entries, &res)
	if res.partial == "" {
		for _, name := range dataNames {
			if !visible[name] {
				res.partial = fmt.Sprintf("item %s has no visible link yet", name)
				break
			}
		}
	}
	if res.broken == "" && len(visible) > 0 && dangling == len(visible) {
		res.broken = "every visible entry dangles"
	}
	w.watchFileDirs()

	if opts.lazy && (res.partial != "" || res.broken != "") {
		res.dirs = w.dirs
		res.skipped = true
		return res, nil
	}
	sorted, unreadable := h.entries(w, dataDir, opts.cache, start)
	res.sum, res.versionSum = fold(sorted)
	res.unreadable = unreadable
	if res.partial == "" && res.broken == "" {
		res.partial = w.unsettled(real, dataDir, entries, dataEntries)
	}
	res.dirs = w.dirs
	res.problems = w.problems
	res.tree = w.tree(sorted, &res)
	return res, nil
}

// readRoot resolves root and reads where ..data points (before anything is
// listed: if the kubelet swaps it during the walk, hash sees a different
// target afterwards and hashes again).
func readRoot(root string, opts hashOpts) (real string, info os.FileInfo, target string, err error) {
	real, info, err = resolveRootFrom(root, opts.last)
	if err != nil {
		return "", nil, "", fmt.Errorf("hash %s: %w", root, err)
	}
	if a := opts.ahead; a != nil && a.root == real {
		target = a.target
	} else {
		target, _ = os.Readlink(filepath.Join(real, dataLink))
	}
	if opts.seen != nil {
		if target == "" {
			opts.seen.Store(nil)
		} else {
			opts.seen.Store(&target)
		}
	}
	return real, info, target, nil
}

// linkedWalk is the walk of a kubelet volume as the kubelet leaves it: the
// visible names of the root are links to the items of the version
// directory (names, as listed in dataEntries), and nothing else. It takes
// those names as the root's, reads the files through the links, and lists
// the root once, after the files: if the root then shows the same names,
// the walk is the one a listing of the root first would have made. Right
// after a swap the kubelet deletes the old version directory beside the
// root's entries, and a listing of the root at that moment waits for it:
// 150-250 us in traces, when hotreload's swap-to-request latency trailed
// the floor program's by about 0.35 ms (test/cost). It reports false
// for any other volume or moment (a link missing or dangling, a name more
// in the root, a problem, a state half-way through an update): the volume
// is then walked in full. w and res are those of the walk so far, with
// the version directory read.
func (h hasher) linkedWalk(w *walk, res hashResult, names []string, dataEntries []os.DirEntry, opts hashOpts, start time.Time) (hashResult, bool) {
	links := make([]os.DirEntry, len(names))
	for i, n := range names {
		links[i] = linkEntry(n)
	}
	if _, dangling := w.visitEntries(res.root, w.dataDir, links, &res); w.vanished || dangling > 0 || res.partial != "" || len(w.problems) > 0 {
		return hashResult{}, false
	}
	w.watchFileDirs()
	sorted, unreadable := h.entries(w, w.dataDir, opts.cache, start)
	if w.unsettled(res.root, w.dataDir, links, dataEntries) != "" {
		return hashResult{}, false // compared with the root's names as they are now
	}
	res.sum, res.versionSum = fold(sorted)
	res.unreadable = unreadable
	res.dirs = w.dirs
	res.problems = w.problems
	res.linked = true
	return res, true
}

// linkEntry is a directory entry of the kubelet's kind in a volume's root:
// a symlink named name.
type linkEntry string

func (e linkEntry) Name() string               { return string(e) }
func (e linkEntry) IsDir() bool                { return false }
func (e linkEntry) Type() fs.FileMode          { return fs.ModeSymlink }
func (e linkEntry) Info() (fs.FileInfo, error) { return nil, errors.New("linkEntry has no FileInfo") }

// newWalk returns a walk from the real root, the directory rootID.
func newWalk(real string, rootID fileID) *walk {
	w := &walk{
		visited:  make(map[fileID]string),
		onPath:   make(map[fileID]bool),
		dirs:     make(map[string]fileID),
		fileDirs: make(map[string]bool),
	}
	w.visited[rootID] = "."
	w.onPath[rootID] = true
	w.dirs[real] = rootID
	return w
}

// versionDir resolves the version directory that ..data (target) names
// (known, if not nil, has resolved it already), watches it and lists it. It
// returns "" and records the volume as broken if target names no
// directory, and "" alone if there is no ..data.
func (w *walk) versionDir(real, target string, known *linkRead, res *hashResult) (dir string, names []string, entries []os.DirEntry) {
	if target == "" {
		return "", nil, nil
	}
	var (
		dirInfo os.FileInfo
		err     error
	)
	if known != nil {
		dir, dirInfo = known.version, known.versionInfo
	} else {
		dir, dirInfo, err = resolveVersion(real, target)
	}
	if err == nil {
		entries, err = os.ReadDir(dir)
	}
	if err != nil {
		res.broken = fmt.Sprintf("..data names no directory (%s)", target)
		return "", nil, nil
	}
	w.dirs[dir] = idOf(dir, dirInfo)
	w.dataDir = dir
	w.dataChanged = dirInfo.ModTime()
	for _, e := range entries {
		if !hidden(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return dir, names, entries
}

// visitEntries walks root's visible entries, resolving the kubelet's links
// through dataDir as the app would. It returns the visible names and how
// many of them dangle, and records a link to a vanished item as a moment of
// an update.
func (w *walk) visitEntries(real, dataDir string, entries []os.DirEntry, res *hashResult) (visible map[string]bool, dangling int) {
	visible = make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if hidden(name) {
			continue
		}
		visible[name] = true
		p := filepath.Join(real, name)
		if e.Type()&fs.ModeSymlink == 0 {
			w.visit(name, p)
			continue
		}
		w.links = true
		link, err := os.Readlink(p)
		if err != nil {
			w.vanished = true // replaced since the listing: an event follows
			continue
		}
		rest, kubelet := strings.CutPrefix(link, dataLink+"/")
		if kubelet && dataDir != "" {
			// The kubelet's link: resolve it through the version directory
			// already resolved, as the app would (..data is checked
			// again after the walk), without resolving the whole path.
			p = filepath.Join(dataDir, rest)
			info, err := os.Lstat(p)
			if err == nil {
				w.visitInfo(name, p, info)
				continue
			}
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				w.problem(name, err)
				continue
			}
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			if !kubelet || dataDir == "" {
				dangling++
			}
			if kubelet {
				// The kubelet's link of a key that ..data no longer has:
				// the kubelet unlinks it next. Not a problem of the
				// volume's content, only a moment of the update (even
				// when every key vanished: a hash at the swap sees every
				// visible link dangle, and that is not broken).
				if res.partial == "" && res.broken == "" {
					res.partial = fmt.Sprintf("visible link %s names a vanished item", name)
				}
				continue
			}
		}
		w.visit(name, p)
	}
	return visible, dangling
}

// watchFileDirs adds to the directories to watch those of files reached
// through symlinks.
func (w *walk) watchFileDirs() {
	for d := range w.fileDirs {
		if _, ok := w.dirs[d]; ok {
			continue
		}
		if info, err := os.Stat(d); err == nil {
			w.dirs[d] = idOf(d, info)
		}
	}
}

// unsettled returns why the files just read may not be a state of the
// volume that an app could read whole, or "" if they are.
func (w *walk) unsettled(real, dataDir string, entries, dataEntries []os.DirEntry) string {
	switch {
	case w.vanished:
		return reasonVanished
	case w.emptyDir != "":
		return fmt.Sprintf("directory %s of the version that ..data names is empty (the kubelet makes directories only for items: an rm -rf is under way)", w.emptyDir)
	case dataDir != "" && w.dataChanged.After(changeTime(filepath.Join(real, dataLink))):
		// The kubelet fills a version directory before it renames ..data
		// to name it (which sets the link's change time), and never
		// touches it again.
		return "the version directory that ..data names changed after ..data was swapped to it (the kubelet never does that)"
	case !sameNames(real, entries) || (dataDir != "" && !sameNames(dataDir, dataEntries)):
		// Read again after the files: a writer (an rm -rf, a script) was
		// at work during the walk, and the files read may be a mix that
		// no state of the volume ever held.
		return reasonStale
	}
	return ""
}

// resolveRoot returns the real path of a volume's root and its stat, or
// errNotDir if it is not a directory.
func resolveRoot(root string) (string, os.FileInfo, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", nil, err
	}
	info, err := os.Stat(real)
	if err == nil && !info.IsDir() {
		err = errNotDir
	}
	return real, info, err
}

// resolveRootFrom is resolveRoot for a root that last resolved it, if
// last.real is root itself (no symlink on its way) and it has an identity.
// A directory keeps its identity wherever it moves, so a root that still
// reaches a directory of that identity reaches the same one, and is still a
// path to it: one stat shows it, against one lstat per path component for
// the full resolution, which any other answer gets.
func resolveRootFrom(root string, last rootSeen) (string, os.FileInfo, error) {
	if last.real == root && last.id.ino != 0 {
		if info, err := os.Stat(root); err == nil && info.IsDir() && idOf(root, info) == last.id {
			return root, info, nil
		}
	}
	return resolveRoot(root)
}

// resolveVersion returns the real path and the stat of the directory that
// ..data names (target) in the directory real, itself resolved. In the
// kubelet's form (a plain name that is not a symlink itself) that takes one
// lstat.
func resolveVersion(real, target string) (string, os.FileInfo, error) {
	dir := target
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(real, dir)
	}
	var (
		info os.FileInfo
		err  error
	)
	if plainName(target) {
		info, err = os.Lstat(dir)
	}
	if !plainName(target) || err != nil || info.Mode()&fs.ModeSymlink != 0 {
		dir, err = filepath.EvalSymlinks(dir)
		if err == nil {
			info, err = os.Stat(dir)
		}
	}
	if err == nil && !info.IsDir() {
		err = errNotDir
	}
	return dir, info, err
}

// plainName reports whether target (of ..data) is one name in the same
// directory, as the kubelet writes it.
func plainName(target string) bool {
	return target != "" && target != "." && target != ".." && !strings.ContainsRune(target, filepath.Separator)
}

// sameNames reports whether dir still lists the entries of before that
// matter to the hash: the visible names, and ..data_tmp.
func sameNames(dir string, before []os.DirEntry) bool {
	now, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	keep := func(es []os.DirEntry) []string {
		var names []string
		for _, e := range es {
			if n := e.Name(); !hidden(n) || n == dataLink+"_tmp" {
				names = append(names, n)
			}
		}
		return names
	}
	return slices.Equal(keep(before), keep(now)) // ReadDir sorts by name
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
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if _, lerr := os.Lstat(p); lerr == nil {
					w.problem(rel, fmt.Errorf("%w: %w", errDanglingLink, err))
				} else {
					w.vanished = true
				}
				return
			}
			w.problem(rel, err) // e.g. "too many links" for a loop of symlinks
			return
		}
		info, err = os.Stat(resolved)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				w.vanished = true
			} else {
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
		w.records = append(w.records, record{rel: rel, kind: kindFile, ref: p, stamp: stampOf(info)})
		w.shared = w.shared || linkCount(info) > 1
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
		w.aliased = true
		return
	}
	w.visited[id] = rel
	w.onPath[id] = true
	defer delete(w.onPath, id)
	w.dirs[dir] = id

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
	if w.dataDir != "" && strings.HasPrefix(dir, w.dataDir+string(filepath.Separator)) {
		// Inside the published version: the kubelet makes directories
		// only as parents of items, and never changes them afterwards.
		if len(entries) == 0 {
			w.emptyDir = rel
		}
		if after, err := os.Stat(dir); err == nil && after.ModTime().After(w.dataChanged) {
			w.dataChanged = after.ModTime() // read after the listing: the latest change
		}
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

// entries reads the files of the walk in the order of their visible paths
// and returns its entries, and what was seen of the files that could not be
// read. A file whose stat is the one cache remembers is not read; a file
// read is remembered if it last changed well before start (see racyWindow).
func (h hasher) entries(w *walk, dataDir string, cache *digestCache, start time.Time) (entries []entry, unreadable map[string]fileMeta) {
	slices.SortFunc(w.records, func(a, b record) int { return strings.Compare(a.rel, b.rel) })
	entries = make([]entry, 0, len(w.records))
	file := sha256.New()
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	for _, r := range w.records {
		e := entry{rel: r.rel, kind: r.kind}
		switch r.kind {
		case kindFile:
			if d, ok := cache.lookup(r.stamp); ok {
				e.size, e.digest, e.n = r.stamp.size, d, sha256.Size
				break
			}
			size, st, err := h.digest(file, r.ref, *buf)
			switch {
			case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotRegular):
				w.vanished = true // vanished or replaced meanwhile: an event follows
				continue
			case errors.Is(err, fs.ErrPermission):
				meta, serr := metaOf(r.ref)
				if serr != nil {
					w.vanished = true
					continue
				}
				w.problem(r.rel, err)
				if unreadable == nil {
					unreadable = make(map[string]fileMeta)
				}
				unreadable[r.rel] = meta
				e.kind, e.size = kindMeta, meta.size
				e.n = uint8(copy(e.digest[:], meta.bytes()))
			case err != nil:
				w.problem(r.rel, err)
				e.kind = kindUnreadable
			default:
				e.size, e.n = size, sha256.Size
				file.Sum(e.digest[:0])
				if settled(st, start, h.racy) && st.size == size {
					cache.keep(st, e.digest)
				}
			}
		case kindAlias:
			e.size, e.alias = int64(len(r.ref)), r.ref
		}
		e.inVersion = dataDir != "" && strings.HasPrefix(r.ref, dataDir+string(filepath.Separator))
		entries = append(entries, e)
	}
	return entries, unreadable
}

// fold returns the hash of entries (sorted by visible path) and the hash of
// those read from inside the version directory.
func fold(entries []entry) (sum, versionSum [32]byte) {
	total := sha256.New()
	version := sha256.New()
	// The records go to the hashes in batches: a Write per field costs
	// more than the hashing of 10,000 records.
	var tb, vb []byte
	for _, e := range entries {
		start := len(tb)
		tb = append(tb, e.rel...)
		tb = append(tb, 0, e.kind)
		if e.kind != kindUnreadable {
			tb = binary.BigEndian.AppendUint64(tb, uint64(e.size))
			if e.kind == kindAlias {
				tb = append(tb, e.alias...)
			} else {
				tb = append(tb, e.digest[:e.n]...)
			}
		}
		if e.inVersion {
			vb = append(vb, tb[start:]...)
		}
		if len(tb) >= 16<<10 {
			total.Write(tb)
			tb = tb[:0]
		}
		if len(vb) >= 16<<10 {
			version.Write(vb)
			vb = vb[:0]
		}
	}
	total.Write(tb)
	version.Write(vb)
	total.Sum(sum[:0])
	version.Sum(versionSum[:0])
	return sum, versionSum
}

var errNotRegular = errors.New("not a regular file")

// bufPool holds the read buffers of hashes, shared by the volumes: a
// resync hashes every volume at once.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// digest resets d and feeds it the bytes of the regular file name. It
// returns the number of bytes read and the stamp of the file opened, as
// its stat showed before the read.
func (h hasher) digest(d hash.Hash, name string, buf []byte) (int64, fileStamp, error) {
	d.Reset()
	if h.open == nil {
		if n, st, ok, err := readRaw(d, name, buf); ok {
			return n, st, err
		}
		h.open = openRegular
	}
	f, err := h.open(name)
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
	st := stampOf(info)
	// A plain loop: io.CopyBuffer would take *os.File's WriteTo, which
	// ignores buf and allocates its own for every file.
	var n int64
	for {
		m, err := f.Read(buf)
		d.Write(buf[:m])
		n += int64(m)
		if err == io.EOF {
			return n, st, nil
		}
		if err != nil {
			return 0, fileStamp{}, fmt.Errorf("read %s: %w", name, err)
		}
	}
}
