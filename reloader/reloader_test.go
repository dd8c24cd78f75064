package reloader

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
	"github.com/hotreload/hotreload/watcher"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTarget records its calls. Each call takes `took` of (fake) time and
// returns the next scripted error, or nil once the script has run out.
type fakeTarget struct {
	name string
	took time.Duration

	mu       sync.Mutex
	errs     []error
	calls    []time.Time
	failAll  bool
	failWith error
}

func (f *fakeTarget) Name() string { return f.name }

func (f *fakeTarget) Notify(ctx context.Context) error {
	f.mu.Lock()
	f.calls = append(f.calls, time.Now())
	var err error
	if f.failAll {
		err = errors.New("app says no")
	} else if f.failWith != nil {
		err = f.failWith
	} else if len(f.errs) > 0 {
		err, f.errs = f.errs[0], f.errs[1:]
	}
	f.mu.Unlock()
	if f.took > 0 {
		select {
		case <-time.After(f.took):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (f *fakeTarget) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

// setFailWith makes every call fail with err; nil ends it.
func (f *fakeTarget) setFailWith(err error) {
	f.mu.Lock()
	f.failWith = err
	f.mu.Unlock()
}

func (f *fakeTarget) setFailAll(v bool) {
	f.mu.Lock()
	f.failAll = v
	f.mu.Unlock()
}

// harness runs a Reloader in the current synctest bubble.
type harness struct {
	changes chan watcher.Change
	reg     *prometheus.Registry
	cancel  context.CancelFunc
	done    chan error
	n       int // content numbers handed out by change
}

func start(t *testing.T, targets []notifier.Target, opts Options) *harness {
	h := &harness{changes: make(chan watcher.Change), reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel) // so that a failed test leaves no goroutine behind
	r := New(nil, h.reg, targets, opts)
	go func() { h.done <- r.Run(ctx, h.changes) }()
	return h
}

// change sends a change of dir to new content, never seen before.
func (h *harness) change(dir string) {
	h.n++
	h.changeTo(dir, h.n)
}

// changeTo sends a change of dir to the content numbered v.
func (h *harness) changeTo(dir string, v int) {
	var sum [32]byte
	sum[0], sum[1] = byte(v), byte(v>>8)
	h.changes <- watcher.Change{Dir: dir, Hash: sum, Time: time.Now()}
}

func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	if err := <-h.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func fixedBackoff(d time.Duration) notifier.Backoff {
	return notifier.Backoff{Min: d, Max: d, Rand: func() float64 { return 0.999999 }}
}

func TestDebounce(t *testing.T) {
	tests := []struct {
		name     string
		debounce time.Duration
		gaps     []time.Duration // between consecutive changes
		want     int             // reloads
	}{
		{"zero debounce reloads every change", 0, []time.Duration{0, time.Millisecond, time.Millisecond, time.Second}, 4},
		{"a burst within the window reloads once", 100 * time.Millisecond, []time.Duration{0, 10 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}, 1},
		{"changes further apart than the window reload each", 100 * time.Millisecond, []time.Duration{0, 200 * time.Millisecond, 200 * time.Millisecond}, 3},
		// 30 changes 50ms apart: 1.5s of churn. The bound (10 x 100ms) fires
		// once at 1s, then the tail settles 100ms after the last change.
		{"constant churn still reloads", 100 * time.Millisecond, repeat(50*time.Millisecond, 30), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeTarget{name: "app"}
				h := start(t, []notifier.Target{f}, Options{Debounce: tt.debounce})
				for _, g := range tt.gaps {
					time.Sleep(g)
					h.change("/etc/a")
				}
				time.Sleep(MaxDelayFactor*tt.debounce + time.Second)
				synctest.Wait()
				if got := len(f.times()); got != tt.want {
					t.Errorf("reloads = %d, want %d", got, tt.want)
				}
				h.stop(t)
			})
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

func TestDebounceTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{name: "app"}
		h := start(t, []notifier.Target{f}, Options{Debounce: 100 * time.Millisecond})
		t0 := time.Now()
		h.change("/etc/a")
		time.Sleep(30 * time.Millisecond)
		h.change("/etc/b") // another volume in the same window: the same reload
		time.Sleep(time.Second)
		synctest.Wait()
		calls := f.times()
		if len(calls) != 1 {
			t.Fatalf("reloads = %d, want 1", len(calls))
		}
		if got, want := calls[0].Sub(t0), 130*time.Millisecond; got != want {
			t.Errorf("reloaded %v after the first change, want %v (debounce after the last)", got, want)
		}
		h.stop(t)
	})
}

func TestChangedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{name: "app"}
		h := start(t, []notifier.Target{f}, Options{Debounce: 100 * time.Millisecond})
		h.changeTo("/etc/a", 1) // reloaded
		time.Sleep(time.Second)
		h.changeTo("/etc/a", 2) // edited ...
		h.changeTo("/etc/b", 7)
		time.Sleep(10 * time.Millisecond)
		h.changeTo("/etc/a", 1) // ... and restored, but /etc/b changed: reloaded
		time.Sleep(time.Second)
		h.changeTo("/etc/b", 8) // edited ...
		h.changeTo("/etc/b", 7) // ... and restored in the same window: nothing to do
		time.Sleep(time.Second)
		synctest.Wait()
		if got := len(f.times()); got != 2 {
			t.Errorf("reloads = %d, want 2: a burst that ends on the content of the last reload reloads nothing", got)
		}
		h.changeTo("/etc/b", 8) // a real change after that still reloads
		time.Sleep(time.Second)
		synctest.Wait()
		if got := len(f.times()); got != 3 {
			t.Errorf("reloads = %d, want 3", got)
		}
		h.stop(t)
	})
}

func TestLatestWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fakeTarget{name: "slow", took: 3 * time.Second}
		h := start(t, []notifier.Target{slow}, Options{})
		for range 5 {
			h.change("/etc/a")
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		calls := slow.times()
		if len(calls) != 2 {
			t.Fatalf("requests = %d, want 2 (one in flight, one follow-up with the newest content)", len(calls))
		}
		if d := calls[1].Sub(calls[0]); d != 3*time.Second {
			t.Errorf("follow-up started %v after the first, want right after it finished (3s)", d)
		}
		if got := testutil.ToFloat64(counter(h, "slow", "success")); got != 2 {
			t.Errorf("success count = %v, want 2", got)
		}
		h.stop(t)
	})
}

func counter(h *harness, target, result string) prometheus.Collector {
	return &gathered{h.reg, "hotreload_reloads_total", map[string]string{"target": target, "result": result}}
}

// gathered is a Collector view of one series of reg, for testutil.ToFloat64.
type gathered struct {
	reg    *prometheus.Registry
	name   string
	labels map[string]string
}

func (g *gathered) Describe(ch chan<- *prometheus.Desc) {}

func (g *gathered) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := g.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != g.name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := g.labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Histogram != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "", nil, nil), prometheus.UntypedValue, v)
			return
		}
	}
}

func series(h *harness, name, target string) float64 {
	return testutil.ToFloat64(&gathered{h.reg, name, map[string]string{"target": target}})
}

func TestRetryUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := errors.New("connection refused")
		f := &fakeTarget{name: "app", errs: []error{down, down, down}}
		h := start(t, []notifier.Target{f}, Options{Backoff: notifier.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond}})
		h.change("/etc/a")
		time.Sleep(time.Minute)
		synctest.Wait()
		calls := f.times()
		if len(calls) != 4 {
			t.Fatalf("attempts = %d, want 4 (3 failures, then success)", len(calls))
		}
		// Delays are drawn from [d/2, d] with d = 100ms, 200ms, 400ms.
		for i, max := range []time.Duration{100, 200, 400} {
			gap := calls[i+1].Sub(calls[i])
			max *= time.Millisecond
			if gap < max/2 || gap > max {
				t.Errorf("delay before retry %d = %v, want within [%v, %v]", i+1, gap, max/2, max)
			}
		}
		if got := testutil.ToFloat64(counter(h, "app", "failure")); got != 3 {
			t.Errorf("failure count = %v, want 3", got)
		}
		if got := testutil.ToFloat64(counter(h, "app", "success")); got != 1 {
			t.Errorf("success count = %v, want 1", got)
		}
		if got := series(h, "hotreload_last_reload_successful", "app"); got != 1 {
			t.Errorf("last_reload_successful = %v, want 1", got)
		}
		if got := series(h, "hotreload_last_reload_success_timestamp_seconds", "app"); got != float64(time.Now().Unix()) && got < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("last_reload_success_timestamp_seconds = %v, want about now (%d)", got, time.Now().Unix())
		}
		if got := series(h, "hotreload_reload_duration_seconds", "app"); got != 1 {
			t.Errorf("duration observations = %v, want 1 (one delivery with its retries)", got)
		}
		h.stop(t)
	})
}

func TestRetriesRunOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeTarget{name: "app", failAll: true}
		h := start(t, []notifier.Target{f}, Options{Retries: 2, Backoff: fixedBackoff(time.Second), RetryInterval: time.Hour})
		h.change("/etc/a")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if got := len(f.times()); got != 2 {
			t.Fatalf("attempts = %d, want 2 (--webhook-retries counts attempts)", got)
		}
		if got := series(h, "hotreload_last_reload_successful", "app"); got != 0 {
			t.Errorf("last_reload_successful = %v, want 0 while failed", got)
		}

		// The next change tries again, with attempts counted afresh.
		h.change("/etc/a")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if got := len(f.times()); got != 4 {
			t.Fatalf("attempts after a new change = %d, want 4", got)
		}

		// And so does the resync, without a change, once the app is fixed.
		f.setFailAll(false)
		time.Sleep(time.Hour + time.Second)
		synctest.Wait()
		if got := len(f.times()); got != 5 {
			t.Fatalf("attempts after the retry interval = %d, want 5 (4 failed, then a success)", got)
		}
		if got := series(h, "hotreload_last_reload_successful", "app"); got != 1 {
			t.Errorf("last_reload_successful = %v, want 1 after the retry succeeded", got)
		}
		// Once delivered, the resync has nothing more to do.
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		if got := len(f.times()); got != 5 {
			t.Errorf("attempts = %d, want still 5: a delivered change is not retried", got)
		}
		h.stop(t)
	})
}

func TestNewerChangeSupersedesRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rejected := errors.New("status 500: invalid config")
		f := &fakeTarget{name: "app", errs: []error{rejected}}
		h := start(t, []notifier.Target{f}, Options{Backoff: fixedBackoff(10 * time.Second)})
		h.change("/etc/a") // a bad config: rejected, retry in 10s
		time.Sleep(time.Second)
		h.change("/etc/a") // the fix: delivered at once, not after the backoff
		synctest.Wait()
		calls := f.times()
		if len(calls) != 2 {
			t.Fatalf("attempts = %d, want 2", len(calls))
		}
		if d := calls[1].Sub(calls[0]); d != time.Second {
			t.Errorf("fixed config delivered %v after the rejected one, want 1s (at once)", d)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := len(f.times()); got != 2 {
			t.Errorf("attempts = %d, want 2: the superseded change must not be retried on its own", got)
		}
		h.stop(t)
	})
}

// A newer change that arrives while an attempt is being rejected is
// delivered next, and the rejected content is not retried, even when its
// retry is due at once: select takes a kick and an expired timer in either
// order, hence the rounds. (Without the check, one round in 20 retried the
// old content in each of six runs.)
func TestNewerChangeBeatsDueRetry(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			rejected := errors.New("status 500: invalid config")
			f := &fakeTarget{name: "app", errs: []error{rejected}, took: time.Second}
			now := notifier.Backoff{Min: time.Nanosecond, Max: time.Nanosecond, Rand: func() float64 { return 0 }}
			h := start(t, []notifier.Target{f}, Options{Backoff: now})
			h.change("/etc/a") // rejected after 1s, retry due at once
			time.Sleep(time.Second / 2)
			h.change("/etc/a") // the fix, while the bad config is being rejected
			time.Sleep(time.Minute)
			synctest.Wait()
			if got := len(f.times()); got != 2 {
				t.Errorf("attempts = %d, want 2: the fix delivered, the rejected config not retried", got)
			}
			h.stop(t)
		})
	}
}

func TestTargetsAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := &fakeTarget{name: "broken", failAll: true}
		slow := &fakeTarget{name: "slow", took: 5 * time.Second}
		fine := &fakeTarget{name: "fine"}
		h := start(t, []notifier.Target{broken, slow, fine}, Options{Backoff: fixedBackoff(time.Second)})
		t0 := time.Now()
		h.change("/etc/a")
		synctest.Wait()
		if calls := fine.times(); len(calls) != 1 || !calls[0].Equal(t0) {
			t.Fatalf("fine target calls = %v, want one at once", calls)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := series(h, "hotreload_last_reload_successful", "broken"); got != 0 {
			t.Errorf("broken last_reload_successful = %v, want 0", got)
		}
		if got := series(h, "hotreload_last_reload_successful", "fine"); got != 1 {
			t.Errorf("fine last_reload_successful = %v, want 1", got)
		}
		if got := len(slow.times()); got != 1 {
			t.Errorf("slow target calls = %d, want 1", got)
		}
		h.stop(t)
	})
}

func TestReloadOnStart(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[on], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeTarget{name: "app"}
				h := start(t, []notifier.Target{f}, Options{ReloadOnStart: on})
				time.Sleep(time.Second)
				synctest.Wait()
				want := 0
				if on {
					want = 1
				}
				if got := len(f.times()); got != want {
					t.Errorf("reloads = %d, want %d", got, want)
				}
				h.stop(t)
			})
		})
	}
}

func TestShutdown(t *testing.T) {
	tests := []struct {
		name     string
		took     time.Duration
		grace    time.Duration
		wantStop time.Duration // how long Run takes to return after cancel
	}{
		{"in-flight reload finishes within the grace period", 2 * time.Second, 10 * time.Second, 2 * time.Second},
		{"in-flight reload is abandoned when the grace period ends", time.Minute, 5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeTarget{name: "app", took: tt.took}
				h := start(t, []notifier.Target{f}, Options{ShutdownGrace: tt.grace})
				h.change("/etc/a")
				synctest.Wait() // the request is in flight
				t0 := time.Now()
				h.stop(t)
				if got := time.Since(t0); got != tt.wantStop {
					t.Errorf("Run returned %v after cancel, want %v", got, tt.wantStop)
				}
			})
		})
	}
}

func TestLogsSayWhatHappens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf binary.Buffer
		down := errors.New("connection refused")
		f := &fakeTarget{name: "http://app/-/reload", errs: []error{down, down, down}}
		r := New(logfmt(&buf), prometheus.NewRegistry(), []notifier.Target{f}, Options{Backoff: fixedBackoff(time.Second)})
		ctx, cancel := context.WithCancel(context.Background())
		changes := make(chan watcher.Change)
		done := make(chan struct{})
		go func() { _ = r.Run(ctx, changes); close(done) }()
		changes <- watcher.Change{Dir: "/etc/config", Hash: [32]byte{1}}
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		<-done
		out := buf.String()
		for _, want := range []string{
			`msg="content changed, reloading" dirs=/etc/config`,
			`level=warn component=reloader target=http://app/-/reload msg="reload failed, retrying" attempt=1 retry_in=1s err="connection refused"`,
			`msg=reloaded attempts=4`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q; log:\n%s", want, out)
			}
		}
		// The same error again is not repeated at warning level.
		if n := strings.Count(out, "level=warn"); n != 1 {
			t.Errorf("warnings = %d, want 1 for three identical failures; log:\n%s", n, out)
		}
	})
}

// TestUnconfirmedNotRepeated: a reload that reached the app but could not
// be confirmed (a signal the app took without replacing its workers) is not
// sent again for the same content, neither by the backoff nor by the
// resync: that would only make the app read the same config again. The
// next change is delivered at once.
func TestUnconfirmedNotRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf binary.Buffer
		kept := fmt.Errorf("signal delivered but pid 7 (nginx) kept its workers: %w", notifier.ErrUnconfirmed)
		f := &fakeTarget{name: "signal:nginx", errs: []error{kept, kept, kept}}
		h := startWith(t, &buf, []notifier.Target{f}, Options{Backoff: fixedBackoff(time.Second), RetryInterval: 2 * time.Minute})
		h.change("/etc/nginx")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if got := len(f.times()); got != 1 {
			t.Errorf("signals sent for one change in 30 minutes = %d, want 1", got)
		}
		if got := testutil.ToFloat64(counter(h, "signal:nginx", "failure")); got != 1 {
			t.Errorf("failures = %v, want 1", got)
		}
		if got := series(h, "hotreload_last_reload_successful", "signal:nginx"); got != 0 {
			t.Errorf("hotreload_last_reload_successful = %v, want 0", got)
		}
		t0 := time.Now()
		h.change("/etc/nginx")
		synctest.Wait()
		if calls := f.times(); len(calls) != 2 || !calls[1].Equal(t0) {
			t.Errorf("the next change: calls at %v, want a second one at once (%v)", calls, t0)
		}
		h.stop(t)
		want := `level=error component=reloader target=signal:nginx msg="reload not confirmed, not sent again for this content: the next change tries again" attempts=1 err="signal delivered but pid 7 (nginx) kept its workers: reload not confirmed"`
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q; log:\n%s", want, buf.String())
		}
	})
}

// TestRefusedBacksOffToMinutes: a config that the app refuses (it answers,
// with a status such as 500) is tried again at the pace of RefusedBackoff,
// up to minutes apart, not every few seconds; the next change is delivered
// at once.
func TestRefusedBacksOffToMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := fmt.Errorf("POST http://app/-/reload: status 500, want 200: bad config: %w", &notifier.StatusError{Code: 500})
		f := &fakeTarget{name: "app"}
		f.setFailWith(refused)
		rnd := func() float64 { return 0.999999 }
		h := start(t, []notifier.Target{f}, Options{
			Backoff:        notifier.Backoff{Max: 5 * time.Second, Rand: rnd},
			RefusedBackoff: notifier.Backoff{Max: 5 * time.Minute, Rand: rnd},
		})
		h.change("/etc/config")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		calls := f.times()
		// 0.2s doubling to 5m takes 11 attempts and 6.8 minutes; then one
		// every 5 minutes. Every 5 s would be 350 attempts.
		if len(calls) < 10 || len(calls) > 17 {
			t.Errorf("attempts in 30 minutes = %d, want 10 to 17", len(calls))
		}
		if gap := calls[len(calls)-1].Sub(calls[len(calls)-2]); gap < 4*time.Minute {
			t.Errorf("last gap between attempts = %v, want about 5m", gap)
		}
		f.setFailWith(nil)
		t0 := time.Now()
		h.change("/etc/config")
		synctest.Wait()
		if last := f.times()[len(f.times())-1]; !last.Equal(t0) {
			t.Errorf("the next change was sent %v after it came, want at once", last.Sub(t0))
		}
		if got := series(h, "hotreload_last_reload_successful", "app"); got != 1 {
			t.Errorf("hotreload_last_reload_successful = %v after the next change, want 1", got)
		}
		h.stop(t)
	})
}

// TestHintLogged: the advice Options.Hint gives on an error is logged beside
// it, on the same line; an error without advice has no hint.
func TestHintLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf binary.Buffer
		refused, down := errors.New("app says no"), errors.New("connection refused")
		f := &fakeTarget{name: "app", errs: []error{refused, down}}
		hint := func(err error) string {
			if err == refused {
				return "ask nicely"
			}
			return ""
		}
		h := startWith(t, &buf, []notifier.Target{f}, Options{Backoff: fixedBackoff(time.Second), Hint: hint})
		h.change("/etc/config")
		time.Sleep(time.Minute)
		synctest.Wait()
		h.stop(t)
		out := buf.String()
		for _, want := range []string{
			`msg="reload failed, retrying" attempt=1 retry_in=1s err="app says no" hint="ask nicely"` + "\n",
			`msg="reload failed, retrying" attempt=2 retry_in=1s err="connection refused"` + "\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q; log:\n%s", want, out)
			}
		}
	})
}

// The reloader's "content changed, reloading" comes before the target's
// "reloaded" of that content, and before its request: tests and operators
// take its time as the moment the reload was asked for. A target that
// answers at once, on another thread, is where the order could flip.
func TestChangeLoggedBeforeReload(t *testing.T) {
	const rounds = 1000
	var buf binary.Buffer
	f := &fakeTarget{name: "app"}
	r := New(log.With(logfmt(&buf), "ts", log.DefaultTimestampUTC), prometheus.NewRegistry(), []notifier.Target{f}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan watcher.Change)
	done := make(chan struct{})
	go func() { _ = r.Run(ctx, changes); close(done) }()
	defer func() { cancel(); <-done }()
	for i := 1; i <= rounds; i++ {
		changes <- watcher.Change{Dir: "/etc/config", Hash: [32]byte{byte(i), byte(i >> 8)}}
		// A short interval: a thousand rounds wait here.
		poll.EventuallyEvery(t, 100*time.Microsecond, 10*time.Second,
			func() bool { return strings.Count(buf.String(), "msg=reloaded") >= i },
			func() string { return fmt.Sprintf("reload %d not logged; log:\n%s", i, buf.String()) })
	}
	calls := f.times()
	var changed []time.Time
	for i, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		want := `msg="content changed, reloading"`
		if i%2 == 1 {
			want = "msg=reloaded"
		}
		if !strings.Contains(line, want) {
			t.Fatalf("line %d is %q, want %s: each change is logged before its reload", i+1, line, want)
		}
		if i%2 == 0 {
			m := tsRE.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("line %d has no ts: %q", i+1, line)
			}
			ts, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				t.Fatal(err)
			}
			changed = append(changed, ts)
		}
	}
	for i, c := range calls {
		if c.Before(changed[i]) {
			t.Fatalf("request %d made at %s, before its change was logged at %s", i+1, c.Format(time.RFC3339Nano), changed[i].Format(time.RFC3339Nano))
		}
	}
}

var tsRE = regexp.MustCompile(`\bts=(\S+)`)

func logfmt(w *binary.Buffer) log.Logger {
	return level.NewFilter(log.NewLogfmtLogger(w), level.AllowInfo())
}
