package view

import (
	"fmt"

	"github.com/hotreload/hotreload/internal/revision"
)

// Input is what a view knows when it chooses what to run.
type Input struct {
	// Want is the revision the pod's annotation names for the view's ref;
	// "" when there is none, or when the annotation file or the annotation
	// does not parse.
	Want string
	// HasStable is true for a view with a stable volume.
	HasStable bool
	// Rollout is the stable volume's reserved key; nil when it has none
	// (no controller, no policy: the stable copy does not exist).
	Rollout *revision.Rollout
	// RolloutErr is set when the reserved key is there but does not parse.
	RolloutErr error
	// StableSum is the sum of the stable volume's files.
	StableSum [32]byte
	// SourceOK is true when the source volume could be read; SourceSum is
	// then the sum of its files.
	SourceOK  bool
	SourceSum [32]byte
}

// From says where the content to run comes from.
type From int

const (
	// Keep: keep what runs, and report waiting.
	Keep From = iota
	// Source: run the source volume's content.
	Source
	// Stable: run the stable volume's content.
	Stable
)

func (f From) String() string {
	switch f {
	case Source:
		return "source"
	case Stable:
		return "stable"
	}
	return "keep"
}

// Choice is what a view runs.
type Choice struct {
	From From
	// Revision is the revision chosen, as the reserved key names it: the
	// stable or the candidate revision. "" when the view runs its source
	// with no rollout (rule 2): the caller names that content.
	Revision string
	// Why says, for Keep, what the view waits for, in one line that holds
	// no content.
	Why string
}

// Choose applies the rules of docs/design/fleet.md, "Which revision a
// view runs", to in:
//
//  1. want is the annotation's revision for the ref (in.Want);
//  2. no stable volume content (no stable volume, or no reserved key in
//     it): run the source;
//  3. want empty or equal to the stable revision: run the stable copy,
//     once its content has the stable revision's sum;
//  4. want equal to the candidate revision, and the source's sum equal to
//     the candidate's: run the source;
//  5. otherwise keep what runs, and wait.
//
// A reserved key that does not parse keeps what runs too: it is the
// controller's, and taking it for "no rollout" would run the source
// everywhere at once.
func Choose(in Input) Choice {
	if !in.HasStable || in.Rollout == nil && in.RolloutErr == nil {
		if !in.SourceOK {
			return Choice{From: Keep, Why: "the source volume cannot be read"}
		}
		return Choice{From: Source}
	}
	if in.RolloutErr != nil {
		return Choice{From: Keep, Why: fmt.Sprintf("the stable copy's %s does not parse: %v", revision.ReservedKey, in.RolloutErr)}
	}
	r := in.Rollout
	if in.Want == "" || in.Want == r.Stable.Revision {
		if in.StableSum != r.Stable.Sum() {
			return Choice{From: Keep, Why: fmt.Sprintf("the stable volume does not hold stable revision %s yet", r.Stable.Revision)}
		}
		return Choice{From: Stable, Revision: r.Stable.Revision}
	}
	if r.Candidate != nil && in.Want == r.Candidate.Revision {
		if !in.SourceOK || in.SourceSum != r.Candidate.Sum() {
			return Choice{From: Keep, Why: fmt.Sprintf("the source volume does not hold candidate revision %s yet", r.Candidate.Revision)}
		}
		return Choice{From: Source, Revision: r.Candidate.Revision}
	}
	return Choice{From: Keep, Why: fmt.Sprintf("revision %s is neither the stable revision (%s) nor the candidate (%s)", in.Want, r.Stable.Revision, candidate(r))}
}

func candidate(r *revision.Rollout) string {
	if r.Candidate == nil {
		return "none"
	}
	return r.Candidate.Revision
}
