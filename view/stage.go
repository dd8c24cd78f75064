package view

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotreload/hotreload/appdir"
	"github.com/hotreload/hotreload/internal/revision"
	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/watcher"
)

// Results of a view, as /-/content and hotreload_view_revision_info report
// them.
const (
	Applied  = "applied"  // every target took what runs
	Pending  = "pending"  // written, being delivered
	Rejected = "rejected" // the app refused a revision: the previous one was put back, or nothing was written
	Waiting  = "waiting"  // what the annotation names cannot run yet: what runs is kept
)

const (
	// warnEvery is how often a repeating problem with the annotations file
	// is logged at warning level.
	warnEvery = time.Minute
	// writeRetry is how long after a failed write of an app's directory it
	// is tried again.
	writeRetry = 5 * time.Second
)

// Options configure a Stage.
type Options struct {
	Views []Config
	// Annotations is the file that a downwardAPI volume writes the pod's
	// annotations to; "" for none.
	Annotations string
	// VolumeDirs are watched directories whose changes go to the reloader
	// unchanged (hotreload's --volume-dir).
	VolumeDirs []string
	// Lookup reads a variable for Expand; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
	// Key, if set, names the revision of a view with no rollout by an
	// HMAC of its content (hotreload's --content-key-file). Without it, a
	// ConfigMap's is named by a hash of its content, and a Secret's is not
	// named at all: a short secret is found from a plain hash by trying
	// every value (see reloader/value.go).
	Key []byte
	// Hint, if set, gives advice on a failed delivery (hotreload's
	// config.Hint), added to the error a pending view reports.
	Hint func(error) string
}

// Status is what a view reports.
type Status struct {
	Ref      string
	Dir      string // "" for a ref with no volume
	Want     string // the annotation's revision; "" for none
	Running  string // the revision the app's directory holds (or, for a ref with no volume, the last one delivered)
	Result   string // Applied, Pending, Rejected or Waiting
	Error    string // Rejected: why; Pending: why the last attempt to deliver failed, if it did; one line without content
	Reason   string // Waiting: what for
	Refused  string // Rejected: the revision refused
	At       time.Time
	Rollback int // last-known-good restores since start
}

// Stage runs the views between the watcher and the reloader: it reads the
// watcher's Changes, chooses and writes each view's revision, and sends
// the reloader a Change of each app's directory it wrote (keyed by the
// view's dir, or by its ref for a view with no volume), and the Changes
// of Options.VolumeDirs as they come. Create it with New, start it with
// Run, and give the reloader its Changes and Initial, and its Delivered
// and Refused as the reloader's hooks.
type Stage struct {
	logger      log.Logger
	views       []*view
	annotations string
	passthrough map[string]bool
	deps        map[string][]*view // watched directory -> views that read it
	annDir      string
	lookup      func(string) (string, bool)
	key         []byte
	hint        func(error) string
	m           *metrics

	out    chan watcher.Change
	wake   chan struct{}
	readyc chan struct{}
	ready  atomic.Bool

	// Owned by Run's goroutine.
	vols   map[string]volRead
	revs   map[string]string // the annotation: ref -> revision; nil for none
	warned map[string]time.Time

	mu      sync.Mutex
	initial map[string][32]byte // set before readyc is closed
	pending []watcher.Change    // rollbacks to send
}

type volRead struct {
	vol revision.Volume
	err error
}

// view is the state of one Config.
type view struct {
	cfg    Config
	key    string // the reloader's name for it: Dir, or the ref
	dir    *appdir.Dir
	logger log.Logger

	// Guarded by Stage.mu.
	want         string
	running      version
	has          bool
	prev         version // a ref with no volume: what ran before the last change
	result       string
	reason       string // Waiting: what for; Rejected: why; Pending: failure
	failure      string // why the last attempt to deliver what runs failed; "" when none did
	refusedRev   string
	at           time.Time
	refused      *refusal // not written again until the content or the annotation changes
	delivered    [32]byte // what every target has, as the reloader says
	hasDelivered bool
	retry        bool // the last write failed
	rollbacks    int
	labels       []string // the exported hotreload_view_revision_info series
}

// version is what an app's directory holds.
type version struct {
	rev  string   // the revision
	sum  [32]byte // the canonical sum of the content it came from, before expansion
	want string   // the annotation's revision when it was written
	hash [32]byte // the reloader's hash: of the content written
}

type refusal struct {
	sum  [32]byte
	want string
}

// label is the label of a version in the app's directory.
type label struct {
	Ref      string `json:"ref"`
	Revision string `json:"revision"`
	Sum      string `json:"sum"`
	Want     string `json:"want,omitempty"`
}

// New checks opts and returns a Stage. It opens every view's directory,
// repairing what a killed hotreload left there (see appdir.Open).
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Stage, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	logger = log.With(logger, "component", "view")
	if err := checkAll(opts.Views, opts.Annotations); err != nil {
		return nil, err
	}
	s := &Stage{
		logger:      logger,
		annotations: opts.Annotations,
		passthrough: map[string]bool{},
		deps:        map[string][]*view{},
		lookup:      opts.Lookup,
		key:         opts.Key,
		hint:        opts.Hint,
		m:           newMetrics(reg),
		out:         make(chan watcher.Change),
		wake:        make(chan struct{}, 1),
		readyc:      make(chan struct{}),
		vols:        map[string]volRead{},
		warned:      map[string]time.Time{},
	}
	if s.lookup == nil {
		s.lookup = os.LookupEnv
	}
	for _, d := range opts.VolumeDirs {
		s.passthrough[d] = true
	}
	if opts.Annotations != "" {
		s.annDir = filepath.Dir(opts.Annotations)
	}
	for _, c := range opts.Views {
		v := &view{cfg: c, key: c.Dir, logger: log.With(logger, "ref", c.Ref.String())}
		if !c.HasVolume() {
			v.key = c.Ref.String()
		} else {
			d, err := appdir.Open(c.Dir)
			if err != nil {
				return nil, fmt.Errorf("view %s: dir %w", c.Ref, err)
			}
			v.dir = d
			if cleaned := d.Cleaned(); len(cleaned) > 0 {
				level.Info(v.logger).Log("msg", "repaired the app's directory after an interrupted write", "dir", c.Dir, "repaired", fmt.Sprint(cleaned))
			}
			for _, p := range []string{c.Source, c.Stable} {
				if p != "" {
					s.deps[p] = append(s.deps[p], v)
				}
			}
		}
		if s.annDir != "" {
			s.deps[s.annDir] = append(s.deps[s.annDir], v)
		}
		s.m.rollbacks.WithLabelValues(v.cfg.Ref.String())
		s.views = append(s.views, v)
	}
	return s, nil
}

// Dirs returns the directories the watcher must watch for the views: the
// source and stable volumes, and the annotations file's directory.
func (s *Stage) Dirs() []string {
	return slices.Sorted(maps.Keys(s.deps))
}

// Changes returns the changes for the reloader.
func (s *Stage) Changes() <-chan watcher.Change { return s.out }

// Ready reports whether every view has made its first choice.
func (s *Stage) Ready() bool { return s.ready.Load() }

// Initial returns, once Run has made every view's first choice, what the
// app has at start: the watcher's first hashes of Options.VolumeDirs, and
// for each view the content its directory held at start (or, if it was
// empty, what the first choice wrote there, which the app reads when it
// starts). It is the reloader's Options.Initial.
func (s *Stage) Initial(ctx context.Context) (map[string][32]byte, error) {
	select {
	case <-s.readyc:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.initial), nil
}

// Run chooses and writes the views' revisions, at start and on every
// change read from in, until ctx is done. initial is the watcher's
// Initial.
func (s *Stage) Run(ctx context.Context, in <-chan watcher.Change, initial func(context.Context) (map[string][32]byte, error)) error {
	first, err := initial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("initial content: %w", err)
	}
	s.start(first)

	var retry *time.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select { // commits first: a write that follows keeps the version just delivered
		case <-s.wake:
			s.commitDelivered()
		default:
		}
		if !s.flush(ctx) {
			return nil
		}
		if retryC == nil && s.needRetry() {
			retry = time.NewTimer(writeRetry)
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			s.commitDelivered()
		case <-retryC:
			retryC = nil
			for _, v := range s.views {
				s.queue(s.update(v)...)
			}
		case c, ok := <-in:
			if !ok {
				in = nil // the watcher stopped; wait for ctx
				continue
			}
			if s.passthrough[c.Dir] {
				s.queue(c)
			}
			views := s.deps[c.Dir]
			if len(views) == 0 {
				continue
			}
			if c.Dir == s.annDir {
				s.readAnnotations()
			} else {
				s.vols[c.Dir] = readVolume(c.Dir)
			}
			for _, v := range views {
				s.queue(s.update(v)...)
			}
		}
	}
}

// start reads everything once, makes every view's first choice, and sets
// what Initial returns.
func (s *Stage) start(first map[string][32]byte) {
	s.readAnnotations()
	for d := range s.deps {
		if d != s.annDir {
			s.vols[d] = readVolume(d)
		}
	}
	initial := map[string][32]byte{}
	for d, h := range first {
		if s.passthrough[d] {
			initial[d] = h
		}
	}
	var changes []watcher.Change
	for _, v := range s.views {
		found, had := s.found(v)
		s.update(v)
		s.mu.Lock()
		switch {
		case had:
			initial[v.key] = found
		case v.has:
			initial[v.key] = v.running.hash // written now: the app reads it when it starts
		}
		if v.has && v.running.hash != initial[v.key] {
			changes = append(changes, watcher.Change{Dir: v.key, Hash: v.running.hash, Time: time.Now()})
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.initial = initial
	s.mu.Unlock()
	s.queue(changes...)
	s.ready.Store(true)
	close(s.readyc)
	for _, v := range s.views {
		s.mu.Lock()
		level.Info(v.logger).Log("msg", "view started", "dir", v.cfg.Dir, "want", v.want, "running", v.running.rev, "result", v.result)
		s.mu.Unlock()
	}
}

// found takes what v's directory holds at start as what runs, and returns
// the hash of what the app has: that content, or, when a last-known-good
// version is kept, that version's (the current one was never confirmed,
// and is delivered). For a ref with no volume it is the revision the
// annotation names now, which the app's container started with.
func (s *Stage) found(v *view) ([32]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.dir == nil {
		// With no annotation yet, "" stands for whatever the container
		// started with: a refused first revision goes back to it.
		want := s.revs[v.cfg.Ref.String()]
		v.running, v.has = version{rev: want, want: want, hash: envKey(v.cfg.Ref, want)}, true
		return v.running.hash, true
	}
	cur, ok := v.dir.Current()
	if !ok {
		return [32]byte{}, false
	}
	files, err := v.dir.Files()
	if err != nil {
		level.Warn(v.logger).Log("msg", "cannot read the app's directory at start, writing it anew", "dir", v.cfg.Dir, "err", err)
		return [32]byte{}, false
	}
	var l label
	_ = json.Unmarshal([]byte(cur.Label), &l) // a label that does not parse names no revision
	sum, _ := revision.ParseHex(l.Sum)
	v.running = version{rev: l.Revision, sum: sum, want: l.Want, hash: contentKey(revision.Sum(files))}
	v.has = true
	if good, ok := v.dir.LastGood(); ok {
		if g, err := revision.ReadVolume(filepath.Join(v.cfg.Dir, good.Name)); err == nil {
			level.Info(v.logger).Log("msg", "the version in the app's directory was never confirmed, delivering it", "revision", l.Revision)
			return contentKey(g.Sum()), true
		}
	}
	return v.running.hash, true
}

// update makes v's choice from what was read last, writes it if it
// differs from what runs, and returns the Change of v for the reloader.
func (s *Stage) update(v *view) []watcher.Change {
	want := s.revs[v.cfg.Ref.String()]
	s.mu.Lock()
	defer s.mu.Unlock()
	v.want = want
	if v.dir == nil {
		return s.updateEnv(v)
	}
	in := Input{Want: want, HasStable: v.cfg.Stable != ""}
	src := s.vols[v.cfg.Source]
	if in.SourceOK = src.err == nil; in.SourceOK {
		in.SourceSum = src.vol.Sum()
	}
	var st volRead
	if in.HasStable {
		st = s.vols[v.cfg.Stable]
		if st.err == nil && st.vol.Reserved != nil {
			r, err := revision.ParseRollout(st.vol.Reserved)
			if err == nil && r.Source != v.cfg.Ref.String() {
				err = fmt.Errorf("it is the stable copy of %s, not of %s", r.Source, v.cfg.Ref)
			}
			if err != nil {
				in.RolloutErr = err
			} else {
				in.Rollout = &r
			}
			in.StableSum = st.vol.Sum()
		}
	}
	c := Choose(in)
	if c.From == Keep {
		s.wait(v, c.Why)
		return nil
	}
	vol := src.vol
	if c.From == Stable {
		vol = st.vol
	}
	sum := vol.Sum()
	rev := c.Revision
	if rev == "" {
		rev = s.contentName(v.cfg.Ref, sum)
	}
	if v.refused != nil && v.refused.sum == sum && v.refused.want == want {
		return nil // refused: not again until the content or the annotation changes
	}
	v.refused = nil
	files, err := Expand(vol.Files, v.cfg.Expand, s.lookup)
	if err != nil {
		v.refused = &refusal{sum: sum, want: want}
		level.Error(v.logger).Log("msg", "revision not written, what runs is kept", "revision", rev, "err", err)
		s.setResult(v, Rejected, err.Error(), rev)
		return nil
	}
	hash := contentKey(revision.Sum(files))
	if v.has && v.running.hash == hash {
		v.running.rev, v.running.sum, v.running.want = rev, sum, want
		s.settle(v)
		return nil
	}
	s.commitLocked(v) // what was delivered becomes the version to go back to
	b, _ := json.Marshal(label{Ref: v.cfg.Ref.String(), Revision: rev, Sum: revision.Hex(sum), Want: want})
	if err := v.dir.Write(files, string(b)); err != nil {
		level.Error(v.logger).Log("msg", "cannot write the app's directory, keeping what runs; trying again in "+writeRetry.String(), "dir", v.cfg.Dir, "revision", rev, "err", err)
		v.retry = true
		s.setResult(v, Waiting, "cannot write the app's directory: "+err.Error(), "")
		return nil
	}
	v.retry = false
	level.Info(v.logger).Log("msg", "wrote revision", "revision", rev, "from", c.From, "want", want, "dir", v.cfg.Dir)
	v.running, v.has, v.failure = version{rev: rev, sum: sum, want: want, hash: hash}, true, ""
	s.setResult(v, Pending, "", "")
	return []watcher.Change{{Dir: v.key, Hash: hash, Time: time.Now()}}
}

// updateEnv is update for a ref with no volume: the revision follows the
// annotation alone, and a new one is a change to deliver (a restart, which
// reads the env vars again). No annotation keeps what runs.
func (s *Stage) updateEnv(v *view) []watcher.Change {
	want := v.want
	switch {
	case want == "" || v.has && v.running.rev == want:
		s.settle(v)
		return nil
	case v.refused != nil && v.refused.want == want:
		return nil
	}
	v.refused = nil
	v.prev = v.running
	v.running, v.has, v.failure = version{rev: want, want: want, hash: envKey(v.cfg.Ref, want)}, true, ""
	level.Info(v.logger).Log("msg", "the pod's annotation names a new revision", "revision", want)
	s.setResult(v, Pending, "", "")
	return []watcher.Change{{Dir: v.key, Hash: v.running.hash, Time: time.Now()}}
}

// wait reports v waiting for why, logged when it changes.
func (s *Stage) wait(v *view, why string) {
	if v.result != Waiting || v.reason != why {
		level.Info(v.logger).Log("msg", "waiting, what runs is kept", "want", v.want, "running", v.running.rev, "for", why)
	}
	s.setResult(v, Waiting, why, "")
}

// settle sets v's result once what runs is what it should run: applied
// when every target has it, pending until then (with why the last attempt
// failed, if it did). A refused revision stays reported until another one
// is chosen.
func (s *Stage) settle(v *view) {
	switch {
	case v.refused != nil:
	case v.hasDelivered && v.delivered == v.running.hash:
		v.failure = ""
		s.setResult(v, Applied, "", "")
	default:
		s.setResult(v, Pending, v.failure, "")
	}
}

func (s *Stage) setResult(v *view, result, reason, refused string) {
	if v.result != result || v.reason != reason || v.refusedRev != refused {
		v.at = time.Now()
	}
	v.result, v.reason, v.refusedRev = result, reason, refused
	labels := []string{v.cfg.Ref.String(), v.running.rev, result}
	if slices.Equal(labels, v.labels) {
		return
	}
	if v.labels != nil {
		s.m.info.DeleteLabelValues(v.labels...)
	}
	s.m.info.WithLabelValues(labels...).Set(1)
	v.labels = labels
}

// Delivered records that every target has hash for the key (a view's dir
// or ref); it is the reloader's hook, called with the reloader's lock
// held, so it only records and wakes Run.
func (s *Stage) Delivered(key string, hash [32]byte) {
	s.mu.Lock()
	for _, v := range s.views {
		if v.key != key {
			continue
		}
		v.delivered, v.hasDelivered = hash, true
		if v.has && v.running.hash == hash && v.result != Waiting {
			s.settle(v)
		}
	}
	s.mu.Unlock()
	s.poke()
}

// commitDelivered drops the last-known-good version of every view whose
// current version every target has.
func (s *Stage) commitDelivered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.views {
		s.commitLocked(v)
	}
}

func (s *Stage) commitLocked(v *view) {
	if v.dir == nil || !v.hasDelivered || !v.has || v.delivered != v.running.hash {
		return
	}
	if err := v.dir.Commit(); err != nil {
		level.Warn(v.logger).Log("msg", "cannot remove the last-known-good version, trying again at the next write", "dir", v.cfg.Dir, "err", err)
	}
}

// Refused is the reloader's hook for a failed attempt to deliver content
// (directory or ref -> hash). When err is a refusal (notifier.ErrRefused,
// or notifier.ErrUnconfirmed: a signalled master kept its workers),
// every view whose current version is in content and was not delivered
// before is put back to its last-known-good version, reported rejected and
// counted, and its revision is not written again until the content or the
// annotation changes; Refused then returns true, and the reloader stops
// retrying: the Change of the version put back follows. Otherwise it
// returns false and the reloader retries as it would.
//
// Any other failure is recorded as why the view is still pending (one
// line, no content: notifier.Reason and the hint), so that /-/content
// shows, and a controller can act on, what stops the delivery (no
// process, EPERM, a refused connection) instead of a bare "pending".
func (s *Stage) Refused(err error, content map[string][32]byte) bool {
	if !errors.Is(err, notifier.ErrRefused) && !errors.Is(err, notifier.ErrUnconfirmed) {
		s.failed(err, content)
		return false
	}
	reason, ok := notifier.RefusedReason(err)
	if !ok {
		// An unconfirmed signal: "signal delivered but pid 12 (nginx)
		// kept its workers", without the advice that follows.
		reason, _, _ = strings.Cut(err.Error(), ":")
	}
	s.mu.Lock()
	handled := false
	for _, v := range s.views {
		h, ok := content[v.key]
		if !ok || !v.has || h != v.running.hash || v.hasDelivered && v.delivered == h {
			continue // not the content refused, or content the app took before
		}
		refusedRev := v.running.rev
		v.refused = &refusal{sum: v.running.sum, want: v.running.want}
		v.failure = ""
		back := ""
		switch {
		case v.dir != nil:
			good, rerr := v.dir.Restore()
			if rerr != nil {
				level.Error(v.logger).Log("msg", "the app refused the revision, and there is no previous version to put back", "revision", refusedRev, "reason", reason, "err", rerr)
				s.setResult(v, Rejected, reason, refusedRev)
				handled = true
				continue
			}
			files, ferr := v.dir.Files()
			if ferr != nil {
				level.Warn(v.logger).Log("msg", "cannot read the version put back", "err", ferr)
			}
			var l label
			_ = json.Unmarshal([]byte(good.Label), &l)
			sum, _ := revision.ParseHex(l.Sum)
			v.running = version{rev: l.Revision, sum: sum, want: l.Want, hash: contentKey(revision.Sum(files))}
			v.rollbacks++
			s.m.rollbacks.WithLabelValues(v.cfg.Ref.String()).Inc()
			back = l.Revision
		default: // a ref with no volume: back to the revision before
			v.running = v.prev
			back = v.prev.rev
		}
		level.Warn(v.logger).Log("msg", "the app refused the revision; put the previous one back, not trying it again until the content or the annotation changes",
			"revision", refusedRev, "back_to", back, "reason", reason)
		s.setResult(v, Rejected, reason, refusedRev)
		s.pending = append(s.pending, watcher.Change{Dir: v.key, Hash: v.running.hash, Time: time.Now()})
		handled = true
	}
	s.mu.Unlock()
	s.poke()
	return handled
}

// failed records err as why each view whose current version is in
// content, and is not delivered yet, is still pending.
func (s *Stage) failed(err error, content map[string][32]byte) {
	why := notifier.Reason(err)
	if s.hint != nil {
		if h := s.hint(err); h != "" {
			why += " (" + h + ")"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.views {
		h, ok := content[v.key]
		if !ok || !v.has || h != v.running.hash || v.result != Pending {
			continue
		}
		v.failure = why
		s.setResult(v, Pending, why, "")
	}
}

// Views reports every view, in the order given.
func (s *Stage) Views() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.views))
	for _, v := range s.views {
		st := Status{Ref: v.cfg.Ref.String(), Dir: v.cfg.Dir, Want: v.want, Running: v.running.rev, Result: v.result, At: v.at, Rollback: v.rollbacks}
		switch v.result {
		case Rejected:
			st.Error, st.Refused = v.reason, v.refusedRev
		case Pending:
			st.Error = v.reason
		case Waiting:
			st.Reason = v.reason
		}
		out = append(out, st)
	}
	return out
}

func (s *Stage) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// queue adds changes to send.
func (s *Stage) queue(cs ...watcher.Change) {
	if len(cs) == 0 {
		return
	}
	s.mu.Lock()
	s.pending = append(s.pending, cs...)
	s.mu.Unlock()
}

// flush sends the pending changes; it reports false if ctx ended first.
// The lock is not held while sending: the reloader may be calling
// Delivered, with its own lock held, while its reader waits for it.
func (s *Stage) flush(ctx context.Context) bool {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.mu.Unlock()
			return true
		}
		c := s.pending[0]
		s.pending = s.pending[1:]
		s.mu.Unlock()
		select {
		case s.out <- c:
		case <-ctx.Done():
			return false
		}
	}
}

func (s *Stage) needRetry() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.views, func(v *view) bool { return v.retry })
}

// readAnnotations reads the annotations file into s.revs. A file that is
// missing or does not parse is no annotation, with a warning at most once
// a minute for the same problem.
func (s *Stage) readAnnotations() {
	if s.annotations == "" {
		return
	}
	s.revs = nil
	b, err := os.ReadFile(s.annotations)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			s.warn("the pod's annotations file does not exist, taking it as no annotation: mount a downwardAPI volume of metadata.annotations there", err)
		} else {
			s.warn("cannot read the pod's annotations file, taking it as no annotation", err)
		}
		return
	}
	a, err := ParseAnnotations(b)
	if err == nil {
		s.revs, err = Revisions(a)
	}
	if err != nil {
		s.warn("the pod's annotations do not parse, taking them as no annotation", err)
	}
}

func (s *Stage) warn(msg string, err error) {
	key := msg + err.Error()
	if time.Since(s.warned[key]) < warnEvery {
		return
	}
	s.warned[key] = time.Now()
	level.Warn(s.logger).Log("msg", msg, "file", s.annotations, "err", err)
}

func readVolume(dir string) volRead {
	v, err := revision.ReadVolume(dir)
	return volRead{vol: v, err: err}
}

// contentName names content with sum, for a view with no rollout: see
// Options.Key.
func (s *Stage) contentName(ref Ref, sum [32]byte) string {
	switch {
	case s.key != nil:
		m := hmac.New(sha256.New, s.key)
		m.Write([]byte("hotreload view revision\x00"))
		m.Write(sum[:])
		return hex.EncodeToString(m.Sum(nil)[:6])
	case ref.Kind == "secret":
		return ""
	}
	return shortHex(contentKey(sum))
}

// Sensitive reports, for a key the Stage sends the reloader, whether its
// content value may let someone learn Secret data (a view of a Secret;
// never a ref with no volume, whose hash is of a revision's name), and
// whether key is one of the Stage's at all. It completes the reloader's
// Options.Sensitive.
func (s *Stage) Sensitive(key string) (sensitive, ok bool) {
	for _, v := range s.views {
		if v.key == key {
			return v.dir != nil && v.cfg.Ref.Kind == "secret", true
		}
	}
	return false, false
}

// contentKey is the reloader's hash of a view whose content has the
// canonical sum sum. It is not the sum itself, which the contract keeps
// out of metrics and logs.
func contentKey(sum [32]byte) [32]byte {
	return sha256.Sum256(append([]byte("hotreload view content\x00"), sum[:]...))
}

// envKey is the reloader's hash of a ref with no volume at revision rev.
func envKey(ref Ref, rev string) [32]byte {
	return sha256.Sum256([]byte("hotreload view revision\x00" + ref.String() + "\x00" + rev))
}

// shortHex is the first 12 hex digits of h, as hotreload names content in
// its metrics.
func shortHex(h [32]byte) string { return hex.EncodeToString(h[:6]) }
