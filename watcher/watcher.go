package watcher

// The path of a change: an inotify event in a directory that a volume's
// last hash walked marks the volume dirty (event, mark); a goroutine of the
// volume's own hashes what the app sees (refresh, with hash.go's walk);
// judge, with the kubelet's rules (kubelet.go), decides whether the volume
// is whole and differs from what was last reported, and sends a Change.
//
// Beside it, each behind a few calls: options.go checks Options;
// cache.go remembers what a hash saw (seen); plain.go updates a plain tree
// from the directories events name (plainPath); watches.go and
// inotify_linux.go hold the inotify watches; poll.go catches what inotify
// does not report; settle.go waits for a volume half-way through an
// update; missing.go for a volume that is not there; problems.go logs what
// could not be hashed.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
)

// Change says that the content of one watched directory differs from what
// the watcher last reported.
type Change struct {
	Dir  string    // the directory as given in Options
	Hash [32]byte  // SHA-256 of the directory's content, see HashDir
	Time time.Time // when the change was detected
}

// Watcher watches volume directories and reports content changes on
// Changes. Create it with New and start it with Run.
type Watcher struct {
	logger   log.Logger
	vols     []*volume
	hasher   hasher        // tests set it
	settle   time.Duration // settleTimeout; tests shorten it
	changes  chan Change
	readyc   chan struct{} // closed when every volume had its first hash
	firstMap map[string][32]byte
	started  atomic.Bool
	ctx      context.Context // Run's; set before any goroutine starts
	runners  sync.WaitGroup  // the volumes' goroutines
	metrics
	pollLoop     // poll.go
	inotifyState // watches.go
	missingTimes // missing.go

	mu      sync.Mutex // guards the fields marked "under w.mu", here and in the states above and in volume
	stopped bool       // under w.mu
}

// volume is one watched directory. The fields under w.mu are shared; the
// rest belongs to the goroutine that hashes the volume, one at a time.
type volume struct {
	dir      string // as given
	path     string // cleaned
	optional bool

	// Under w.mu.
	dirty, running bool
	seen           *seen // what the last hash saw (cache.go; read by the resync)

	present    bool     // exists and was hashed
	hash       [32]byte // what was last reported (or found at start)
	version    string   // ..data's target then
	versionSum [32]byte
	broken     string // the broken state last logged

	plain plainPath // plain.go
	settling
	pollState
	watchState
	missingState
	problemState
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
	vols, err := opts.volumes()
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		logger:       log.With(logger, "component", "watcher"),
		vols:         vols,
		settle:       settleTimeout,
		changes:      make(chan Change, len(vols)),
		readyc:       make(chan struct{}),
		firstMap:     make(map[string][32]byte),
		metrics:      newMetrics(reg),
		pollLoop:     newPollLoop(opts),
		inotifyState: newInotifyState(),
		missingTimes: missingTimes{grace: missingGrace, repeat: missingRepeat},
	}
	return w, nil
}

// Changes returns the channel on which Run sends one Change each time a
// directory's content hash differs from the last one reported. It is never
// closed; stop reading when Run's context is done.
func (w *Watcher) Changes() <-chan Change { return w.changes }

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
		v.stopMissing()
	}
	w.stopInotify()
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
	dir := wt.dir // whose entries changed
	if ev.name == "" || ev.dirMoved {
		dir = "" // walk the volume: a plain tree's paths would be stale
	}
	for _, v := range wt.vols {
		w.markDirLocked(v, dir)
	}
}

// mark makes v dirty: its goroutine hashes it (once more, if it is hashing
// it now), walking all of it.
func (w *Watcher) mark(v *volume) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.markLocked(v)
}

func (w *Watcher) markLocked(v *volume) { w.markDirLocked(v, "") }

// markDirLocked makes v dirty for a change of the entries of the real
// directory dir ("": of anything), and has v's goroutine hash it, starting
// one if none runs.
func (w *Watcher) markDirLocked(v *volume, dir string) {
	v.plain.mark(dir)
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
	v.dirty = false
	return v.plain.take(), true
}

// refresh hashes v, watching what it walks, and sends a Change if what the
// app sees differs from what was last reported. dirty, if not nil, names the
// directories whose entries changed, for a plain tree (plain.go). The first
// hash (initial) only records what it finds.
func (w *Watcher) refresh(v *volume, initial bool, dirty []string) {
	defer w.updatePoll(v)
	in := w.inotifyFor(v)
	var ws watchSet
	res, updated := w.updatePlain(v, in, dirty, &ws)
	if !updated {
		w.hashesTotal.Inc()
		var err error
		if res, err = w.hasher.hash(v.path, v.seen, w.watchFunc(in, v, &ws)); err != nil {
			v.plain.keep(nil, false)
			w.setSeen(v, nil, 0)
			w.lost(v, err, initial)
			return
		}
	}
	w.found(v)
	if in != nil {
		w.hold(v, ws.wds)
		w.watched(v, ws.err)
	}
	v.plain.keep(res.tree, v.polling)
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

func (w *Watcher) send(c Change) {
	level.Debug(w.logger).Log("msg", "content changed", "dir", c.Dir, "hash", fmt.Sprintf("%x", c.Hash[:8]))
	w.changesTotal.Inc() // before the send, so that a reader of c sees it counted
	select {
	case w.changes <- c:
	case <-w.ctx.Done():
	}
}
