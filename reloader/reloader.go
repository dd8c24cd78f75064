// Package reloader decides when to reload: it takes content changes from the
// watcher, waits for a burst to settle (debounce, with an upper bound), and
// hands one reload to every target. Each target has its own delivery loop:
// at most one attempt in flight, retries with backoff, and latest wins, so a
// change that arrives during a delivery folds into one follow-up and a
// superseded change is never retried on its own.
package reloader

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Options configure a Reloader.
type Options struct {
	// Debounce is how long to wait after the last change before reloading;
	// 0 reloads on the first change.
	Debounce time.Duration
	// Retries is the number of attempts per change; 0 means until success.
	Retries int
	// Backoff paces the retries.
	Backoff notifier.Backoff
	// RetryInterval is how often a target whose attempts ran out is tried
	// again without a new change; 0 means only on the next change.
	RetryInterval time.Duration
	// ReloadOnStart reloads every target once when Run starts.
	ReloadOnStart bool
	// ShutdownGrace is how long an in-flight reload may go on once the
	// context of Run is done; 0 abandons it at once.
	ShutdownGrace time.Duration
}

// Reloader turns content changes into reloads of its targets.
type Reloader struct {
	logger  log.Logger
	opts    Options
	targets []*target

	// Owned by Run's goroutine.
	gen   uint64              // generation of the newest reload
	seen  map[string][32]byte // newest hash of each directory
	fired map[string][32]byte // hash of each directory at the last reload
}

// New returns a Reloader for targets. Metrics are registered with reg.
func New(logger log.Logger, reg prometheus.Registerer, targets []notifier.Target, opts Options) *Reloader {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	logger = log.With(logger, "component", "reloader")
	m := newMetrics(reg)
	r := &Reloader{logger: logger, opts: opts, seen: map[string][32]byte{}, fired: map[string][32]byte{}}
	for _, n := range targets {
		r.targets = append(r.targets, newTarget(n, logger, m, &r.opts))
	}
	return r
}

// Run reloads the targets for every change read from changes until ctx is
// done. Then it stops reading changes, lets a reload already in flight finish
// within Options.ShutdownGrace, and returns nil.
func (r *Reloader) Run(ctx context.Context, changes <-chan watcher.Change) error {
	// Deliveries outlive ctx by the grace period, so they get a context of
	// their own; stop tells the delivery loops to take no new work.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, t := range r.targets {
		wg.Go(func() { t.run(dctx, stop) })
	}
	if r.opts.ReloadOnStart {
		level.Info(r.logger).Log("msg", "reloading on start")
		r.fire()
	}

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

// debounce reads changes until ctx is done and fires a reload once a burst
// has settled: Debounce after its last change, and at most MaxDelayFactor
// times Debounce after its first.
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

// settled reloads for a burst of changes to dirs, unless every one of them
// is back to the content of the last reload (a file edited and restored, a
// directory briefly emptied): the app already has that content.
func (r *Reloader) settled(dirs []string) {
	same := true
	for _, d := range dirs {
		if h, ok := r.fired[d]; !ok || h != r.seen[d] {
			same = false
		}
		r.fired[d] = r.seen[d]
	}
	if same {
		level.Info(r.logger).Log("msg", "content changed and changed back, not reloading", "dirs", strings.Join(dirs, ","))
		return
	}
	level.Info(r.logger).Log("msg", "content changed, reloading", "dirs", strings.Join(dirs, ","))
	r.fire()
}

// fire asks every target to deliver the newest generation.
func (r *Reloader) fire() {
	r.gen++
	for _, t := range r.targets {
		t.want(r.gen)
	}
}

// target is the delivery loop of one notifier.Target.
type target struct {
	n      notifier.Target
	logger log.Logger
	opts   *Options

	wanted atomic.Uint64 // newest generation asked for
	kick   chan struct{} // capacity 1: "wanted has moved"

	success, failure prometheus.Counter
	duration         prometheus.Observer
	lastOK, lastTS   prometheus.Gauge
}

func newTarget(n notifier.Target, logger log.Logger, m *metrics, opts *Options) *target {
	name := n.Name()
	t := &target{
		n:        n,
		logger:   log.With(logger, "target", name),
		opts:     opts,
		kick:     make(chan struct{}, 1),
		success:  m.reloads.WithLabelValues(name, "success"),
		failure:  m.reloads.WithLabelValues(name, "failure"),
		duration: m.duration.WithLabelValues(name),
		lastOK:   m.lastOK.WithLabelValues(name),
		lastTS:   m.lastTS.WithLabelValues(name),
	}
	t.lastOK.Set(1) // nothing has failed yet
	return t
}

func (t *target) want(gen uint64) {
	t.wanted.Store(gen)
	select {
	case t.kick <- struct{}{}:
	default: // a kick is already pending; it will read the newest wanted
	}
}

// run delivers every generation asked for, newest first, until stop closes.
func (t *target) run(ctx context.Context, stop <-chan struct{}) {
	var (
		delivered uint64
		failed    bool // attempts ran out for the newest generation
		retry     *time.Ticker
		retryC    <-chan time.Time
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
			level.Info(t.logger).Log("msg", "retrying the failed reload")
		}
		if t.wanted.Load() == delivered && !failed {
			continue
		}
		var ok bool
		delivered, ok = t.deliver(ctx, stop)
		failed = !ok
		if failed && retry != nil {
			retry.Reset(t.opts.RetryInterval)
			retryC = retry.C
		} else {
			retryC = nil
		}
	}
}

// deliver makes attempts until one succeeds, the attempts for a change run
// out, or stop closes. A newer generation that arrives while it waits to
// retry replaces the one it was delivering, with attempts counted afresh.
// It returns the generation it ended on and whether that one was delivered.
func (t *target) deliver(ctx context.Context, stop <-chan struct{}) (uint64, bool) {
	start := time.Now()
	gen := t.wanted.Load()
	var (
		attempt int
		lastErr string
		lastLog time.Time
	)
	for {
		attempt++
		err := t.n.Notify(ctx)
		if err == nil {
			t.success.Inc()
			t.lastOK.Set(1)
			t.lastTS.SetToCurrentTime()
			took := time.Since(start)
			t.duration.Observe(took.Seconds())
			level.Info(t.logger).Log("msg", "reloaded", "attempts", attempt, "duration", took.Round(time.Millisecond))
			return gen, true
		}
		if ctx.Err() != nil {
			level.Warn(t.logger).Log("msg", "shutdown grace period over, reload abandoned", "err", err)
			return gen, false
		}
		t.failure.Inc()
		t.lastOK.Set(0)
		if t.opts.Retries > 0 && attempt >= t.opts.Retries {
			t.duration.Observe(time.Since(start).Seconds())
			level.Error(t.logger).Log("msg", "reload failed, no attempts left for this change: the next change or resync tries again", "attempts", attempt, "err", err)
			return gen, false
		}
		delay := t.opts.Backoff.Delay(attempt)
		logger := level.Warn(t.logger)
		if msg := err.Error(); msg == lastErr && time.Since(lastLog) < repeatLogEvery {
			logger = level.Debug(t.logger)
		} else {
			lastErr, lastLog = msg, time.Now()
		}
		logger.Log("msg", "reload failed, retrying", "attempt", attempt, "retry_in", delay.Round(time.Millisecond), "err", err)

		wait := time.NewTimer(delay)
		select {
		case <-wait.C:
		case <-t.kick:
			wait.Stop()
			gen, attempt = t.wanted.Load(), 0
			level.Debug(t.logger).Log("msg", "newer change supersedes the one being retried")
		case <-stop:
			wait.Stop()
			level.Warn(t.logger).Log("msg", "shutting down before the reload succeeded", "err", err)
			return gen, false
		}
	}
}
