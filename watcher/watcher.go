// Package watcher watches directories, such as Kubernetes ConfigMap and
// Secret volumes, and reports when their content changes.
//
// It watches directories, never single files, with inotify (fsnotify), and
// decides by content: an event only marks a volume dirty, and one goroutine
// re-hashes dirty volumes (see HashDir) and sends a Change when a hash
// differs from the last one seen. Attribute-only events, reads, and a
// kubelet swap to identical content therefore change nothing, and no event
// is ever filtered by its op name. Where inotify cannot be used the watcher
// polls. A volume that does not exist yet is waited for, and one that is
// deleted is waited for again.
//
// inotify watches sit on real directories: the volume's root, every
// directory the last hash walked (the kubelet's current version directory,
// subdirectories, directories reached through symlinks) and the directories
// of files reached through symlinks. A --volume-dir that is itself a symlink
// re-pointed elsewhere is seen only by the resync.
package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// maxRehashes bounds how often one refresh re-hashes a volume because its
// watch set grew (a new directory may have been filled before its watch
// existed).
const maxRehashes = 3

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
	changes chan Change
	ready   atomic.Bool
	running atomic.Bool

	// Seams for tests; set by New.
	hasher   hasher
	newWatch func() (*fsnotify.Watcher, error)
	addWatch func(fsw *fsnotify.Watcher, path string) error

	changesTotal prometheus.Counter
	eventsTotal  prometheus.Counter
	errorsTotal  prometheus.Counter
	watchedDirs  prometheus.Gauge

	// Owned by Run's goroutine.
	fsw  *fsnotify.Watcher // nil when inotify is not used at all
	vols []*volume

	// kick wakes Run's goroutine when a volume became dirty.
	kick chan struct{}

	mu     sync.Mutex
	queue  []int                   // dirty volumes, in the order they became dirty
	queued []bool                  // whether a volume is in queue
	index  map[string]map[int]bool // inotify watch path -> volumes that hold it
}

// volume is the state of one watched directory, owned by Run's goroutine.
type volume struct {
	idx     int
	dir     string // as given
	path    string // cleaned
	present bool   // exists, was hashed, and is watched (inotify or polling)
	polling bool   // watched by polling instead of inotify
	hash    [32]byte
	watches map[string]fileID // inotify watches this volume holds
	logged  map[string]bool   // problems already logged, by kind and path
	waiting bool              // the "waiting for it" line was logged
	rootErr string            // the last root error logged
}

// New returns a Watcher for opts. It fails, with one line naming the flag,
// if no directory is given or a path exists but is not a directory; a
// directory that does not exist yet is not an error. logger may be nil; reg
// may be nil, then the metrics are not registered.
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Watcher, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if len(opts.Dirs) == 0 {
		return nil, errors.New("--volume-dir: at least one directory is required")
	}
	if opts.ResyncInterval < 0 {
		return nil, fmt.Errorf("--resync-interval %s: must not be negative", opts.ResyncInterval)
	}
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("--poll-interval %s: must not be negative", opts.PollInterval)
	}
	var dirs []string
	seen := make(map[string]bool)
	for _, d := range opts.Dirs {
		if d == "" {
			return nil, errors.New("--volume-dir: must not be empty")
		}
		info, err := os.Stat(d)
		switch {
		case err == nil && !info.IsDir():
			return nil, fmt.Errorf("--volume-dir %s: %w: watch the directory that holds it (a subPath mount never updates)", d, errNotDir)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("--volume-dir %s: %w", d, err)
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
		logger:   log.With(logger, "component", "watcher"),
		dirs:     dirs,
		resync:   opts.ResyncInterval,
		pollInt:  poll,
		poll:     opts.Poll,
		changes:  make(chan Change, len(dirs)),
		hasher:   hasher{open: openRegular},
		newWatch: fsnotify.NewWatcher,
		addWatch: func(fsw *fsnotify.Watcher, path string) error { return fsw.Add(path) },
		kick:     make(chan struct{}, 1),
		index:    make(map[string]map[int]bool),
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
			Help: "Watch errors: unreadable entries, symlink loops, dangling links, event queue overflows, inotify failures.",
		}),
		watchedDirs: f.NewGauge(prometheus.GaugeOpts{
			Name: "hotreload_watched_dirs",
			Help: "Volume directories currently watched, by inotify or by polling.",
		}),
	}
	return w, nil
}

// Changes returns the channel on which Run sends one Change each time a
// directory's content hash differs from the last one seen. It is never
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

	if !w.poll {
		fsw, err := w.newWatch()
		if err != nil {
			w.errorsTotal.Inc()
			level.Warn(w.logger).Log("msg", fmt.Sprintf("inotify unavailable, polling every %s", w.pollInt), "err", err)
		} else {
			w.fsw = fsw
		}
	}
	var wg sync.WaitGroup
	if w.fsw != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.readEvents(w.fsw)
		}()
	}
	defer func() {
		if w.fsw != nil {
			w.fsw.Close()
		}
		wg.Wait()
		w.watchedDirs.Set(0)
	}()

	w.mu.Lock()
	w.queued = make([]bool, len(w.dirs))
	w.mu.Unlock()
	for i, d := range w.dirs {
		v := &volume{
			idx:     i,
			dir:     d,
			path:    filepath.Clean(d),
			polling: w.fsw == nil,
			hash:    emptyHash,
			watches: make(map[string]fileID),
			logged:  make(map[string]bool),
		}
		w.vols = append(w.vols, v)
		if v.polling && w.poll {
			level.Info(w.logger).Log("msg", fmt.Sprintf("polling every %s", w.pollInt), "dir", d)
		}
	}
	for _, v := range w.vols {
		w.refresh(ctx, v, true)
	}
	w.ready.Store(true)
	level.Debug(w.logger).Log("msg", "watcher ready", "dirs", len(w.vols))

	pollTicker := time.NewTicker(w.pollInt)
	defer pollTicker.Stop()
	var resync <-chan time.Time
	if w.resync > 0 {
		t := time.NewTicker(w.resync)
		defer t.Stop()
		resync = t.C
	}

	for {
		if i, ok := w.next(); ok {
			w.refresh(ctx, w.vols[i], false)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		case <-resync:
			for _, v := range w.vols {
				w.mark(v.idx)
			}
		case <-pollTicker.C:
			for _, v := range w.vols {
				if v.polling || !v.present {
					w.mark(v.idx)
				}
			}
		}
	}
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
			w.markPath(ev.Name)
		case err, ok := <-fsw.Errors:
			if !ok {
				return
			}
			w.watchError(err)
		}
	}
}

// watchError handles an error reported by inotify. A queue overflow means
// events were lost: every volume is re-hashed.
func (w *Watcher) watchError(err error) {
	w.errorsTotal.Inc()
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		level.Warn(w.logger).Log("msg", "inotify event queue overflowed, re-hashing every volume", "err", err)
		for i := range w.dirs {
			w.mark(i)
		}
		return
	}
	level.Warn(w.logger).Log("msg", "inotify error, continuing", "err", err)
}

// markPath marks dirty every volume that watches name or its parent.
func (w *Watcher) markPath(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range []string{name, filepath.Dir(name)} {
		for i := range w.index[p] {
			w.markLocked(i)
		}
	}
}

func (w *Watcher) mark(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.markLocked(i)
}

func (w *Watcher) markLocked(i int) {
	if i >= len(w.queued) || w.queued[i] {
		return
	}
	w.queued[i] = true
	w.queue = append(w.queue, i)
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// next pops the volume that became dirty first.
func (w *Watcher) next() (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return 0, false
	}
	i := w.queue[0]
	w.queue = w.queue[1:]
	w.queued[i] = false
	return i, true
}

// refresh re-hashes v, updates its watches and sends a Change if its hash
// differs from the last one known. On the initial refresh of a directory
// that exists at start, the first hash is only recorded.
func (w *Watcher) refresh(ctx context.Context, v *volume, initial bool) {
	for attempt := 1; attempt <= maxRehashes; attempt++ {
		res, err := w.hasher.hash(v.path)
		if err != nil {
			w.lost(v, err, initial)
			return
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
		w.report(v, res.problems)
		grew := w.updateWatches(v, res.dirs)

		if res.sum != v.hash {
			v.hash = res.sum
			if !initial || attempt > 1 {
				w.send(ctx, Change{Dir: v.dir, Hash: res.sum, Time: time.Now()})
			}
		}
		if !grew {
			return
		}
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
// and its nearest existing parent watched); its last known hash is kept, so
// that a re-creation with identical content is not a change.
func (w *Watcher) lost(v *volume, err error, initial bool) {
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
			level.Warn(w.logger).Log("msg", "volume is a file, not a directory, waiting for a directory (a subPath mount never updates)", "dir", v.dir)
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
	if w.fsw != nil && !v.polling {
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
	}
	if w.updateWatches(v, want) && len(want) > 0 {
		// The directory may have appeared before the parent's watch
		// existed: look again.
		w.mark(v.idx)
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
		level.Warn(w.logger).Log("msg", "cannot hash entry, leaving its content out", "dir", v.dir, "path", p.path, "err", p.err)
	}
	v.logged = now
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

// updateWatches makes v hold inotify watches on exactly the paths of want,
// and reports whether a watch was added. If a watch cannot be added for a
// reason other than the directory having vanished meanwhile (the watch
// limit is reached, the filesystem does not support inotify), v falls back
// to polling.
func (w *Watcher) updateWatches(v *volume, want map[string]fileID) (added bool) {
	if w.fsw == nil {
		return false
	}
	if v.polling {
		want = nil
	}
	for p, id := range want {
		if have, ok := v.watches[p]; ok && have == id {
			continue
		}
		if err := w.addWatch(w.fsw, p); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				added = true // vanished since the walk: look again
				continue
			}
			w.fallBack(v, err)
			return false
		}
		w.mu.Lock()
		if w.index[p] == nil {
			w.index[p] = make(map[int]bool)
		}
		w.index[p][v.idx] = true
		w.mu.Unlock()
		v.watches[p] = id
		added = true
	}
	for p := range v.watches {
		if _, ok := want[p]; !ok {
			w.unwatch(v, p)
		}
	}
	return added
}

// unwatch drops v's watch on p, and the inotify watch if no volume holds it.
func (w *Watcher) unwatch(v *volume, p string) {
	delete(v.watches, p)
	w.mu.Lock()
	holders := w.index[p]
	delete(holders, v.idx)
	last := len(holders) == 0
	if last {
		delete(w.index, p)
	}
	w.mu.Unlock()
	if last {
		// inotify drops the watch of a deleted directory by itself; then
		// Remove reports that it has none, which is fine.
		_ = w.fsw.Remove(p)
	}
}

// fallBack makes v polled instead of watched by inotify, for good.
func (w *Watcher) fallBack(v *volume, err error) {
	v.polling = true
	for p := range v.watches {
		w.unwatch(v, p)
	}
	w.errorsTotal.Inc()
	level.Warn(w.logger).Log("msg", fmt.Sprintf("inotify unavailable, polling every %s", w.pollInt), "dir", v.dir, "err", err)
}
