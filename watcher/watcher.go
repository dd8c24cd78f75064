package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// DefaultPollInterval is the poll period used when Options.PollInterval is 0.
const DefaultPollInterval = 5 * time.Second

// settleTimeout bounds how long a volume that looks half-way through an
// update is waited for before what it shows is reported anyway. The
// kubelet's steps follow each other within milliseconds.
const settleTimeout = 2 * time.Second

// maxDirtyDirs bounds the directories that events named which a volume
// keeps between two hashes; past it, the volume is walked.
const maxDirtyDirs = 1024

// reasonVanished says that a volume was busy, not inconsistent.
const reasonVanished = "an entry vanished while it was read"

// Change says that the content of one watched directory differs from what
// the watcher last reported.
type Change struct {
	Dir  string    // the directory as given in Options
	Hash [32]byte  // SHA-256 of the directory's content, see HashDir
	Time time.Time // when the change was detected
}

// DirError is a problem with one of the directories of Options that New
// found. The package names no command-line flag; a command that takes the
// directories as a flag names it (hotreload's internal/config:
// --volume-dir).
type DirError struct {
	Dir string // as given
	Err error
}

func (e *DirError) Error() string { return fmt.Sprintf("option Dirs %q: %v", e.Dir, e.Err) }

func (e *DirError) Unwrap() error { return e.Err }

// Options configures a Watcher.
type Options struct {
	// Dirs are the volume directories. A path given twice is watched
	// once. One that is missing for longer than 30 seconds is logged at
	// warning level, exported, and makes Ready fail until it appears.
	Dirs []string
	// OptionalDirs are watched like Dirs, but may be missing for good.
	OptionalDirs []string
	// ResyncInterval is how often the stats of every directory are
	// compared with what its last hash saw, and a directory whose stats
	// differ is hashed again: a safety net for missed events; 0 turns it
	// off.
	ResyncInterval time.Duration
	// PollInterval is the poll period for directories that inotify cannot
	// watch, or that do not exist yet; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// Poll never uses inotify and always polls, for filesystems that do
	// not support it.
	Poll bool
}

// Watcher watches volume directories and reports content changes on
// Changes. Create it with New and start it with Run.
//
// The path of a change, in this file: an inotify event in a directory that
// a volume's last hash walked marks the volume dirty (event, mark); a
// goroutine of the volume's own hashes what the app sees (refresh, with
// hash.go); judge compares the result with what was last reported and, if
// the volume is whole and differs, sends a Change. poll.go catches what
// inotify does not report, missing.go waits for a volume that is not
// there, cache.go keeps what a hash saw for the next.
type Watcher struct {
	logger   log.Logger
	vols     []*volume
	resync   time.Duration
	pollInt  time.Duration
	poll     bool
	settle   time.Duration // settleTimeout; tests shorten it
	grace    time.Duration // missingGrace; tests shorten it
	repeat   time.Duration // missingRepeat; tests shorten it
	changes  chan Change
	readyc   chan struct{} // closed when every volume had its first hash
	started  atomic.Bool
	ctx      context.Context // Run's; set before any goroutine starts
	wake     chan struct{}   // a volume's need of the poll ticker changed
	ticking  atomic.Bool     // the poll ticker runs (for tests)
	runners  sync.WaitGroup  // the volumes' goroutines
	readers  sync.WaitGroup  // the inotify event readers
	firstMap map[string][32]byte

	// Seams for tests; set by New.
	hasher     hasher
	newInotify func() (*inotify, error)
	addWatch   func(in *inotify, dir string) (int, error)

	changesTotal prometheus.Counter
	eventsTotal  prometheus.Counter
	errorsTotal  prometheus.Counter
	hashesTotal  prometheus.Counter
	watchedDirs  prometheus.Gauge
	missingDirs  *prometheus.GaugeVec

	mu          sync.Mutex
	in          *inotify       // nil while inotify is not used
	watches     map[int]*watch // by watch descriptor
	limitErr    error          // the first "watch limit reached" error
	limitLogged bool
	stopped     bool
}

// volume is one watched directory. The fields under w.mu are shared; the
// rest belongs to the goroutine that hashes the volume, one at a time.
type volume struct {
	dir      string // as given
	path     string // cleaned
	optional bool

	// Under w.mu.
	dirty, running bool
	dirtyDirs      map[string]bool // the directories events named since the last hash took them
	walkAll        bool            // a mark named no directory: the next hash walks the volume
	poll           int
	seen           *seen  // what the last hash saw (read by the resync)
	watchNeed      int    // directories the last hash wanted watched
	missing        string // why Ready fails: missing beyond the grace period
	wds            map[int]bool

	// The hashing goroutine's.
	tree         *plainTree // the last hash's, if the volume is a plain tree (plain.go)
	present      bool       // exists and was hashed
	polling      bool       // polled instead of watched by inotify
	retryAt      time.Time
	hash         [32]byte // what was last reported (or found at start)
	version      string   // ..data's target then
	versionSum   [32]byte
	unreadable   map[string]fileMeta
	logged       map[string]bool // problems logged, by path and kind
	broken       string          // the broken state last logged
	partialSince time.Time       // when the volume was first seen half-way through an update
	settleTimer  *time.Timer
	waiting      bool   // the "waiting for it" line was logged
	rootErr      string // the last root error logged
	missingSince time.Time
	missingTimer *time.Timer
	nextWarn     time.Time // of the missing volume's warning; zero before the first
}

// New returns a Watcher for opts. It fails, with one line naming the option
// (a *DirError for a directory), if no directory is given or a path exists
// but is not a directory; a directory that does not exist yet is not an
// error. logger may be nil; reg may be nil, then the metrics are not
// registered.
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Watcher, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if len(opts.Dirs)+len(opts.OptionalDirs) == 0 {
		return nil, errors.New("option Dirs: at least one directory is required")
	}
	if opts.ResyncInterval < 0 {
		return nil, fmt.Errorf("option ResyncInterval %s: must not be negative", opts.ResyncInterval)
	}
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("option PollInterval %s: must not be negative", opts.PollInterval)
	}
	w := &Watcher{
		logger:     log.With(logger, "component", "watcher"),
		resync:     opts.ResyncInterval,
		pollInt:    opts.PollInterval,
		poll:       opts.Poll,
		settle:     settleTimeout,
		grace:      missingGrace,
		repeat:     missingRepeat,
		readyc:     make(chan struct{}),
		wake:       make(chan struct{}, 1),
		firstMap:   make(map[string][32]byte),
		watches:    make(map[int]*watch),
		newInotify: newInotify,
		addWatch:   func(in *inotify, dir string) (int, error) { return in.add(dir) },
	}
	if w.pollInt == 0 {
		w.pollInt = DefaultPollInterval
	}
	seen := make(map[string]bool)
	for i, d := range slices.Concat(opts.Dirs, opts.OptionalDirs) {
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
			w.vols = append(w.vols, &volume{
				dir: d, path: c, optional: i >= len(opts.Dirs),
				running: true, // by Run, until the first hash is done
				hash:    emptyHash, logged: make(map[string]bool),
			})
		}
	}
	w.changes = make(chan Change, len(w.vols))

	f := promauto.With(reg)
	w.changesTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_changes_total",
		Help: "Content changes detected in the watched directories.",
	})
	w.eventsTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_watch_events_total",
		Help: "Filesystem events received.",
	})
	w.errorsTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_watch_errors_total",
		Help: "Watch errors: unreadable entries, symlink loops, dangling links, broken volumes, event queue overflows, inotify failures.",
	})
	w.hashesTotal = f.NewCounter(prometheus.CounterOpts{
		Name: "hotreload_volume_hashes_total",
		Help: "Walks of a volume that hash what an app sees (files whose stat is unchanged are not read again). A kubelet update costs one; an edit in a plain directory none; the resync and the poll walk only a volume whose stats changed.",
	})
	w.watchedDirs = f.NewGauge(prometheus.GaugeOpts{
		Name: "hotreload_watched_dirs",
		Help: "Volume directories currently watched, by inotify or by polling.",
	})
	w.missingDirs = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hotreload_volume_missing",
		Help: "1 for a volume directory (not one declared optional) that has been missing or unreadable for more than 30s; no series otherwise.",
	}, []string{"dir"})
	return w, nil
}

// Changes returns the channel on which Run sends one Change each time a
// directory's content hash differs from the last one reported. It is never
// closed; stop reading when Run's context is done.
func (w *Watcher) Changes() <-chan Change { return w.changes }

// Ready returns nil once every directory that existed when Run started has
// been hashed and is watched, by inotify or by polling, unless a directory
// of Options.Dirs has been missing for longer than the grace period; else
// an error saying why not.
func (w *Watcher) Ready() error {
	select {
	case <-w.readyc:
	default:
		return errors.New("a volume is not watched yet")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.vols {
		if v.missing != "" {
			return errors.New(v.missing)
		}
	}
	return nil
}

// Initial waits until Run has hashed every directory once, then returns
// the content hash of every directory that was whole then, keyed by the
// directory as given: the watcher's own first hashes. A directory missing
// or broken at start is left out; its Change comes when it appears whole.
// Each first hash was taken with the directory's watches in place, so any
// change after it is sent on Changes. It returns ctx's error if ctx is done
// first.
func (w *Watcher) Initial(ctx context.Context) (map[string][32]byte, error) {
	select {
	case <-w.readyc:
		return maps.Clone(w.firstMap), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run watches until ctx is done, then stops every goroutine and watch it
// started and returns nil. It hashes every existing directory first without
// sending a Change: there is no change at start. Run may be called once; a
// second call returns an error at once.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("run watcher: already running")
	}
	w.ctx = ctx
	defer w.stop()
	if !w.poll {
		w.startInotify(true)
	}
	for _, v := range w.vols {
		if w.poll {
			level.Info(w.logger).Log("msg", fmt.Sprintf("polling every %s", w.pollInt), "dir", v.dir)
		}
		w.refresh(v, true, nil)
		if v.present && v.broken == "" {
			w.firstMap[v.dir] = v.hash
		}
	}
	close(w.readyc)
	level.Debug(w.logger).Log("msg", "watcher ready", "dirs", len(w.vols))
	w.mu.Lock()
	for _, v := range w.vols {
		v.running = false
		if v.dirty { // marked during the first hashes
			w.markLocked(v)
		}
	}
	w.mu.Unlock()
	w.loop(ctx)
	return nil
}

// stop stops the volumes' goroutines, their timers and the inotify reader.
func (w *Watcher) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.runners.Wait()
	for _, v := range w.vols {
		v.stopSettle()
		if v.missingTimer != nil {
			v.missingTimer.Stop()
		}
	}
	if w.in != nil {
		w.in.close()
	}
	w.readers.Wait()
	w.watchedDirs.Set(0)
}

// event is one inotify event.
type event struct {
	wd       int
	name     string // of the entry in the watched directory; "" for the directory itself
	overflow bool   // the kernel's queue overflowed: events were lost
	gone     bool   // the watch is gone: its directory was deleted, or the watch removed
	dirMoved bool   // the entry is a directory, moved or removed
}

// event marks dirty every volume that holds the watched directory, unless
// the event cannot change what an app sees.
func (w *Watcher) event(ev event) {
	w.eventsTotal.Inc()
	if ev.overflow {
		w.errorsTotal.Inc()
		level.Warn(w.logger).Log("msg", "inotify event queue overflowed, re-hashing every volume")
		for _, v := range w.vols {
			w.mark(v)
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wt := w.watches[ev.wd]
	if ev.gone {
		delete(w.watches, ev.wd)
	}
	if wt == nil || (ev.name != "" && !shows(wt.dir, ev.name)) {
		return
	}
	for _, v := range wt.vols {
		if ev.name == "" || ev.dirMoved {
			w.markLocked(v) // walked: a plain tree's paths would be stale
		} else {
			w.markDirLocked(v, wt.dir)
		}
	}
}

// shows reports whether an entry named name in the directory dir is part
// of what an app sees. Names starting with ".." are hidden from the hash;
// of them only ..data, and the version directory it names, change what the
// visible names show. The kubelet's other steps (the next version directory
// made and chmod'ed, ..data_tmp, the old version deleted) would each cost a
// hash that reads every file again: BenchmarkChangeCPU's kubelet/files=N
// in test/cost prints the walks per change.
func shows(dir, name string) bool {
	if !hidden(name) || name == dataLink {
		return true
	}
	target, _ := os.Readlink(filepath.Join(dir, dataLink))
	return name == target
}

// mark makes v dirty: its goroutine hashes it (once more, if it is hashing
// it now), walking all of it.
func (w *Watcher) mark(v *volume) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.markLocked(v)
}

func (w *Watcher) markLocked(v *volume) {
	v.walkAll, v.dirtyDirs = true, nil
	w.kickLocked(v)
}

// markDirLocked makes v dirty for a change of the entries of the real
// directory dir (see plain.go).
func (w *Watcher) markDirLocked(v *volume, dir string) {
	switch {
	case v.walkAll:
	case len(v.dirtyDirs) >= maxDirtyDirs:
		v.walkAll, v.dirtyDirs = true, nil
	default:
		if v.dirtyDirs == nil {
			v.dirtyDirs = make(map[string]bool)
		}
		v.dirtyDirs[dir] = true
	}
	w.kickLocked(v)
}

// kickLocked has v's goroutine hash it, starting one if none runs.
func (w *Watcher) kickLocked(v *volume) {
	v.dirty = true
	if v.running || w.stopped {
		return
	}
	// A volume has a goroutine only while it is dirty: an idle one costs
	// no stack.
	v.running = true
	w.runners.Add(1)
	go func() {
		defer w.runners.Done()
		for {
			dirty, ok := w.takeDirty(v)
			if !ok {
				return
			}
			w.refresh(v, false, dirty)
		}
	}()
}

// takeDirty reports whether v is to be hashed again, with the directories
// that events named (nil: walk it all), and clears the mark; if not, the
// volume's goroutine ends.
func (w *Watcher) takeDirty(v *volume) (dirty []string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !v.dirty || w.stopped {
		v.running = false
		return nil, false
	}
	if !v.walkAll {
		dirty = slices.Collect(maps.Keys(v.dirtyDirs))
	}
	v.dirty, v.walkAll, v.dirtyDirs = false, false, nil
	return dirty, true
}

// idle reports whether no volume is dirty or being hashed. Tests use it
// as a sync point.
func (w *Watcher) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.vols {
		if v.dirty || v.running {
			return false
		}
	}
	return true
}

// refresh hashes v, watching what it walks, and sends a Change if what the
// app sees differs from what was last reported. dirty, if not nil, names the
// directories whose entries changed, for a plain tree (plain.go). The first
// hash (initial) only records what it finds.
func (w *Watcher) refresh(v *volume, initial bool, dirty []string) {
	defer w.updatePoll(v)
	in := w.inotifyFor(v)
	var ws watchSet
	var watch func(string)
	if in != nil {
		watch = func(dir string) { w.watchDir(in, v, &ws, dir) }
	}
	var res hashResult
	updated := false
	if v.tree != nil && dirty != nil && in != nil && !v.polling {
		res, updated = w.hasher.update(v.tree, v.seen, dirty, watch)
	}
	if !updated {
		w.hashesTotal.Inc()
		var err error
		if res, err = w.hasher.hash(v.path, v.seen, watch); err != nil {
			v.tree = nil
			w.setSeen(v, nil, 0)
			w.lost(v, err, initial)
			return
		}
	}
	w.found(v)
	if in != nil {
		if updated { // the directories not listed again keep their watches
			w.mu.Lock()
			ws.wds = mapsUnion(ws.wds, v.wds)
			w.mu.Unlock()
		}
		w.hold(v, ws.wds)
		w.watched(v, ws.err)
	}
	v.tree = res.tree
	if v.polling {
		v.tree = nil // no events name what changes
	}
	w.setSeen(v, res.seen, res.watched)
	w.report(v, res.problems)
	w.judge(v, res, initial)
}

// judge decides whether the hash res of v is reported: see "What is never
// reported" in the package documentation. The first hash (initial) is
// recorded whatever it shows, unless the volume is broken.
func (w *Watcher) judge(v *volume, res hashResult, initial bool) {
	if res.broken != "" {
		v.stopSettle()
		if v.broken == "" { // once until the volume is whole again
			v.broken = res.broken
			w.errorsTotal.Inc()
			level.Warn(w.logger).Log("msg", "volume is broken, not reporting it until it is whole again", "dir", v.dir, "reason", res.broken)
		}
		return
	}
	if partial := v.partial(res); partial != "" && !initial && !w.settled(v, partial) {
		return // the next step makes an event
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
		w.send(Change{Dir: v.dir, Hash: res.sum, Time: time.Now()})
	}
}

// partial returns why res looks half-way through an update, or "": what
// the hash saw alone, or a change from what was last reported that the
// kubelet never makes.
func (v *volume) partial(res hashResult) string {
	switch {
	case res.partial != "" || res.sum == v.hash:
		return res.partial
	case res.version != "" && res.version == v.version && res.versionSum != v.versionSum:
		return "the version directory that ..data names changed in place (the kubelet never does that)"
	case res.version == "" && v.version != "":
		return "..data vanished (the volume is being deleted or written for the first time)"
	case res.version != "" && res.sum == emptyHash:
		return "the kubelet volume shows no item (an rm -rf half-way, or an emptied ConfigMap)"
	}
	return ""
}

// settled reports whether v, half-way through an update (why), has been
// so for longer than the settle bound, and is to be reported as it is.
// Until then the settle timer marks it again.
func (w *Watcher) settled(v *volume, why string) bool {
	now := time.Now()
	if v.partialSince.IsZero() {
		v.partialSince = now
		v.settleTimer = time.AfterFunc(w.settle, func() { w.mark(v) })
		level.Debug(w.logger).Log("msg", "volume is half-way through an update, waiting for the next step", "dir", v.dir, "reason", why)
	}
	if now.Sub(v.partialSince) < w.settle {
		return false
	}
	if why == reasonVanished { // busy, not inconsistent
		level.Debug(w.logger).Log("msg", fmt.Sprintf("volume kept changing for %s, reporting it", w.settle), "dir", v.dir, "reason", why)
	} else {
		w.errorsTotal.Inc()
		level.Warn(w.logger).Log("msg", fmt.Sprintf("volume still looks half-way through an update after %s, reporting what its visible names show", w.settle), "dir", v.dir, "reason", why)
	}
	return true
}

func (w *Watcher) send(c Change) {
	level.Debug(w.logger).Log("msg", "content changed", "dir", c.Dir, "hash", fmt.Sprintf("%x", c.Hash[:8]))
	w.changesTotal.Inc() // before the send, so that a reader of c sees it counted
	select {
	case w.changes <- c:
	case <-w.ctx.Done():
	}
}

// stopSettle forgets that v was seen half-way through an update.
func (v *volume) stopSettle() {
	v.partialSince = time.Time{}
	if v.settleTimer != nil {
		v.settleTimer.Stop()
		v.settleTimer = nil
	}
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

// mapsUnion returns a map holding the keys of a and b.
func mapsUnion(a, b map[int]bool) map[int]bool {
	u := make(map[int]bool, len(a)+len(b))
	maps.Copy(u, a)
	maps.Copy(u, b)
	return u
}
