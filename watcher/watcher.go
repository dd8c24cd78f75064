package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// DefaultPollInterval is the poll period used when Options.PollInterval is 0.
const DefaultPollInterval = 5 * time.Second

// settleTimeout bounds how long a volume that looks half-way through a
// kubelet update is waited for before what it shows is reported anyway.
// The kubelet's steps follow each other within milliseconds.
const settleTimeout = 2 * time.Second

// maxDirtyPaths bounds the paths that events named which a volume keeps
// between two hashes (see plainTree); past it, the volume is walked.
const maxDirtyPaths = 1024

// maxRehashes bounds how often one refresh re-hashes a volume because its
// watch set grew (a new directory may have been filled before its watch
// existed).
const maxRehashes = 3

// Reasons for not reporting a hash yet that mean "busy", not "inconsistent".
const (
	reasonStale    = "changed again while it was hashed"
	reasonVanished = "an entry vanished while it was read"
)

// unreadableHint says how to make an unreadable file readable.
const unreadableHint = "set the pod's fsGroup, run hotreload as the file owner's runAsUser, or give the volume a defaultMode that lets group/others read"

// DirError is a problem with one of Options.Dirs that New found. The
// package names no command-line flag; a command that takes the directories
// as a flag names it (hotreload's internal/config: --volume-dir).
type DirError struct {
	Dir string // as given
	Err error
}

func (e *DirError) Error() string { return fmt.Sprintf("option Dirs %q: %v", e.Dir, e.Err) }

func (e *DirError) Unwrap() error { return e.Err }

// subPathHint is what to do about a directory to watch that is a file. The likely
// cause is a ConfigMap key mounted with subPath, which the kubelet never
// updates: watching the directory that holds it would give a Ready pod that
// never reloads (seen in a real pod), so the hint says what works.
const subPathHint = "a subPath mount never updates: mount the whole volume into hotreload's container (no subPath) and give its mount path"

// Options configures a Watcher.
type Options struct {
	// Dirs are the volume directories, as given by --volume-dir. A path
	// given twice is watched once.
	Dirs []string
	// ResyncInterval re-hashes every directory this often as a safety net
	// for missed events; 0 turns it off.
	ResyncInterval time.Duration
	// PollInterval is the poll period for directories that cannot be
	// watched with inotify and for directories that do not exist yet;
	// 0 means DefaultPollInterval.
	PollInterval time.Duration
	// Poll never uses inotify and always polls, for filesystems that do
	// not support it.
	Poll bool
}

// Watcher watches volume directories and reports content changes on
// Changes. Create it with New and start it with Run.
type Watcher struct {
	logger  log.Logger
	dirs    []string
	resync  time.Duration
	pollInt time.Duration
	poll    bool
	settle  time.Duration
	changes chan Change
	ready   atomic.Bool
	readyc  chan struct{} // closed when ready is set
	running atomic.Bool

	stop context.CancelFunc // cancels vctx

	// Seams for tests; set by New.
	hasher   hasher
	newWatch func() (*fsnotify.Watcher, error)
	addWatch func(fsw *fsnotify.Watcher, path string) error

	changesTotal prometheus.Counter
	eventsTotal  prometheus.Counter
	errorsTotal  prometheus.Counter
	hashesTotal  prometheus.Counter
	watchedDirs  prometheus.Gauge

	// Set by Run before any goroutine starts; read-only afterwards.
	vols []*volume
	vctx context.Context // the context of the volumes' hashes

	// treeUpdates counts the hashes of plain trees that read only what
	// events named (for tests).
	treeUpdates atomic.Int64

	// runners counts the goroutines that hash volumes; one runs for a
	// volume only while it is dirty (see run).
	runners sync.WaitGroup

	// wake tells Run's goroutine that a volume's need of the poll ticker
	// may have changed, or that the watch limit was hit.
	wake chan struct{}
	// ticking reports whether the poll ticker runs (for tests).
	ticking atomic.Bool

	// fsMu makes a change of the watch index and the fsnotify calls
	// that go with it one step: a watch removed because its directory
	// moved must not be removed after another path added it again.
	fsMu sync.Mutex

	mu          sync.Mutex
	fsw         *fsnotify.Watcher       // nil while inotify is not used
	index       map[string]map[int]bool // inotify watch path -> volumes that hold it
	dirOf       map[string]fileID       // inotify watch path -> its directory (see index.go)
	dirWatches  map[fileID]*dirWatch    // directory -> its inotify watch
	first       map[string][32]byte     // the first hash of each volume whole at start (see Initial)
	limitErr    error                   // the first "watch limit reached" error
	limitLogged bool
	stopped     bool // Run is returning: no runner starts
}

// volume is the state of one watched directory. The fields above the line
// are shared; the rest is owned by the volume's runner goroutine (one at a
// time: see run).
type volume struct {
	idx  int
	dir  string // as given
	path string // cleaned

	kick      chan struct{} // holds a value while the volume is dirty
	running   atomic.Bool   // a runner goroutine owns the volume (see run)
	pending   atomic.Int32  // marks not yet processed
	needPoll  atomic.Bool   // polled, missing or incomplete: the poll ticker must run
	watchNeed atomic.Int64  // directories the last hash wanted watched

	present      bool // exists, was hashed, and is watched (inotify or polling)
	polling      bool // watched by polling instead of inotify
	retryAt      time.Time
	hash         [32]byte
	version      string   // ..data's target when hash was taken
	versionSum   [32]byte // see hashResult
	unreadable   map[string]fileMeta
	watches      map[string]fileID // inotify watches this volume holds
	logged       map[string]bool   // problems already logged, by kind and path
	waiting      bool              // the "waiting for it" line was logged
	rootErr      string            // the last root error logged
	broken       string            // the broken state last logged
	partialSince time.Time         // when the volume was first seen half-way through an update
	settleTimer  *time.Timer
	cache        digestCache // digests of the files last hashed
	root         rootSeen    // the root as the last hash resolved it
	tree         *plainTree  // the last complete hash, if the volume is a plain tree

	dirtyMu    sync.Mutex
	dirtyPaths map[string]bool // paths that events named since a hash took them
	dirtyAll   bool            // a mark named no path: the next hash walks the volume
	swapTo     string          // ..data was swapped to this version since a hash took the marks

	full atomic.Bool            // the next hash reads every file (resync, lost events)
	seen atomic.Pointer[string] // ..data's target when the last hash started, nil if none
}

// New returns a Watcher for opts. It fails, with one line naming the
// option (a *DirError for a directory), if no directory is given or a path
// exists but is not a directory; a
// directory that does not exist yet is not an error. logger may be nil; reg
// may be nil, then the metrics are not registered.
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Watcher, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if len(opts.Dirs) == 0 {
		return nil, errors.New("option Dirs: at least one directory is required")
	}
	if opts.ResyncInterval < 0 {
		return nil, fmt.Errorf("option ResyncInterval %s: must not be negative", opts.ResyncInterval)
	}
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("option PollInterval %s: must not be negative", opts.PollInterval)
	}
	var dirs []string
	seen := make(map[string]bool)
	for _, d := range opts.Dirs {
		if d == "" {
			return nil, &DirError{Dir: d, Err: errors.New("must not be empty")}
		}
		info, err := os.Stat(d)
		switch {
		case err == nil && !info.IsDir():
			return nil, &DirError{Dir: d, Err: fmt.Errorf("%w: "+subPathHint, errNotDir)}
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, &DirError{Dir: d, Err: err}
		}
		if c := filepath.Clean(d); !seen[c] {
			seen[c] = true
			dirs = append(dirs, d)
		}
	}
	poll := opts.PollInterval
	if poll == 0 {
		poll = DefaultPollInterval
	}

	f := promauto.With(reg)
	w := &Watcher{
		logger:     log.With(logger, "component", "watcher"),
		dirs:       dirs,
		resync:     opts.ResyncInterval,
		pollInt:    poll,
		poll:       opts.Poll,
		settle:     settleTimeout,
		changes:    make(chan Change, len(dirs)),
		readyc:     make(chan struct{}),
		hasher:     hasher{},
		newWatch:   fsnotify.NewWatcher,
		addWatch:   func(fsw *fsnotify.Watcher, path string) error { return fsw.Add(path) },
		wake:       make(chan struct{}, 1),
		index:      make(map[string]map[int]bool),
		dirOf:      make(map[string]fileID),
		dirWatches: make(map[fileID]*dirWatch),
		first:      make(map[string][32]byte),
		changesTotal: f.NewCounter(prometheus.CounterOpts{
			Name: "hotreload_changes_total",
			Help: "Content changes detected in the watched directories.",
		}),
		eventsTotal: f.NewCounter(prometheus.CounterOpts{
			Name: "hotreload_watch_events_total",
			Help: "Filesystem events received.",
		}),
		errorsTotal: f.NewCounter(prometheus.CounterOpts{
			Name: "hotreload_watch_errors_total",
			Help: "Watch errors: unreadable entries, symlink loops, dangling links, broken volumes, event queue overflows, inotify failures.",
		}),
		hashesTotal: f.NewCounter(prometheus.CounterOpts{
			Name: "hotreload_volume_hashes_total",
			Help: "Walks of a volume that hash what an app sees (files whose stat is unchanged are not read again). A kubelet update costs one; an edit in a plain directory without symlinks, none (the event names what to read).",
		}),
		watchedDirs: f.NewGauge(prometheus.GaugeOpts{
			Name: "hotreload_watched_dirs",
			Help: "Volume directories currently watched, by inotify or by polling.",
		}),
	}
	return w, nil
}

// Changes returns the channel on which Run sends one Change each time a
// directory's content hash differs from the last one reported. It is never
// closed; stop reading when Run's context is done.
func (w *Watcher) Changes() <-chan Change { return w.changes }

// Ready reports whether every directory that existed when Run started has
// been hashed and is watched, by inotify or by polling.
func (w *Watcher) Ready() bool { return w.ready.Load() }

// Run watches until ctx is done, then stops every goroutine and watch it
// started and returns nil. It hashes every existing directory first without
// sending a Change: there is no change at start. Run may be called once; a
// second call returns an error at once.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("run watcher: already running")
	}

	vctx, stop := context.WithCancel(ctx)
	w.vctx = vctx
	w.stop = stop
	var readers sync.WaitGroup
	defer w.closeInotify(&readers)
	// The volumes exist before the event reader starts: it reads w.vols.
	w.newVolumes()
	if !w.poll {
		w.startInotify(&readers, true)
	}
	for _, v := range w.vols {
		v.polling = w.inotify() == nil
		if w.poll {
			level.Info(w.logger).Log("msg", fmt.Sprintf("polling every %s", w.pollInt), "dir", v.dir)
		}
	}

	defer w.stopVolumes() // before the inotify watcher is closed
	w.hashInitial()
	if ctx.Err() != nil {
		return nil
	}
	w.ready.Store(true)
	close(w.readyc)
	level.Debug(w.logger).Log("msg", "watcher ready", "dirs", len(w.vols))
	w.loop(ctx, &readers)
	return nil
}

// newVolumes makes the state of every directory, each owned by its first
// hash, before any event can mark it.
func (w *Watcher) newVolumes() {
	for i, d := range w.dirs {
		w.vols = append(w.vols, &volume{
			idx:     i,
			dir:     d,
			path:    filepath.Clean(d),
			kick:    make(chan struct{}, 1),
			hash:    emptyHash,
			watches: make(map[string]fileID),
			logged:  make(map[string]bool),
		})
		w.vols[i].running.Store(true)
	}
}

// hashInitial hashes every volume once, without reporting a change, and
// returns when all are done; each volume's goroutine then goes on to serve
// its events. The first hashes run a few at a time, so that the peak of
// their buffers stays small: nothing is reported before all are done anyway.
func (w *Watcher) hashInitial() {
	var initial sync.WaitGroup
	initial.Add(len(w.vols))
	slots := make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	for _, v := range w.vols {
		w.runners.Add(1)
		go func() {
			defer w.runners.Done()
			slots <- struct{}{}
			w.refresh(w.vctx, v, true)
			<-slots
			if v.present && v.broken == "" {
				w.mu.Lock()
				w.first[v.dir] = v.hash
				w.mu.Unlock()
			}
			initial.Done()
			w.runVolume(v)
		}()
	}
	initial.Wait()
}

// stopVolumes stops the volumes' goroutines and their settle timers.
func (w *Watcher) stopVolumes() {
	w.stopRunners()
	w.runners.Wait()
	for _, v := range w.vols {
		v.stopSettle()
	}
}

// closeInotify closes the inotify watcher and waits for its event readers.
func (w *Watcher) closeInotify(readers *sync.WaitGroup) {
	w.mu.Lock()
	fsw := w.fsw
	w.mu.Unlock()
	if fsw != nil {
		fsw.Close()
	}
	readers.Wait()
	w.watchedDirs.Set(0)
}

// loop marks volumes for the resync and the poll until ctx is done. The
// poll ticker runs only while some volume is polled, missing or
// incomplete, or inotify is to be tried again.
func (w *Watcher) loop(ctx context.Context, readers *sync.WaitGroup) {
	var resync <-chan time.Time
	if w.resync > 0 {
		t := time.NewTicker(w.resync)
		defer t.Stop()
		resync = t.C
	}
	var ticker *time.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	for {
		w.logLimit()
		need := !w.poll && w.inotify() == nil // retry inotify
		for _, v := range w.vols {
			need = need || v.needPoll.Load()
		}
		switch {
		case need && ticker == nil:
			ticker = time.NewTicker(w.pollInt)
		case !need && ticker != nil:
			ticker.Stop()
			ticker = nil
		}
		w.ticking.Store(ticker != nil)
		var tick <-chan time.Time
		if ticker != nil {
			tick = ticker.C
		}

		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-resync:
			for _, v := range w.vols {
				v.full.Store(true) // the safety net trusts no remembered digest
				w.mark(v)
			}
		case <-tick:
			if !w.poll && w.inotify() == nil && w.startInotify(readers, false) {
				for _, v := range w.vols {
					w.mark(v) // each adds its watches
				}
				continue
			}
			for _, v := range w.vols {
				if v.needPoll.Load() {
					w.mark(v)
				}
			}
		}
	}
}

// run starts a runner for the dirty volume v unless one owns it already.
// A volume has a goroutine only while it is dirty or being hashed: an idle
// volume costs no goroutine stack (300 idle volumes held 1.2 MiB of stacks
// when each had a goroutine of its own).
func (w *Watcher) run(v *volume) {
	if !v.running.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		v.running.Store(false)
		return
	}
	w.runners.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.runners.Done()
		w.runVolume(v)
	}()
}

// runVolume re-hashes v as long as it is marked dirty, then gives it up;
// the Changes of one volume are therefore sent in order.
func (w *Watcher) runVolume(v *volume) {
	for {
		select {
		case <-w.vctx.Done():
			return // running stays set: no runner starts any more
		case <-v.kick:
			w.refresh(w.vctx, v, false)
			v.pending.Add(-1)
			continue
		default:
		}
		v.running.Store(false)
		// A mark that came after the kick was found empty and before
		// running was cleared started no runner: look again.
		if len(v.kick) == 0 || !v.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// stopRunners cancels the volumes' context and keeps any runner from starting.
func (w *Watcher) stopRunners() {
	w.stop()
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

// inotify returns the inotify watcher, or nil if inotify is not used.
func (w *Watcher) inotify() *fsnotify.Watcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fsw
}

// startInotify creates the inotify watcher and starts reading its events.
// It reports whether it succeeded. A failure is logged at the first attempt
// only; a later success is logged.
func (w *Watcher) startInotify(readers *sync.WaitGroup, first bool) bool {
	fsw, err := w.newWatch()
	if err != nil {
		if first {
			w.errorsTotal.Inc()
			msg := fmt.Sprintf("inotify unavailable, polling every %s and trying inotify again as often", w.pollInt)
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				msg = fmt.Sprintf("inotify instances exhausted, raise the sysctl fs.inotify.max_user_instances (now %s; each hotreload needs 1); polling every %s and trying inotify again as often",
					sysctl("fs/inotify/max_user_instances"), w.pollInt)
			}
			level.Warn(w.logger).Log("msg", msg, "err", err)
		}
		return false
	}
	w.mu.Lock()
	w.fsw = fsw
	w.mu.Unlock()
	if !first {
		level.Info(w.logger).Log("msg", "inotify available again, watching with inotify instead of polling")
	}
	readers.Add(1)
	go func() {
		defer readers.Done()
		w.readEvents(fsw)
	}()
	return true
}

// sysctl reads a value under /proc/sys, or "unknown".
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// readEvents turns inotify events into dirty volumes until fsw is closed.
func (w *Watcher) readEvents(fsw *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-fsw.Events:
			if !ok {
				return
			}
			w.eventsTotal.Inc()
			if filepath.Base(ev.Name) == dataLink {
				// The old versions leave the index before the volume is
				// marked, and their inotify watches are removed after
				// (inotify_rm_watch takes a while): the hash of the new
				// version need not wait for it. Both read ..data once.
				target, err := os.Readlink(ev.Name)
				var drop []rename
				if err == nil {
					drop = w.dropOldVersions(filepath.Dir(ev.Name), target)
				}
				handled := err == nil && ev.Has(fsnotify.Create)
				if handled {
					w.markSwap(ev.Name, target)
				}
				if len(drop) > 0 {
					// No volume adds an old version again: the index
					// changed first, the watches go after the mark.
					w.whileReading(fsw, func() {
						w.fsMu.Lock()
						defer w.fsMu.Unlock()
						for _, r := range drop {
							w.apply(fsw, r)
						}
					})
				}
				if handled {
					continue
				}
			}
			if ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove) {
				w.markGone(fsw, ev.Name)
			}
			// The kubelet creates ..data_tmp and renames it to ..data
			// within microseconds; the rename queues the move away of
			// ..data_tmp and the arrival of ..data at once. Neither the
			// creation nor the move away of ..data_tmp changes what an app
			// sees, and only the arrival of ..data marks the volume: a hash
			// started by the first event would see the swap half the time
			// and be thrown away as stale when the last arrives. A
			// ..data_tmp left behind or moved elsewhere ends no reported
			// state (a hash that saw it is looked at again by the settle
			// timer); its removal marks the volume.
			swapStart := filepath.Base(ev.Name) == dataLink+"_tmp" && (ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename))
			if !swapStart && !w.otherVersion(ev.Name) {
				w.markPath(ev.Name)
			}
		case err, ok := <-fsw.Errors:
			if !ok {
				return
			}
			w.watchError(err)
		}
	}
}

// whileReading runs f, which calls fsw, for the event reader. fsnotify
// may hold the lock that f waits for while it waits to send an error (it
// does when it fails to remove the watch of a moved directory): the reader
// keeps taking errors until f is done.
func (w *Watcher) whileReading(fsw *fsnotify.Watcher, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	errs := fsw.Errors
	for {
		select {
		case <-done:
			return
		case err, ok := <-errs:
			if !ok {
				errs = nil // closed: wait for f alone
				continue
			}
			w.watchError(err)
		}
	}
}

// markSwap handles the arrival of the link name (a ..data, now naming
// target) by a rename: it marks dirty every volume that watches its
// directory, except one whose last hash, done or under way, already read
// ..data as naming target: the swap happened before that hash read ..data
// (a hash started by the event of ..data_tmp often sees the swap), so a
// second hash would only read the same new version again.
func (w *Watcher) markSwap(name, target string) {
	w.mu.Lock()
	var dirty []int
	for _, t := range w.holdersOf(filepath.Dir(name)) {
		if seen := w.vols[t.idx].seen.Load(); seen == nil || *seen != target {
			dirty = append(dirty, t.idx)
		}
	}
	w.mu.Unlock()
	for _, i := range dirty {
		v := w.vols[i]
		v.noteSwap(target)
		w.kick(v)
	}
}

// versionDir reports whether name is one the kubelet gives its version
// directories: ..YYYY_MM_DD_HH_MM_SS.<digits>. (No regular expression: one
// compiled at init cost every start 11 KB and 46 µs.)
func versionDir(name string) bool {
	const layout = "..0000_00_00_00_00_00."
	if len(name) <= len(layout) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case i >= len(layout) || layout[i] == '0':
			if c < '0' || c > '9' {
				return false
			}
		case c != layout[i]:
			return false
		}
	}
	return true
}

// otherVersion reports whether name is a kubelet version directory that no
// app can see: one that the ..data link beside it does not name (the next
// version being written, or the last one being deleted), and that no volume
// watches. Its creation and deletion make no volume dirty: they would cost a
// whole hash each and cannot change what any volume shows. The swap of
// ..data, which makes a version visible, has its own event.
func (w *Watcher) otherVersion(name string) bool {
	base := filepath.Base(name)
	if !versionDir(base) {
		return false
	}
	target, err := os.Readlink(filepath.Join(filepath.Dir(name), dataLink))
	if err != nil || target == base || !versionDir(target) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.holdersOf(name)) == 0
}

// dropOldVersions takes out of the index, at once, the watches on the
// version directories of the volume root that ..data no longer names, and
// returns them for the caller to remove: the kubelet is about to delete
// them, and a watch there would report every file it deletes. The volume's
// goroutine forgets them at its next refresh. target is what ..data names.
func (w *Watcher) dropOldVersions(root, target string) []rename {
	current := filepath.Join(root, target)
	prefix := root + string(filepath.Separator) + ".."
	var drop []rename
	w.mu.Lock()
	if len(w.holdersOf(root)) > 0 {
		for p, holders := range w.index {
			if !strings.HasPrefix(p, prefix) || p == current || strings.HasPrefix(p, current+string(filepath.Separator)) {
				continue
			}
			for i := range holders {
				drop = append(drop, w.release(p, i))
			}
		}
	}
	w.mu.Unlock()
	return drop
}

// watchError handles an error reported by inotify. A queue overflow means
// events were lost: every volume is re-hashed.
func (w *Watcher) watchError(err error) {
	w.errorsTotal.Inc()
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		level.Warn(w.logger).Log("msg", "inotify event queue overflowed, re-hashing every volume", "err", err)
		for _, v := range w.vols {
			v.full.Store(true)
			w.mark(v)
		}
		return
	}
	level.Warn(w.logger).Log("msg", "inotify error, continuing", "err", err)
}

// markGone handles the move or deletion of a watched directory itself: its
// watch is removed (see gone), and the volumes that held it forget it and
// are marked dirty, so that they add it again if it is still wanted.
func (w *Watcher) markGone(fsw *fsnotify.Watcher, name string) {
	w.mu.Lock()
	_, held := w.dirOf[name]
	w.mu.Unlock()
	if !held {
		return // a file, or ..data_tmp moved to ..data: nothing to take out
	}
	var ts []target
	w.whileReading(fsw, func() {
		w.fsMu.Lock()
		defer w.fsMu.Unlock()
		w.mu.Lock()
		var watch string
		ts, watch = w.gone(name)
		w.mu.Unlock()
		if watch != "" {
			_ = fsw.Remove(watch)
		}
	})
	for _, t := range ts {
		w.markAt(w.vols[t.idx], t.path)
	}
}

// holds reports whether the volume idx still holds the inotify watch p.
func (w *Watcher) holds(p string, idx int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index[p][idx]
}

// markPath marks dirty every volume that watches name or its parent.
func (w *Watcher) markPath(name string) {
	w.mu.Lock()
	ts := w.eventTargets(name)
	w.mu.Unlock()
	for _, t := range ts {
		w.markAt(w.vols[t.idx], t.path)
	}
}

// mark makes v dirty: its goroutine re-hashes it (once more, if it is
// hashing it now), walking all of it.
func (w *Watcher) mark(v *volume) { w.markAt(v, "") }

// markAt makes v dirty for a change at the real path name, or anywhere if
// name is "".
func (w *Watcher) markAt(v *volume, name string) {
	v.note(name)
	w.kick(v)
}

// kick has v's goroutine re-hash it, once more if it is hashing it now.
func (w *Watcher) kick(v *volume) {
	v.pending.Add(1)
	select {
	case v.kick <- struct{}{}:
		w.run(v)
	default:
		v.pending.Add(-1) // already dirty
	}
}

// note records that a change happened at the real path name, or anywhere
// if name is "", for the next hash of v to take.
func (v *volume) note(name string) {
	v.dirtyMu.Lock()
	defer v.dirtyMu.Unlock()
	switch {
	case v.dirtyAll:
	case name == "" || len(v.dirtyPaths) >= maxDirtyPaths:
		v.dirtyAll, v.dirtyPaths = true, nil
	default:
		if v.dirtyPaths == nil {
			v.dirtyPaths = make(map[string]bool)
		}
		v.dirtyPaths[name] = true
	}
}

// noteSwap records that ..data was swapped to target, for the next hash of
// v to take (it walks the volume).
func (v *volume) noteSwap(target string) {
	v.dirtyMu.Lock()
	defer v.dirtyMu.Unlock()
	v.swapTo = target
}

// takeDirty returns, and forgets, the paths noted since it was last
// called, and whether a change was noted without a path.
func (v *volume) takeDirty() (paths []string, all bool) {
	v.dirtyMu.Lock()
	defer v.dirtyMu.Unlock()
	for p := range v.dirtyPaths {
		paths = append(paths, p)
	}
	all = v.dirtyAll || v.swapTo != ""
	v.dirtyPaths, v.dirtyAll, v.swapTo = nil, false, ""
	return paths, all
}

// markedSince reports whether v was marked since its hash took the marks,
// other than by the swap of ..data to version, which that hash read. If
// not, the kick still pending is dropped: the hash has seen what it was
// for. The reader's events of one burst (the new version's directory, then
// ..data) often come after the volume's goroutine was started by the first
// of them and took its mark: the mark noted before that, or the swap to
// the very version read, does not make the hash stale.
func (v *volume) markedSince(version string) bool {
	v.dirtyMu.Lock()
	defer v.dirtyMu.Unlock()
	if v.dirtyAll || len(v.dirtyPaths) > 0 || (v.swapTo != "" && v.swapTo != version) {
		return true
	}
	// A marker notes before it kicks, and notes under dirtyMu: a kick
	// pending now is for a mark already taken, and one noted after this
	// finds the channel empty.
	v.swapTo = ""
	select {
	case <-v.kick:
		v.pending.Add(-1)
	default:
	}
	return false
}

// idle reports whether no volume is dirty or being re-hashed because it
// was dirty. Tests use it as a sync point.
func (w *Watcher) idle() bool {
	for _, v := range w.vols {
		if v.pending.Load() != 0 {
			return false
		}
	}
	return true
}

// refresh re-hashes v, updates its watches and sends a Change if what the
// app sees differs from what was last reported. On the initial refresh of a
// directory that exists at start, the hash is only recorded.
func (w *Watcher) refresh(ctx context.Context, v *volume, initial bool) {
	defer w.updateNeedPoll(v)
	paths, all := v.takeDirty()
	if v.full.Swap(false) {
		v.cache.old = nil
		all = true
	}
	if t := v.tree; t != nil && !all && !initial && !v.polling && w.inotify() != nil {
		if w.refreshTree(ctx, v, t, paths) {
			return
		}
	}
	v.tree = nil
	// Lazy: a state that is not reported need not be read, unless it has
	// lasted long enough to be reported anyway.
	lazy := !initial && (v.partialSince.IsZero() || time.Since(v.partialSince) < w.settle)
	for attempt := 1; ; attempt++ {
		ahead := w.watchAhead(v)
		w.hashesTotal.Inc()
		res, err := w.hasher.hashWith(v.path, hashOpts{cache: &v.cache, lazy: lazy, seen: &v.seen, ahead: ahead, last: v.root})
		if err != nil {
			v.seen.Store(nil)
			v.cache.drop()
			v.tree = nil
			w.lost(v, err, initial)
			return
		}
		v.root = rootSeen{res.root, res.rootID}
		if res.skipped {
			v.cache.drop()
		} else {
			v.cache.commit()
		}
		if !v.present {
			v.present = true
			v.rootErr = ""
			w.watchedDirs.Inc()
			if v.waiting {
				v.waiting = false
				level.Info(w.logger).Log("msg", "volume found, watching it", "dir", v.dir)
			}
		}
		if res.skipped {
			// Not read: the watches and the problems logged stay as they
			// were until the volume is read again.
			w.judge(ctx, v, res, initial)
			return
		}
		// A broken volume keeps the watches it had: where it was whole is
		// where its repair shows.
		if w.takeIn(v, res, res.broken != "") && attempt < maxRehashes {
			continue // a new directory may have been filled before its watch existed
		}
		if !v.polling {
			v.tree = res.tree
		}
		w.judge(ctx, v, res, initial)
		return
	}
}

// refreshTree re-hashes the plain tree t of v, reading only what paths (as
// events named them) show now, and reports whether it did; if not, the
// volume is to be walked.
func (w *Watcher) refreshTree(ctx context.Context, v *volume, t *plainTree, paths []string) bool {
	for attempt := 1; ; attempt++ {
		res, ok := w.hasher.update(t, paths)
		if !ok {
			return false
		}
		w.treeUpdates.Add(1)
		v.tree = res.tree
		if w.takeIn(v, res, false) && attempt < maxRehashes {
			t = res.tree
			continue // a new directory may have been filled before its watch existed
		}
		if v.polling {
			v.tree = nil // no more events: walked from now on
		}
		w.judge(ctx, v, res, false)
		return true
	}
}

// takeIn records what the hash res of v found, its problems and the
// directories to watch (keep: and those watched already), and reports
// whether it added a watch: a new directory may have been filled before
// its watch existed, and the hash is done again.
func (w *Watcher) takeIn(v *volume, res hashResult, keep bool) (added bool) {
	v.watchNeed.Store(int64(len(res.dirs)))
	w.report(v, res.problems)
	return w.updateWatches(v, res.dirs, keep)
}

// judge decides whether the hash res of v is reported: see "What is never
// reported" in the package documentation.
func (w *Watcher) judge(ctx context.Context, v *volume, res hashResult, initial bool) {
	if res.broken != "" {
		v.stopSettle()
		if v.broken == "" { // once until the volume is reported whole again
			v.broken = res.broken
			w.errorsTotal.Inc()
			level.Warn(w.logger).Log("msg", "volume is broken, not reporting it until it is whole again", "dir", v.dir, "reason", res.broken)
		}
		return
	}
	partial := res.partial
	switch {
	case partial != "" || initial || res.sum == v.hash:
	case len(v.kick) > 0 && v.markedSince(res.version):
		// Marked dirty again while it was hashed: what was hashed is
		// already stale, and the next hash follows at once.
		partial = reasonStale
	case res.version != "" && res.version == v.version && res.versionSum != v.versionSum:
		partial = "the version directory that ..data names changed in place (the kubelet never does that)"
	case res.version == "" && v.version != "":
		partial = "..data vanished (the volume is being deleted or written for the first time)"
	case res.version != "" && res.sum == emptyHash:
		partial = "the kubelet volume shows no item (an rm -rf half-way, or an emptied ConfigMap)"
	}
	if partial != "" && !initial {
		now := time.Now()
		if v.partialSince.IsZero() {
			v.partialSince = now
			v.settleTimer = time.AfterFunc(w.settle, func() { w.mark(v) })
			level.Debug(w.logger).Log("msg", "volume is half-way through an update, waiting for the next step", "dir", v.dir, "reason", partial)
		}
		if now.Sub(v.partialSince) < w.settle {
			return
		}
		if res.skipped {
			w.mark(v) // read it in full, then report it
			return
		}
		if partial == reasonStale || partial == reasonVanished {
			// Busy, not inconsistent: a file rewritten all the time.
			level.Debug(w.logger).Log("msg", fmt.Sprintf("volume kept changing for %s, reporting it", w.settle), "dir", v.dir, "reason", partial)
		} else {
			w.errorsTotal.Inc()
			level.Warn(w.logger).Log("msg", fmt.Sprintf("volume still looks half-way through an update after %s, reporting what its visible names show", w.settle), "dir", v.dir, "reason", partial)
		}
	}
	v.stopSettle()
	if v.broken != "" {
		v.broken = ""
		level.Info(w.logger).Log("msg", "volume complete again", "dir", v.dir)
	}

	w.reportUnreadable(v, res.unreadable, initial)
	changed := res.sum != v.hash
	v.hash, v.version, v.versionSum = res.sum, res.version, res.versionSum
	if changed && !initial {
		w.send(ctx, Change{Dir: v.dir, Hash: res.sum, Time: time.Now()})
	}
}

// watchAhead adds, before a hash, the inotify watches on the volume's root
// and on the version directory that ..data names, where v does not hold
// them yet: a directory first watched after it was read must be read again
// (see refresh), which would read every file of a volume twice at start and
// of each new kubelet version on every update. It returns what it read of
// ..data, for the hash to take as its own first read, or nil.
func (w *Watcher) watchAhead(v *volume) *linkRead {
	if v.polling || w.inotify() == nil {
		return nil
	}
	// The root as the last hash resolved it (if it moved since, the hash
	// finds out), or as it is now before the first.
	root := v.root.real
	// updateWatches skips what v holds already.
	want := make(map[string]fileID, 2)
	if root == "" {
		real, info, err := resolveRoot(v.path)
		if err != nil {
			return nil
		}
		root = real
		want[root] = idOf(root, info)
	}
	target, _ := os.Readlink(filepath.Join(root, dataLink))
	read := &linkRead{root: root, target: target}
	if v.root.real != "" && (target == "" || plainName(target)) {
		if _, ok := v.watches[filepath.Join(root, target)]; ok {
			return read // watched already (the root itself if there is no ..data)
		}
	}
	if target != "" {
		if dir, info, err := resolveVersion(root, target); err == nil {
			want[dir] = idOf(dir, info)
			read.version, read.versionInfo = dir, info
		}
	}
	w.updateWatches(v, want, true)
	return read
}

// stopSettle forgets that v was seen half-way through an update.
func (v *volume) stopSettle() {
	v.partialSince = time.Time{}
	if v.settleTimer != nil {
		v.settleTimer.Stop()
		v.settleTimer = nil
	}
}

// updateNeedPoll records whether v needs the poll ticker, and wakes Run's
// goroutine if that changed.
func (w *Watcher) updateNeedPoll(v *volume) {
	need := v.polling || !v.present || v.broken != "" || !v.partialSince.IsZero()
	if v.needPoll.Swap(need) != need {
		w.poke()
	}
}

func (w *Watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Watcher) send(ctx context.Context, c Change) {
	level.Debug(w.logger).Log("msg", "content changed", "dir", c.Dir, "hash", fmt.Sprintf("%x", c.Hash[:8]))
	w.changesTotal.Inc() // before the send, so that a reader of c sees it counted
	select {
	case w.changes <- c:
	case <-ctx.Done():
	}
}

// lost handles a volume whose root cannot be hashed: it no longer exists,
// is not a directory, or cannot be read. The volume is waited for (polled,
// and its nearest existing parent watched); its last reported hash is
// kept, so that a re-creation with identical content is not a change.
func (w *Watcher) lost(v *volume, err error, initial bool) {
	v.stopSettle()
	if v.present {
		v.present = false
		w.watchedDirs.Dec()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !v.waiting {
			v.waiting = true
			msg := "volume does not exist yet, waiting for it"
			if !initial {
				msg = "volume removed, waiting for it"
			}
			level.Info(w.logger).Log("msg", msg, "dir", v.dir, "poll_interval", w.pollInt)
		}
	case errors.Is(err, errNotDir) || errors.Is(err, syscall.ENOTDIR):
		if v.rootErr != err.Error() {
			v.rootErr = err.Error()
			v.waiting = true
			w.errorsTotal.Inc()
			level.Warn(w.logger).Log("msg", "volume is a file, not a directory, waiting for a directory: "+subPathHint, "dir", v.dir)
		}
	default:
		if v.rootErr != err.Error() {
			v.rootErr = err.Error()
			v.waiting = true
			w.errorsTotal.Inc()
			level.Warn(w.logger).Log("msg", fmt.Sprintf("cannot read volume, retrying every %s", w.pollInt), "dir", v.dir, "err", err)
		}
	}

	// Watch the nearest existing parent for a faster pickup than polling.
	want := map[string]fileID{}
	for p := filepath.Dir(v.path); ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if info, err := os.Stat(real); err == nil && info.IsDir() {
				want[real] = idOf(real, info)
				break
			}
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	v.watchNeed.Store(int64(len(want)))
	if w.updateWatches(v, want, false) && len(want) > 0 {
		// The directory may have appeared before the parent's watch
		// existed: look again.
		w.mark(v)
	}
}

// report logs and counts the problems of a hash that were not already
// reported for the volume; a problem that went away is forgotten, so that
// it is reported again if it comes back.
func (w *Watcher) report(v *volume, problems []problem) {
	now := make(map[string]bool, len(problems))
	for _, p := range problems {
		key := p.path + "\x00" + problemKind(p.err)
		now[key] = true
		if v.logged[key] {
			continue
		}
		w.errorsTotal.Inc()
		if errors.Is(p.err, fs.ErrPermission) {
			level.Warn(w.logger).Log("msg", "cannot read file, watching its size, modification time and inode instead of its content; to fix, "+unreadableHint, "dir", v.dir, "path", p.path, "err", p.err)
			continue
		}
		level.Warn(w.logger).Log("msg", "cannot hash entry, leaving its content out", "dir", v.dir, "path", p.path, "err", p.err)
	}
	v.logged = now
}

// reportUnreadable logs, at warning level, every unreadable file whose size,
// modification time or inode changed since the last reported hash, and
// records what is seen now.
func (w *Watcher) reportUnreadable(v *volume, now map[string]fileMeta, initial bool) {
	if !initial {
		for rel, m := range now {
			if before, ok := v.unreadable[rel]; ok && before != m {
				level.Warn(w.logger).Log("msg", "unreadable file changed, reloading on its size, modification time or inode alone; to have its content compared, "+unreadableHint,
					"dir", v.dir, "path", rel, "change", before.diff(m))
			}
		}
	}
	v.unreadable = now
}

func problemKind(err error) string {
	switch {
	case errors.Is(err, errSymlinkLoop):
		return "loop"
	case errors.Is(err, errDanglingLink):
		return "dangling"
	case errors.Is(err, fs.ErrPermission):
		return "permission"
	default:
		return "other"
	}
}

// updateWatches makes v hold inotify watches on exactly the paths of want
// (with keep, on those too that it holds already), and reports whether a
// watch was added. If a watch cannot be added for a
// reason other than the directory having vanished meanwhile (the watch
// limit is reached, the filesystem does not support inotify), v falls back
// to polling; a polled volume tries inotify again once per poll interval.
func (w *Watcher) updateWatches(v *volume, want map[string]fileID, keep bool) (added bool) {
	fsw := w.inotify()
	if fsw == nil {
		return false
	}
	retry := v.polling
	if retry {
		if time.Now().Before(v.retryAt) {
			return false
		}
		v.retryAt = time.Now().Add(w.pollInt / 2) // at most once per poll tick
	}
	for p, id := range want {
		if have, ok := v.watches[p]; ok && have == id && w.holds(p, v.idx) {
			continue
		}
		err := w.addHeld(fsw, v, p, id)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				added = true // vanished since the walk: look again
				continue
			}
			w.fallBack(v, err)
			return false
		}
		added = true
	}
	for p := range v.watches {
		if _, ok := want[p]; !ok && !keep {
			w.unwatch(fsw, v, p)
		}
	}
	if retry {
		v.polling = false
		level.Info(w.logger).Log("msg", "watching with inotify again instead of polling", "dir", v.dir, "watches", len(v.watches))
		return true // look again: changes may have come between the poll and the watches
	}
	return added
}

// unwatch drops v's watch on p, and the inotify watch if no volume holds it.
func (w *Watcher) unwatch(fsw *fsnotify.Watcher, v *volume, p string) {
	delete(v.watches, p)
	w.fsMu.Lock()
	defer w.fsMu.Unlock()
	w.mu.Lock()
	r := w.release(p, v.idx)
	w.mu.Unlock()
	w.apply(fsw, r)
}

// addHeld adds the inotify watch on p, the directory id, for v.
func (w *Watcher) addHeld(fsw *fsnotify.Watcher, v *volume, p string, id fileID) error {
	w.fsMu.Lock()
	defer w.fsMu.Unlock()
	w.mu.Lock()
	r := w.prepare(p, id)
	w.mu.Unlock()
	w.apply(fsw, r)
	if err := w.addWatch(fsw, p); err != nil {
		return err
	}
	w.mu.Lock()
	w.hold(p, id, v.idx)
	w.mu.Unlock()
	v.watches[p] = id
	return nil
}

// fallBack makes v polled instead of watched by inotify, until a retry
// succeeds. The first time the watch limit is hit, Run logs one line for
// all volumes.
func (w *Watcher) fallBack(v *volume, err error) {
	fsw := w.inotify()
	for p := range v.watches {
		w.unwatch(fsw, v, p)
	}
	if v.polling {
		return // a retry that failed again
	}
	v.polling = true
	v.retryAt = time.Now().Add(w.pollInt / 2) // at most once per poll tick
	w.errorsTotal.Inc()
	if errors.Is(err, syscall.ENOSPC) {
		w.mu.Lock()
		if w.limitErr == nil {
			w.limitErr = err
		}
		w.mu.Unlock()
		w.poke()
		level.Debug(w.logger).Log("msg", fmt.Sprintf("inotify watch limit reached, polling every %s", w.pollInt), "dir", v.dir, "err", err)
		return
	}
	level.Warn(w.logger).Log("msg", fmt.Sprintf("inotify unavailable, polling every %s and trying inotify again as often", w.pollInt), "dir", v.dir, "err", err)
}

// logLimit logs, once, that the inotify watch limit was reached, with the
// number of watches the volumes need.
func (w *Watcher) logLimit() {
	w.mu.Lock()
	err := w.limitErr
	if err == nil || w.limitLogged {
		w.mu.Unlock()
		return
	}
	w.limitLogged = true
	w.mu.Unlock()
	var need int64
	for _, v := range w.vols {
		need += v.watchNeed.Load()
	}
	level.Warn(w.logger).Log("msg", fmt.Sprintf("inotify watch limit reached: raise the sysctl fs.inotify.max_user_watches (now %s; hotreload needs %d watches for its volumes, on top of other processes of the same user); polling the affected volumes every %s and trying inotify again as often",
		sysctl("fs/inotify/max_user_watches"), need, w.pollInt),
		"needed", strconv.FormatInt(need, 10), "err", err)
}
