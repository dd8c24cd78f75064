package rollout

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults and bounds of a policy. examples/controller/crd.yaml says the
// same to the API server; Parse checks them again for a CRD installed
// without its validation.
const (
	DefaultProgressDeadline = 5 * time.Minute
	DefaultAnalysisInterval = 10 * time.Second
	MaxSteps                = 20
	MaxBakeTime             = 24 * time.Hour
	MinProgressDeadline     = 10 * time.Second
	MaxProgressDeadline     = 24 * time.Hour
	// StableSuffix names a source's stable copy: <source>-hotreload-stable.
	StableSuffix = "-hotreload-stable"
	// MaxSourceName is the longest source name whose stable copy's name
	// is still a valid name (253 characters).
	MaxSourceName = 253 - len(StableSuffix)
)

// Step is one step of a policy: a percent of the pods or a count.
type Step struct {
	Percent int // 1..100, or 0 for a count
	Count   int // >= 1, or 0 for a percent
}

func (s Step) String() string {
	if s.Percent > 0 {
		return strconv.Itoa(s.Percent) + "%"
	}
	return strconv.Itoa(s.Count)
}

// Pods is how many of total pods the step runs on the candidate:
// ceil(percent × total) or the count, at least 1 and at most total.
func (s Step) Pods(total int) int {
	n := s.Count
	if s.Percent > 0 {
		n = int(math.Ceil(float64(s.Percent) * float64(total) / 100))
	}
	return max(min(n, total), min(1, total))
}

// ParseStep reads "10%" or "3".
func ParseStep(s string) (Step, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 || p != strconv.Itoa(n) {
			return Step{}, fmt.Errorf("step %q: want a percent from 1%% to 100%%", s)
		}
		return Step{Percent: n}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || s != strconv.Itoa(n) {
		return Step{}, fmt.Errorf("step %q: want a percent such as 10%% or a count of pods such as 3", s)
	}
	return Step{Count: n}, nil
}

// Policy is a Spec parsed and checked.
type Policy struct {
	Steps            []Step
	BakeTime         time.Duration
	ProgressDeadline time.Duration
	Analysis         *Query
	Paused           bool
	// Batch, for a restart policy (RestartPolicy) instead of Steps: step
	// n runs n × Batch pods on the candidate.
	Batch int
}

// Query is a parsed PrometheusAnalysis.
type Query struct {
	Address  string
	Query    string
	Max, Min *float64
	Interval time.Duration
}

// Parse checks a spec and returns its policy; the error is one line
// naming the field.
func Parse(s Spec) (Policy, error) {
	var p Policy
	if s.Source.Kind != "ConfigMap" && s.Source.Kind != "Secret" {
		return p, fmt.Errorf("spec.source.kind %q: want ConfigMap or Secret", s.Source.Kind)
	}
	if s.Source.Name == "" {
		return p, errors.New("spec.source.name is empty")
	}
	if len(s.Source.Name) > MaxSourceName {
		return p, fmt.Errorf("spec.source.name %q: longer than %d characters, too long for the stable copy's name (<name>%s)", s.Source.Name, MaxSourceName, StableSuffix)
	}
	if len(s.Steps) == 0 || len(s.Steps) > MaxSteps {
		return p, fmt.Errorf("spec.steps: want 1 to %d steps, got %d", MaxSteps, len(s.Steps))
	}
	for i, raw := range s.Steps {
		st, err := ParseStep(raw)
		if err != nil {
			return p, fmt.Errorf("spec.steps[%d]: %w", i, err)
		}
		if i > 0 {
			prev := p.Steps[i-1]
			if st.Percent > 0 && prev.Percent >= st.Percent || st.Count > 0 && prev.Count >= st.Count {
				return p, fmt.Errorf("spec.steps[%d] %q: not more than the step before it (%s)", i, raw, prev)
			}
		}
		p.Steps = append(p.Steps, st)
	}
	if last := p.Steps[len(p.Steps)-1]; last.Percent != 100 {
		return p, fmt.Errorf("spec.steps: the last step is %s, want 100%% (every pod)", last)
	}
	var err error
	if p.BakeTime, err = duration("spec.bakeTime", s.BakeTime, 0, 0, MaxBakeTime); err != nil {
		return p, err
	}
	if p.ProgressDeadline, err = duration("spec.progressDeadline", s.ProgressDeadline, DefaultProgressDeadline, MinProgressDeadline, MaxProgressDeadline); err != nil {
		return p, err
	}
	if a := s.Analysis; a != nil && a.Prometheus != nil {
		q := a.Prometheus
		u, err := url.Parse(q.Address)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return p, fmt.Errorf("spec.analysis.prometheus.address %q: want an http or https URL", q.Address)
		}
		if u.User != nil {
			return p, errors.New("spec.analysis.prometheus.address: must not hold credentials")
		}
		if strings.TrimSpace(q.Query) == "" {
			return p, errors.New("spec.analysis.prometheus.query is empty")
		}
		if q.Max == nil && q.Min == nil {
			return p, errors.New("spec.analysis.prometheus: give max, min or both")
		}
		if q.Max != nil && q.Min != nil && *q.Min > *q.Max {
			return p, fmt.Errorf("spec.analysis.prometheus: min %g is more than max %g", *q.Min, *q.Max)
		}
		iv, err := duration("spec.analysis.prometheus.interval", q.Interval, DefaultAnalysisInterval, time.Second, time.Hour)
		if err != nil {
			return p, err
		}
		p.Analysis = &Query{Address: strings.TrimSuffix(q.Address, "/"), Query: q.Query, Max: q.Max, Min: q.Min, Interval: iv}
	}
	p.Paused = s.Paused
	return p, nil
}

func duration(field, s string, def, lo, hi time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a duration such as 10s or 5m", field, s)
	}
	if d < lo || d > hi {
		return 0, fmt.Errorf("%s %s: want %s to %s", field, s, lo, hi)
	}
	return d, nil
}

// RestartPolicy is the policy of a source that pods in restart mode use
// and no ConfigRollout names: batch pods at a time (the next batch once
// the previous one runs the candidate and is Ready), no bake, no
// analysis.
func RestartPolicy(batch int) Policy {
	return Policy{Batch: max(batch, 1), ProgressDeadline: DefaultProgressDeadline}
}

// StepCount is how many steps p has for total pods: a restart policy of
// batch b takes ceil(total/b) steps, the last of them every pod.
func (p Policy) StepCount(total int) int {
	if p.Batch > 0 {
		return max(1, (total+p.Batch-1)/p.Batch)
	}
	return len(p.Steps)
}

// Target is how many of total pods run the candidate at step (1-based).
func (p Policy) Target(step, total int) int {
	if step < 1 {
		return 0
	}
	if p.Batch > 0 {
		return min(total, step*p.Batch)
	}
	return p.Steps[min(step, len(p.Steps))-1].Pods(total)
}
