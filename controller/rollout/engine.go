package rollout

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hotreload/hotreload/internal/revision"
)

// The engine: one pure function, Decide, from what the controller read
// (the policy, its state, the source's sum, the stable copy's reserved
// key, the pods and what their sidecars report) to what it must write.
// The controller (controller.go) reads, calls it, and writes in the order
// the contract asks: the state first, with a precondition, then the
// stable copy, then the pods.

// Actions of the hotreload.dev/action annotation.
const (
	ActionPromote = "promote"
	ActionAbort   = "abort"
)

// Reserved is the stable copy's reserved key: revision.Rollout, which the
// sidecar reads, and the revision last aborted, which only the controller
// reads (the sidecar ignores fields it does not know). The aborted sum is
// kept there, beside the content, so that a Secret's sum is never written
// anywhere less protected than the Secret.
type Reserved struct {
	revision.Rollout
	Aborted *revision.Pin `json:"aborted,omitempty"`
}

// ParseReserved reads a reserved key.
func ParseReserved(b []byte) (Reserved, error) {
	r, err := revision.ParseRollout(b)
	if err != nil {
		return Reserved{}, err
	}
	var extra struct {
		Aborted *revision.Pin `json:"aborted"`
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return Reserved{}, fmt.Errorf("%s: %w", revision.ReservedKey, err)
	}
	if a := extra.Aborted; a != nil {
		if _, err := revision.ParseHex(a.SHA256); err != nil || a.Revision == "" {
			extra.Aborted = nil // the controller's own: forget it rather than fail
		}
	}
	return Reserved{Rollout: r, Aborted: extra.Aborted}, nil
}

// Marshal writes r as the reserved key holds it.
func (r Reserved) Marshal() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // strings only
	}
	return b
}

// State is the part of a rollout's status that Decide owns.
type State struct {
	Phase          string
	Revision       string // the candidate, or the last one
	StableRevision string
	Step           int
	StartedAt      time.Time
	StepStartedAt  time.Time
	BakeStartedAt  time.Time
	Message        string
	LastAction     string
	Updated        int
	Healthy        int
	Total          int
}

// Member is a pod that uses the source, as Decide sees it.
type Member struct {
	Name string
	// Want is the revision the pod's annotation names for the source; ""
	// for none.
	Want string
	// Running: the pod runs and is not being deleted, so that a new
	// revision reaches it now. Only running pods are chosen.
	Running bool
	Ready   bool
	// Restarted: a container restarted since the pod was seen on the
	// candidate (in restart mode: since it applied it).
	Restarted bool
	// Settling: in restart mode, the pod reports the candidate applied
	// (its app restarted) but has not been Ready since: it is waited for,
	// not aborted, until the progress deadline.
	Settling bool
	// Env: the pod uses the source only through env vars, in restart
	// mode: a new revision restarts its app, which reads the source as it
	// is then, so it never goes back to stable.
	Env bool
	// Refused says why the pod is left where it is (restartPolicy Never,
	// a single replica without consent, ...); "" for none.
	Refused string
	// Report is what its sidecar reports for the source; nil when it
	// could not be scraped (ReportErr says why) or was not asked.
	Report    *Report
	ReportErr string
}

// Report is one view of a sidecar's GET /-/content.
type Report struct {
	Want     string `json:"want"`
	Running  string `json:"running"`
	Result   string `json:"result"`
	Error    string `json:"error,omitempty"`
	Rejected string `json:"rejected,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Results a sidecar reports.
const (
	ResultApplied  = "applied"
	ResultRejected = "rejected"
	ResultPending  = "pending"
	ResultWaiting  = "waiting"
)

// AnalysisResult is the outcome of the analysis query.
type AnalysisResult struct {
	Value float64
	Err   error // the query failed or did not answer
}

// Input is what Decide decides from.
type Input struct {
	Policy    Policy
	PolicyErr error // the policy is not valid: nothing moves
	State     State
	Now       time.Time
	SourceRV  string
	SourceSum [32]byte
	Stable    Reserved // the stable copy's reserved key (the copy exists)
	Members   []Member // sorted by name
	Action    string   // ActionPromote, ActionAbort or ""
	// Analysis is the query's outcome, run for this decision; nil when
	// the policy has none or it was not due.
	Analysis *AnalysisResult
}

// Event is an Event to record on the rollout and on the source.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Output is what Decide decides.
type Output struct {
	State State
	// Stable is the stable copy's reserved key as it must be; Promote
	// means its content becomes the source's (whose sum is the new
	// stable's).
	Stable  Reserved
	Promote bool
	// Pods maps a pod's name to the revision its annotation must name,
	// for the pods whose annotation must change.
	Pods map[string]string
	// ActionDone: the action was handled (or ignored): remove it.
	ActionDone bool
	Events     []Event
	// Requeue: decide again after this long; 0 for no need.
	Requeue time.Duration
}

// Reasons of the Events.
const (
	ReasonStarted       = "RolloutStarted"
	ReasonStepStarted   = "StepStarted"
	ReasonStepDone      = "StepPromoted"
	ReasonPromoted      = "RolloutPromoted"
	ReasonAborted       = "RolloutAborted"
	ReasonPaused        = "RolloutPaused"
	ReasonResumed       = "RolloutResumed"
	ReasonInvalid       = "PolicyInvalid"
	ReasonPodRejected   = "PodRejected"
	ReasonActionIgnored = "ActionIgnored"
	// ReasonRestartAssigned, on a pod in restart mode: it was given a new
	// revision, which its sidecar applies by restarting the app.
	ReasonRestartAssigned = "RestartAssigned"
)

// PollInterval is how often a running rollout is decided again, to read
// the pods' reports.
const PollInterval = time.Second

// retryFailed is how often a rollout that could not start tries again.
const retryFailed = 30 * time.Second

// Decide applies the rules of docs/design/fleet.md, "The controller's
// rollout".
func Decide(in Input) Output {
	d := &decision{in: in, out: Output{State: in.State, Stable: in.Stable, Pods: map[string]string{}}}
	d.run()
	return d.out
}

type decision struct {
	in  Input
	out Output
}

func (d *decision) event(warning bool, reason, format string, args ...any) {
	d.out.Events = append(d.out.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (d *decision) run() {
	in, st := d.in, &d.out.State
	stable := in.Stable.Stable
	st.StableRevision = stable.Revision
	d.out.ActionDone = in.Action != ""
	d.count(nil)

	if in.PolicyErr != nil {
		msg := "policy invalid: " + in.PolicyErr.Error()
		if st.Phase != PhaseFailed || st.Message != msg {
			d.event(true, ReasonInvalid, "%s", msg)
		}
		st.Phase, st.Message, st.Step = PhaseFailed, msg, 0
		return
	}
	cand := in.Stable.Candidate
	switch {
	case in.SourceSum == stable.Sum():
		if cand != nil && (st.Phase == PhaseProgressing || st.Phase == PhasePaused) {
			d.event(false, ReasonAborted, "the source is back at stable revision %s: candidate %s dropped", stable.Revision, cand.Revision)
		}
		d.settle(PhaseHealthy, fmt.Sprintf("every pod runs stable revision %s", stable.Revision))
		d.out.Stable.Candidate, d.out.Stable.Aborted = nil, nil
	case cand != nil && in.SourceSum == cand.Sum():
		// A state stored, and the stable copy not written after it (the
		// replica stopped in between): finish what the state says.
		switch {
		case in.State.Phase == PhaseHealthy && in.State.StableRevision == cand.Revision:
			d.promote(fmt.Sprintf("revision %s is stable (the promotion is completed)", cand.Revision))
			return
		case in.State.Phase == PhaseAborted && in.State.Revision == cand.Revision:
			d.abort(strings.TrimPrefix(in.State.Message, "revision "+cand.Revision+" aborted: "))
			return
		}
		if st.Revision != cand.Revision || (st.Phase != PhaseProgressing && st.Phase != PhasePaused) {
			// A state lost (a new leader of a restart policy, whose state
			// is in memory) or behind the stable copy: resume the step
			// the pods show.
			d.resume(cand.Revision)
		}
		d.progress()
	case in.Stable.Aborted != nil && in.SourceSum == in.Stable.Aborted.Sum():
		if st.Phase != PhaseAborted {
			st.Phase, st.Revision = PhaseAborted, in.Stable.Aborted.Revision
			st.Message = fmt.Sprintf("revision %s was aborted; every pod runs stable revision %s until the source changes again", st.Revision, stable.Revision)
		}
		st.Step = 0
		d.ignoreAction()
		d.toStable()
	default:
		d.start()
	}
}

// settle is the end of a rollout: phase with every pod on stable.
func (d *decision) settle(phase, msg string) {
	st := &d.out.State
	d.ignoreAction()
	st.Phase, st.Message, st.Step = phase, msg, 0
	st.StepStartedAt, st.BakeStartedAt = time.Time{}, time.Time{}
	d.toStable()
}

// toStable moves every pod back to stable, but those whose env vars hold
// what they hold (a restart would read the source as it is) and the
// refused, which are pinned.
func (d *decision) toStable() {
	rev := d.in.Stable.Stable.Revision
	for _, m := range d.in.Members {
		switch {
		case m.Refused != "":
			d.pin(m)
		case m.Env:
		case m.Running && m.Want != rev:
			d.out.Pods[m.Name] = rev
		}
	}
}

// pin keeps a refused pod where it is: one that names no revision is
// given the stable one it runs, so that a promotion of the stable copy
// does not change what it runs either.
func (d *decision) pin(m Member) {
	if m.Want == "" && !m.Env && m.Running {
		d.out.Pods[m.Name] = d.in.Stable.Stable.Revision
	}
}

func (d *decision) ignoreAction() {
	if d.in.Action != "" {
		d.event(false, ReasonActionIgnored, "hotreload.dev/action=%s ignored: no rollout runs", d.in.Action)
	}
}

// start starts a rollout of the source's content.
func (d *decision) start() {
	in, st := d.in, &d.out.State
	if q := in.Policy.Analysis; q != nil {
		var why string
		switch a := in.Analysis; {
		case a == nil:
			why = "the analysis query has not run"
		case a.Err != nil:
			why = "the analysis query fails: " + a.Err.Error()
		case !within(q, a.Value):
			why = fmt.Sprintf("the analysis query is already out of bounds: %s", bounds(q, a.Value))
		}
		if why != "" {
			msg := fmt.Sprintf("revision %s does not start: %s; trying again every %s", in.SourceRV, why, retryFailed)
			if st.Message != msg {
				d.event(true, ReasonInvalid, "%s", msg)
			}
			st.Phase, st.Message, st.Step = PhaseFailed, msg, 0
			d.out.Requeue = retryFailed
			d.toStable()
			return
		}
	}
	*st = State{
		Phase: PhaseProgressing, Revision: in.SourceRV, StableRevision: in.Stable.Stable.Revision,
		Step: 1, StartedAt: in.Now, StepStartedAt: in.Now, LastAction: st.LastAction,
	}
	d.out.Stable.Candidate = &revision.Pin{Revision: in.SourceRV, SHA256: revision.Hex(in.SourceSum)}
	d.out.Stable.Aborted = nil
	d.event(false, ReasonStarted, "rolling out revision %s (stable %s) in %d steps", in.SourceRV, st.StableRevision, in.Policy.StepCount(d.eligible()))
	d.progress()
}

// resume takes up the rollout of revision rev at the step its pods show.
func (d *decision) resume(rev string) {
	st := &d.out.State
	total := d.eligible()
	on := 0
	for _, m := range d.in.Members {
		if m.Refused == "" && m.Want == rev {
			on++
		}
	}
	step := 1
	for step < d.in.Policy.StepCount(total) && d.in.Policy.Target(step, total) < on {
		step++
	}
	if st.Revision != rev || st.Step < 1 {
		st.StartedAt = d.in.Now
		st.Step = step
	}
	st.Phase, st.Revision = PhaseProgressing, rev
	st.StepStartedAt, st.BakeStartedAt = d.in.Now, time.Time{}
}

func (d *decision) eligible() int {
	n := 0
	for _, m := range d.in.Members {
		if m.Refused == "" {
			n++
		}
	}
	return n
}

// progress runs a step of the rollout of the candidate.
func (d *decision) progress() {
	in, st := d.in, &d.out.State
	pol := in.Policy
	rev := st.Revision
	switch in.Action {
	case ActionAbort:
		st.LastAction = ActionAbort + " " + rev
		d.abort("aborted by hotreload.dev/action=abort")
		return
	case ActionPromote:
		st.LastAction = ActionPromote + " " + rev
		d.promote("promoted by hotreload.dev/action=promote")
		return
	}
	switch {
	case pol.Paused && st.Phase == PhaseProgressing:
		st.Phase = PhasePaused
		d.event(false, ReasonPaused, "paused at step %d: no pod moves until spec.paused is false", st.Step)
	case !pol.Paused && st.Phase == PhasePaused:
		st.Phase = PhaseProgressing
		st.StepStartedAt, st.BakeStartedAt = in.Now, time.Time{}
		d.event(false, ReasonResumed, "resumed at step %d", st.Step)
	}

	total := d.eligible()
	steps := pol.StepCount(total)
	st.Step = min(max(st.Step, 1), steps)
	n := pol.Target(st.Step, total)
	chosen := d.choose(rev, n, st.Phase == PhasePaused)

	// The health of every pod on the candidate.
	var pending, notReported []string
	healthy := 0
	for _, m := range chosen {
		if m.Want != rev {
			pending = append(pending, m.Name+" (being updated)")
			continue
		}
		r := m.Report
		switch {
		case r != nil && r.Result == ResultRejected && r.Rejected == rev:
			d.abort(fmt.Sprintf("pod %s rejected revision %s: %s", m.Name, rev, oneLine(r.Error)))
			return
		case r != nil && r.Running == rev && r.Result == ResultPending && r.Error != "" && m.Ready:
			// Its sidecar cannot deliver the candidate (no app process,
			// EPERM, a refused connection): waiting for the deadline
			// changes nothing. A pod that is not Ready is starting or
			// restarting: it is waited for, with the error in the message.
			d.abort(fmt.Sprintf("pod %s cannot apply revision %s: %s", m.Name, rev, oneLine(r.Error)))
			return
		case r != nil && r.Running == rev && r.Result == ResultApplied && m.Settling:
			pending = append(pending, m.Name+" (restarted, not Ready yet)")
		case r != nil && r.Running == rev && r.Result == ResultApplied:
			switch {
			case !m.Ready:
				d.abort(fmt.Sprintf("pod %s is not Ready on revision %s", m.Name, rev))
				return
			case m.Restarted:
				d.abort(fmt.Sprintf("pod %s restarted a container on revision %s", m.Name, rev))
				return
			}
			healthy++
		case r == nil:
			notReported = append(notReported, fmt.Sprintf("%s (not reported: %s)", m.Name, oneLine(m.ReportErr)))
		default:
			why := r.Result
			if r.Reason != "" {
				why += ": " + oneLine(r.Reason)
			}
			if r.Error != "" && r.Result == ResultPending {
				why += ": " + oneLine(r.Error)
			}
			pending = append(pending, fmt.Sprintf("%s (%s)", m.Name, why))
		}
	}
	d.count(chosen)
	if q := pol.Analysis; q != nil && in.Analysis != nil {
		if a := in.Analysis; a.Err != nil {
			d.abort("the analysis query fails: " + a.Err.Error())
			return
		} else if !within(q, a.Value) {
			d.abort("the analysis query is out of bounds: " + bounds(q, a.Value))
			return
		}
	}

	done := len(chosen) >= n && healthy == n
	waiting := slices.Concat(pending, notReported)
	if !done {
		st.BakeStartedAt = time.Time{}
		if st.Phase == PhaseProgressing && !st.StepStartedAt.IsZero() && in.Now.Sub(st.StepStartedAt) >= pol.ProgressDeadline {
			missing := n - len(chosen)
			what := strings.Join(first(waiting, 5), ", ")
			if missing > 0 {
				what = strings.TrimPrefix(what+fmt.Sprintf(", %d pods not running to choose", missing), ", ")
			}
			d.abort(fmt.Sprintf("step %d/%d did not complete within the progress deadline %s: %s", st.Step, steps, pol.ProgressDeadline, what))
			return
		}
		st.Message = fmt.Sprintf("step %d/%d: %d of %d pods applied revision %s", st.Step, steps, healthy, n, rev)
		if len(waiting) > 0 {
			st.Message += "; waiting for " + strings.Join(first(waiting, 3), ", ")
		}
		if st.Phase == PhasePaused {
			st.Message = "paused: " + st.Message
		}
		d.out.Requeue = PollInterval
		return
	}
	if st.BakeStartedAt.IsZero() {
		st.BakeStartedAt = in.Now
	}
	until := st.BakeStartedAt.Add(pol.BakeTime)
	if st.Phase == PhasePaused || in.Now.Before(until) {
		st.Message = fmt.Sprintf("step %d/%d: %d pods on revision %s, baking until %s", st.Step, steps, n, rev, until.UTC().Format(time.RFC3339))
		if st.Phase == PhasePaused {
			st.Message = fmt.Sprintf("paused: step %d/%d: %d pods on revision %s, healthy", st.Step, steps, n, rev)
		}
		d.out.Requeue = min(PollInterval, max(until.Sub(in.Now), time.Millisecond))
		return
	}
	if st.Step >= steps {
		d.promote(fmt.Sprintf("every step done: revision %s is stable", rev))
		return
	}
	d.event(false, ReasonStepDone, "step %d/%d done: %d pods healthy on revision %s for %s", st.Step, steps, n, rev, pol.BakeTime)
	st.Step++
	st.StepStartedAt, st.BakeStartedAt = in.Now, time.Time{}
	n = pol.Target(st.Step, total)
	chosen = d.choose(rev, n, false)
	d.count(chosen)
	d.event(false, ReasonStepStarted, "step %d/%d: %d pods to revision %s", st.Step, steps, n, rev)
	st.Message = fmt.Sprintf("step %d/%d: %d pods to revision %s", st.Step, steps, n, rev)
	d.out.Requeue = PollInterval
}

// choose returns the pods that run the candidate at this step: those on
// it already, then running pods by name (Ready ones first) up to n, and
// sets every pod's annotation accordingly. Paused, no pod is added.
func (d *decision) choose(rev string, n int, paused bool) []Member {
	var chosen, rest []Member
	for _, m := range d.in.Members {
		switch {
		case m.Refused != "":
			d.pin(m)
		case m.Want == rev:
			chosen = append(chosen, m)
		case m.Running:
			rest = append(rest, m)
		}
	}
	slices.SortStableFunc(rest, func(a, b Member) int {
		switch {
		case a.Ready == b.Ready:
			return strings.Compare(a.Name, b.Name)
		case a.Ready:
			return -1
		}
		return 1
	})
	if !paused {
		for len(chosen) < n && len(rest) > 0 {
			chosen = append(chosen, rest[0])
			d.out.Pods[rest[0].Name] = rev
			rest = rest[1:]
		}
	}
	stable := d.in.Stable.Stable.Revision
	for _, m := range rest {
		if !m.Env && m.Want != stable {
			d.out.Pods[m.Name] = stable
		}
	}
	return chosen
}

func (d *decision) count(chosen []Member) {
	st := &d.out.State
	st.Total = d.eligible()
	st.Updated, st.Healthy = 0, 0
	rev := st.Revision
	for _, m := range chosen {
		if m.Want != rev && d.out.Pods[m.Name] != rev {
			continue
		}
		st.Updated++
		if r := m.Report; m.Want == rev && r != nil && r.Running == rev && r.Result == ResultApplied && m.Ready && !m.Restarted && !m.Settling {
			st.Healthy++
		}
	}
}

// promote makes the candidate stable.
func (d *decision) promote(why string) {
	st := &d.out.State
	rev := st.Revision
	d.out.Promote = true
	d.out.Stable.Stable = revision.Pin{Revision: rev, SHA256: revision.Hex(d.in.SourceSum)}
	d.out.Stable.Candidate, d.out.Stable.Aborted = nil, nil
	st.Phase, st.StableRevision, st.Step = PhaseHealthy, rev, 0
	st.StepStartedAt, st.BakeStartedAt = time.Time{}, time.Time{}
	st.Message = why
	d.event(false, ReasonPromoted, "%s", why)
	for _, m := range d.in.Members {
		switch {
		case m.Refused != "":
			d.pin(m)
		case m.Running && m.Want != rev:
			d.out.Pods[m.Name] = rev
		}
	}
	d.count(nil)
}

// abort rolls the candidate back.
func (d *decision) abort(why string) {
	st := &d.out.State
	cand := d.out.Stable.Candidate
	if cand == nil {
		cand = &revision.Pin{Revision: st.Revision, SHA256: revision.Hex(d.in.SourceSum)}
	}
	d.out.Stable.Aborted = cand
	d.out.Stable.Candidate = nil
	st.Phase, st.Step = PhaseAborted, 0
	st.StepStartedAt, st.BakeStartedAt = time.Time{}, time.Time{}
	st.Message = fmt.Sprintf("revision %s aborted: %s; every pod back on stable revision %s", st.Revision, why, st.StableRevision)
	d.event(true, ReasonAborted, "%s", st.Message)
	clear(d.out.Pods)
	d.toStable()
	d.count(nil)
	d.out.Requeue = 0
}

func within(q *Query, v float64) bool {
	return (q.Max == nil || v <= *q.Max) && (q.Min == nil || v >= *q.Min)
}

func bounds(q *Query, v float64) string {
	s := fmt.Sprintf("%g", v)
	if q.Min != nil {
		s += fmt.Sprintf(", min %g", *q.Min)
	}
	if q.Max != nil {
		s += fmt.Sprintf(", max %g", *q.Max)
	}
	return s
}

func first(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("%d more", len(s)-n))
}

// oneLine keeps the first line of s, at most 200 bytes.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
