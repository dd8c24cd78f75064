package reloader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/watcher"
)

// MaxDelayFactor bounds the debounce: a change is delivered at most
// MaxDelayFactor times the debounce after it was seen, however long the
// churn goes on.
const MaxDelayFactor = 10

// repeatLogEvery is how often an unchanged, repeating failure is logged
// again at warning level; in between it is logged at debug level.
const repeatLogEvery = time.Minute

// probeTimeout bounds one reachability probe.
const probeTimeout = time.Second

// Prober is implemented by targets that can tell cheaply, without a reload
// request, whether the app is listening again (a TCP connect). After an
// attempt failed with a refused connection, the delivery loop probes every
// Options.ProbeInterval while it waits for the next retry, and retries at
// once when the probe succeeds.
type Prober interface {
	Reachable(ctx context.Context) bool
}

var _ Prober = (*notifier.Webhook)(nil)

// Options configure a Reloader.
type Options struct {
	// Debounce is how long to wait after the last change before reloading;
	// 0 reloads on the first change.
	Debounce time.Duration
	// Retries is the number of attempts per change; 0 means until success.
	Retries int
	// Backoff paces the retries.
	Backoff notifier.Backoff
	// RefusedBackoff paces the retries after an attempt that the app
	// refused (notifier.ErrRefused: it answered, and not with success),
	// which trying again soon with the same content will not change; its
	// Max is typically minutes. A zero Max means Backoff's.
	RefusedBackoff notifier.Backoff
	// RetryInterval is how often a target whose attempts ran out is tried
	// again without a new change; 0 means only on the next change.
	RetryInterval time.Duration
	// ProbeInterval is how often a target that refused the connection and
	// implements Prober is probed while waiting to retry; 0 never probes.
	ProbeInterval time.Duration
	// ReloadOnStart reloads every target once when Run starts.
	ReloadOnStart bool
	// ShutdownGrace is how long an in-flight reload may go on once the
	// context of Run is done; 0 abandons it at once.
	ShutdownGrace time.Duration
	// Initial, if set, returns the content hash of each volume at start,
	// once it is known; Run calls it once before it reads any change. That
	// content is what the app has at start, unless State says otherwise.
	// Nil means nothing is known: the first change of a volume reloads.
	Initial func(ctx context.Context) (map[string][32]byte, error)
	// State, if set, records the content delivered to each target, so that
	// a change made while hotreload was not running is delivered at start.
	State *StateFile
	// Key, if set, keys the content value of every volume: see value.go.
	Key []byte
	// Sensitive, if set, reports whether a volume may hold Secret data
	// (the kubelet puts Secret, projected and downwardAPI volumes on
	// tmpfs). Without Key, such a volume's content value is shown nowhere
	// and not kept in the state file.
	Sensitive func(dir string) bool
	// Hint, if set, returns advice on the error of a failed attempt in the
	// terms the user knows (a flag to set), or "". It is logged beside the
	// error, under "hint".
	Hint func(error) string
	// Delivered, if set, is told each time every target has been given the
	// same new content of a directory (what hotreload_volume_content_info
	// shows). It is called with the Reloader's lock held: it must not block.
	Delivered func(dir string, hash [32]byte)
	// Refused, if set, is asked after every failed attempt, with its error
	// and the content being delivered. Returning true says the failure was
	// dealt with (a view put its previous content back): the content is not
	// tried again, as for an unconfirmed one, until newer content is asked
	// for.
	Refused func(err error, content map[string][32]byte) bool
}

// content is what the volumes hold: a hash per directory.
type content map[string][32]byte

// Reloader turns content changes into reloads of its targets.
type Reloader struct {
	logger  log.Logger
	opts    Options
	targets []*target
	metrics *metrics

	ready atomic.Bool // begin is done: every change from now on is compared

	// Owned by Run's goroutine.
	seen content // newest hash of each directory
	// startup holds the startup content of the directories whose delivered
	// content is that startup content, until their first change. A first
	// change to that very hash means the watcher's own first hash was older
	// than Initial's: the content changed while starting, and what the app
	// read is not known, so it is delivered.
	startup content

	// mu guards the delivery state of every target and what is exported
	// about it.
	mu      sync.Mutex
	volumes map[string]exported // content every target has, by directory
}

// exported is what is exported of the content of one volume that every
// target was given.
type exported struct {
	hash  [32]byte
	value string // the label's value; "" when the volume has none
	at    time.Time
}

// Delivered is the content of one volume that every target was given.
type Delivered struct {
	Dir string
	// Value is the first 12 hex digits of the content value (see
	// value.go), as hotreload_volume_content_info shows it; "" for a volume
	// that may hold a Secret, when no key is given.
	Value string
	At    time.Time // when the last target got it; for the startup content, when Run started
}

// New returns a Reloader for targets. Metrics are registered with reg.
func New(logger log.Logger, reg prometheus.Registerer, targets []notifier.Target, opts Options) *Reloader {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	logger = log.With(logger, "component", "reloader")
	r := &Reloader{logger: logger, opts: opts, metrics: newMetrics(reg), seen: content{}, startup: content{}, volumes: map[string]exported{}}
	for _, n := range targets {
		r.targets = append(r.targets, newTarget(r, n))
	}
	return r
}

// Ready reports whether Run knows what every target has: a change from now
// on is compared with it.
func (r *Reloader) Ready() bool { return r.ready.Load() }

// Content returns the content that every target was given, one entry per
// volume, sorted by directory. It is safe to call at any time.
func (r *Reloader) Content() []Delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Delivered
	for dir, e := range r.volumes {
		out = append(out, Delivered{Dir: dir, Value: e.value, At: e.at})
	}
	slices.SortFunc(out, func(a, b Delivered) int { return strings.Compare(a.Dir, b.Dir) })
	return out
}

// Run reloads the targets for every change read from changes until ctx is
// done. Then it stops reading changes, lets a reload already in flight finish
// within Options.ShutdownGrace, and returns nil.
func (r *Reloader) Run(ctx context.Context, changes <-chan watcher.Change) error {
	if err := r.begin(ctx); err != nil {
		return err
	}
	r.ready.Store(true)
	// Deliveries outlive ctx by the grace period, so they get a context of
	// their own; stop tells the delivery loops to take no new work.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, t := range r.targets {
		wg.Go(func() { t.run(dctx, stop) })
	}
	r.offer()

	r.debounce(ctx, changes)

	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(r.opts.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		cancel() // a delivery cut short logs it
		<-done
	}
	return nil
}

// begin sets what each target has at start: the startup content, what the
// state file says was delivered before, or nothing with ReloadOnStart.
func (r *Reloader) begin(ctx context.Context) error {
	if r.opts.Initial != nil {
		initial, err := r.opts.Initial(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped before start: nothing to do
			}
			return fmt.Errorf("initial content: %w", err)
		}
		maps.Copy(r.seen, initial)
	}
	now := time.Now()
	var st loaded
	if r.opts.State != nil {
		st = r.opts.State.load(r.logger)
	}
	// Without a state file, or at the pod's first start, the app has the
	// startup content. With one, each target has what the file says;
	// where it says nothing, or cannot be read, what the app has is not
	// known, and the current content is delivered.
	fromFile := st.records != nil || st.unreadable

	r.mu.Lock()
	var changed, unrecorded []string
	if !r.opts.ReloadOnStart {
		maps.Copy(r.startup, r.seen)
	}
	for _, t := range r.targets {
		t.wanted = maps.Clone(r.seen)
		if r.opts.ReloadOnStart {
			continue // t.delivered stays unknown: every target reloads
		}
		t.delivered = maps.Clone(r.seen)
		t.at = map[string]time.Time{}
		for d := range r.seen {
			t.at[d] = now
		}
		if !fromFile {
			continue
		}
		for d := range r.seen {
			delete(r.startup, d) // the state file says what the app has
			e, ok := st.records[t.name][d]
			same, known := r.compare(st, e, d)
			switch {
			case !ok || !known:
				delete(t.delivered, d)
				if !st.unreadable && !slices.Contains(unrecorded, d) {
					unrecorded = append(unrecorded, d)
				}
			case !same:
				delete(t.delivered, d)
				if !slices.Contains(changed, d) {
					changed = append(changed, d)
				}
			default:
				t.at[d] = e.At
			}
		}
	}
	r.logDropped(st.records)
	for d := range r.seen {
		r.exportLocked(d)
	}
	r.saveLocked()
	r.mu.Unlock()

	slices.Sort(changed)
	slices.Sort(unrecorded)
	switch {
	case r.opts.ReloadOnStart:
		level.Info(r.logger).Log("msg", "reloading on start")
	case len(changed) > 0:
		level.Info(r.logger).Log("msg", "content changed while hotreload was not running, reloading", "dirs", strings.Join(changed, ","))
	}
	if len(unrecorded) > 0 && !r.opts.ReloadOnStart {
		level.Info(r.logger).Log("msg", "the state file does not say what the app was given of these volumes (missing before, a target added since, a volume that may hold a Secret and no content key, or another key): delivering them", "dirs", strings.Join(unrecorded, ","))
	}
	return nil
}

// compare compares what the state file says a target was given of dir with
// what dir holds now. known is false when the file cannot tell: it keeps no
// value for a volume that may hold a Secret without a key, and values under
// another key cannot be compared.
func (r *Reloader) compare(st loaded, e StateEntry, dir string) (same, known bool) {
	now := r.seen[dir]
	switch {
	case e.Hash != nil: // a file from before values, which kept the hash
		return *e.Hash == now, true
	case st.keyID != keyID(r.opts.Key) || e.Value == "":
		return false, false
	}
	v, ok := r.value(dir, now)
	return v == e.Value, ok
}

// logDropped logs the records of the state file that match nothing now: a
// target not configured, a volume not watched (not configured, or missing;
// one that appears is delivered). They are not written again.
func (r *Reloader) logDropped(records map[string]map[string]StateEntry) {
	var targets, dirs []string
	for name, byDir := range records {
		if !slices.ContainsFunc(r.targets, func(t *target) bool { return t.name == name }) {
			targets = append(targets, name)
			continue
		}
		for d := range byDir {
			if _, ok := r.seen[d]; !ok && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	slices.Sort(targets)
	slices.Sort(dirs)
	if len(targets) > 0 {
		level.Info(r.logger).Log("msg", "the state file has records of targets not configured now, dropping them", "targets", strings.Join(targets, ","))
	}
	if len(dirs) > 0 {
		level.Info(r.logger).Log("msg", "the state file has records of volumes not watched now (not configured, or missing), dropping them; one that appears is delivered", "dirs", strings.Join(dirs, ","))
	}
}

// debounce reads changes until ctx is done and offers the content once a
// burst has settled: Debounce after its last change, and at most
// MaxDelayFactor times Debounce after its first.
func (r *Reloader) debounce(ctx context.Context, changes <-chan watcher.Change) {
	var (
		dirs     []string
		timer    *time.Timer
		timerC   <-chan time.Time
		deadline time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-changes:
			if !ok {
				changes = nil // the watcher has stopped; wait for ctx
				continue
			}
			r.seen[c.Dir] = c.Hash
			r.firstChange(c)
			if !slices.Contains(dirs, c.Dir) {
				dirs = append(dirs, c.Dir)
			}
			if r.opts.Debounce <= 0 {
				r.settled(dirs)
				dirs = dirs[:0]
				continue
			}
			now := time.Now()
			if timerC == nil {
				deadline = now.Add(MaxDelayFactor * r.opts.Debounce)
			}
			wait := min(r.opts.Debounce, deadline.Sub(now))
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			timerC = timer.C
		case <-timerC:
			timerC = nil
			r.settled(dirs)
			dirs = dirs[:0]
		}
	}
}

// firstChange handles the first change of a directory whose delivered
// content is the startup content (see Reloader.startup).
func (r *Reloader) firstChange(c watcher.Change) {
	h, ok := r.startup[c.Dir]
	if !ok {
		return
	}
	delete(r.startup, c.Dir)
	if h != c.Hash {
		return
	}
	level.Info(r.logger).Log("msg", "content changed while starting, what the app read is not known: delivering it", "dir", c.Dir)
	r.mu.Lock()
	for _, t := range r.targets {
		if t.delivered != nil {
			delete(t.delivered, c.Dir)
		}
	}
	r.mu.Unlock()
}

// settled offers the content after a burst of changes to dirs. Targets that
// already have it (a file edited and restored, a directory briefly emptied)
// are not reloaded. The log names the directories that some target lacks.
func (r *Reloader) settled(dirs []string) {
	r.mu.Lock()
	var changed []string
	for _, d := range dirs {
		for _, t := range r.targets {
			if t.differsLocked(content{d: r.seen[d]}) {
				changed = append(changed, d)
				break
			}
		}
	}
	r.mu.Unlock()
	// Logged before the targets are asked: a target that answers at once
	// on another thread would otherwise log its "reloaded", and make its
	// request, before this line, whose time tests and operators take as
	// the moment the reload was asked for.
	if len(changed) > 0 {
		level.Info(r.logger).Log("msg", "content changed, reloading", "dirs", strings.Join(changed, ","))
	} else {
		level.Info(r.logger).Log("msg", "content is what the app was last given, not reloading", "dirs", strings.Join(dirs, ","))
	}
	r.offer()
}

// offer asks every target for the newest content. A target that already
// has it does nothing, and drops a retry it was waiting for.
func (r *Reloader) offer() {
	r.mu.Lock()
	for _, t := range r.targets {
		if !maps.Equal(t.wanted, r.seen) {
			t.wanted = maps.Clone(r.seen)
			t.version++
		}
	}
	r.mu.Unlock()
	for _, t := range r.targets {
		select {
		case t.kick <- struct{}{}:
		default: // a kick is already pending; it will read the newest wanted
		}
	}
}

// delivered records that t was given c at time at: in t, in the state file,
// and in what is exported per volume.
func (r *Reloader) delivered(t *target, c content, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.delivered == nil {
		t.delivered, t.at = content{}, map[string]time.Time{}
	}
	for d, h := range c {
		if old, ok := t.delivered[d]; !ok || old != h {
			t.at[d] = at
		}
		t.delivered[d] = h
	}
	for d := range c {
		r.exportLocked(d)
	}
	r.saveLocked()
}

// exportLocked updates what is exported about dir: the content every target
// has, if they all have the same, with the time the last of them got it.
func (r *Reloader) exportLocked(dir string) {
	var (
		hash [32]byte
		at   time.Time
	)
	for i, t := range r.targets {
		h, ok := t.delivered[dir]
		if !ok || (i > 0 && h != hash) {
			return // not every target has the same content yet
		}
		hash = h
		if t.at[dir].After(at) {
			at = t.at[dir]
		}
	}
	if len(r.targets) == 0 {
		return
	}
	old, had := r.volumes[dir]
	if had && old.hash == hash {
		return
	}
	if had && old.value != "" {
		r.metrics.content.DeleteLabelValues(dir, old.value)
	}
	v, ok := r.value(dir, hash)
	e := exported{hash: hash, at: at}
	if ok {
		e.value = shortValue(v)
		r.metrics.content.WithLabelValues(dir, e.value).Set(1)
	}
	r.volumes[dir] = e
	if r.opts.Delivered != nil {
		r.opts.Delivered(dir, hash)
	}
}

// saveLocked writes what every target was given to the state file.
func (r *Reloader) saveLocked() {
	if r.opts.State == nil {
		return
	}
	s := map[string]map[string]StateEntry{}
	for _, t := range r.targets {
		for d, h := range t.delivered {
			if s[d] == nil {
				s[d] = map[string]StateEntry{}
			}
			v, _ := r.value(d, h)
			s[d][t.name] = StateEntry{Value: v, At: t.at[d]}
		}
	}
	if err := r.opts.State.save(keyID(r.opts.Key), s); err != nil {
		level.Warn(r.logger).Log("msg", "cannot write the state file, a restart will not know what was delivered; retrying at the next reload", "file", r.opts.State.Path(), "err", err)
	}
}

// target is the delivery loop of one notifier.Target.
type target struct {
	r      *Reloader
	n      notifier.Target
	name   string
	logger log.Logger
	opts   *Options

	kick chan struct{} // capacity 1: "wanted has moved"

	// Owned by run's goroutine: the version whose delivery reached the app
	// unconfirmed, not to be sent again.
	held        bool
	heldVersion uint64

	// Guarded by r.mu.
	wanted    content              // the newest content asked for
	version   uint64               // bumped each time wanted changes
	delivered content              // what the target was last given; nil: unknown
	at        map[string]time.Time // when each directory's delivered content was given

	success, failure prometheus.Counter
	duration         prometheus.Observer
	lastOK, lastTS   prometheus.Gauge
}

func newTarget(r *Reloader, n notifier.Target) *target {
	name := n.Name()
	m := r.metrics
	t := &target{
		r:        r,
		n:        n,
		name:     name,
		logger:   log.With(r.logger, "target", name),
		opts:     &r.opts,
		kick:     make(chan struct{}, 1),
		wanted:   content{},
		success:  m.reloads.WithLabelValues(name, "success"),
		failure:  m.reloads.WithLabelValues(name, "failure"),
		duration: m.duration.WithLabelValues(name),
		lastOK:   m.lastOK.WithLabelValues(name),
		lastTS:   m.lastTS.WithLabelValues(name),
	}
	t.lastOK.Set(1) // nothing has failed yet
	return t
}

// differsLocked reports whether c holds, for some directory, content that
// the target was not given. Directories c does not hold are not compared.
func (t *target) differsLocked(c content) bool {
	if t.delivered == nil {
		return true
	}
	for d, h := range c {
		if old, ok := t.delivered[d]; !ok || old != h {
			return true
		}
	}
	return false
}

// pending returns the content to deliver, its version, and whether the
// target lacks it.
func (t *target) pending() (content, uint64, bool) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	return t.wanted, t.version, t.differsLocked(t.wanted)
}

// run delivers the newest content asked for until stop closes.
func (t *target) run(ctx context.Context, stop <-chan struct{}) {
	var (
		retry  *time.Ticker
		retryC <-chan time.Time
	)
	if t.opts.RetryInterval > 0 {
		retry = time.NewTicker(t.opts.RetryInterval)
		defer retry.Stop()
	}
	for {
		select {
		case <-stop:
			return
		case <-t.kick:
		case <-retryC:
			if _, _, ok := t.pending(); ok {
				level.Info(t.logger).Log("msg", "retrying the failed reload")
			}
		}
		if _, v, ok := t.pending(); !ok || (t.held && v == t.heldVersion) {
			retryC = nil
			continue
		}
		switch t.deliver(ctx, stop) {
		case retryLater:
			if retry != nil {
				retry.Reset(t.opts.RetryInterval)
				retryC = retry.C
			}
		default:
			retryC = nil
		}
	}
}

// outcome is how a delivery ended.
type outcome int

const (
	done       outcome = iota // the target has the newest content asked for
	retryLater                // it failed: the next change or resync tries again
	heldBack                  // it reached the app unconfirmed: only the next change tries again
)

// deliver makes attempts until one succeeds, the attempts for a change run
// out, the target turns out to have the content already, or stop closes. A
// newer change that arrives while it waits to retry replaces the one it was
// delivering, with attempts counted afresh. An attempt that reached the app
// but could not be confirmed (notifier.ErrUnconfirmed) is not repeated for
// the same content: that would only make the app read it again.
func (t *target) deliver(ctx context.Context, stop <-chan struct{}) outcome {
	t.held = false
	start := time.Now()
	c, version, _ := t.pending()
	var (
		attempt int
		lastErr string
		lastLog time.Time
	)
	for {
		attempt++
		at := time.Now()
		err := t.n.Notify(ctx)
		if err == nil {
			// Counted last: a scrape that sees the reload counted sees
			// the rest of it too (tests wait on the count).
			t.lastOK.Set(1)
			t.lastTS.SetToCurrentTime()
			took := time.Since(start)
			t.duration.Observe(took.Seconds())
			t.r.delivered(t, c, at)
			t.success.Inc()
			level.Info(t.logger).Log("msg", "reloaded", "attempts", attempt, "duration", took.Round(time.Millisecond))
			return done
		}
		if ctx.Err() != nil {
			level.Warn(t.logger).Log(t.failureKV(err, "msg", "shutdown grace period over, reload abandoned")...)
			return retryLater
		}
		t.lastOK.Set(0)
		unconfirmed := errors.Is(err, notifier.ErrUnconfirmed)
		refused := t.opts.Refused != nil && t.opts.Refused(err, c)
		exhausted := refused || unconfirmed || t.opts.Retries > 0 && attempt >= t.opts.Retries
		if exhausted {
			t.duration.Observe(time.Since(start).Seconds())
		}
		t.failure.Inc() // last, as success is
		switch {
		case refused:
			t.held, t.heldVersion = true, version
			level.Error(t.logger).Log(t.failureKV(err, "msg", "reload refused, the previous content is put back: not sent again for this content", "attempts", attempt)...)
			return heldBack
		case unconfirmed:
			t.held, t.heldVersion = true, version
			level.Error(t.logger).Log(t.failureKV(err, "msg", "reload not confirmed, not sent again for this content: the next change tries again", "attempts", attempt)...)
			return heldBack
		case exhausted:
			level.Error(t.logger).Log(t.failureKV(err, "msg", "reload failed, no attempts left for this change: the next change or resync tries again", "attempts", attempt)...)
			return retryLater
		}
		delay := t.opts.Backoff.Delay(attempt)
		if errors.Is(err, notifier.ErrRefused) && t.opts.RefusedBackoff.Max > 0 {
			delay = t.opts.RefusedBackoff.Delay(attempt)
		}
		logger := level.Warn(t.logger)
		if msg := err.Error(); msg == lastErr && time.Since(lastLog) < repeatLogEvery {
			logger = level.Debug(t.logger)
		} else {
			lastErr, lastLog = msg, time.Now()
		}
		logger.Log(t.failureKV(err, "msg", "reload failed, retrying", "attempt", attempt, "retry_in", delay.Round(time.Millisecond))...)

		switch t.wait(ctx, stop, delay, err, version) {
		case waitRetry:
		case waitNewer:
			nc, nv, ok := t.pending()
			if !ok {
				// The app has what it is asked for: nothing is failing.
				t.lastOK.Set(1)
				t.duration.Observe(time.Since(start).Seconds())
				level.Info(t.logger).Log("msg", "content is back to what the app was last given, dropping the retry")
				return done
			}
			c, version, attempt = nc, nv, 0
			level.Debug(t.logger).Log("msg", "newer change supersedes the one being retried")
		case waitStop:
			level.Warn(t.logger).Log(t.failureKV(err, "msg", "shutting down before the reload succeeded")...)
			return retryLater
		}
	}
}

// failureKV returns kv with the error of a failed attempt, and the advice
// Options.Hint gives on it.
func (t *target) failureKV(err error, kv ...any) []any {
	kv = append(kv, "err", err)
	if t.opts.Hint != nil {
		if hint := t.opts.Hint(err); hint != "" {
			kv = append(kv, "hint", hint)
		}
	}
	return kv
}

type waitResult int

const (
	waitRetry waitResult = iota // the delay is over, or the app is back
	waitNewer                   // a newer change was asked for
	waitStop                    // stop closed
)

// wait waits delay before the next attempt, or until content newer than
// version is asked for. If the last attempt found the connection refused
// and the target is a Prober, it also probes every ProbeInterval and ends
// the wait as soon as the app listens again.
func (t *target) wait(ctx context.Context, stop <-chan struct{}, delay time.Duration, err error, version uint64) waitResult {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	var probeC <-chan time.Time
	p, ok := t.n.(Prober)
	if ok && t.opts.ProbeInterval > 0 && errors.Is(err, syscall.ECONNREFUSED) {
		tick := time.NewTicker(t.opts.ProbeInterval)
		defer tick.Stop()
		probeC = tick.C
	}
	newer := func() bool { _, v, _ := t.pending(); return v != version }
	// retry retries, unless newer content was asked for meanwhile: a kick
	// and the timer ready at once are taken in either order by select,
	// and a retry of the old content would reload the app once more for
	// nothing (it reads the newer files anyway).
	retry := func() waitResult {
		if newer() {
			return waitNewer
		}
		return waitRetry
	}
	for {
		select {
		case <-timer.C:
			return retry()
		case <-probeC:
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			up := p.Reachable(pctx)
			cancel()
			if up {
				level.Debug(t.logger).Log("msg", "app is listening again, retrying now")
				return retry()
			}
		case <-t.kick:
			if newer() {
				return waitNewer
			}
			// A kick for the content being delivered: keep waiting.
		case <-stop:
			return waitStop
		}
	}
}
