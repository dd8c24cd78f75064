package revision

import (
	"encoding/json"
	"fmt"
)

// Rollout is the content of ReservedKey in a stable copy: which revision is
// stable and, while a rollout runs, which one is the candidate.
//
//	{"source":"configmap/app-config",
//	 "stable":   {"revision":"81200","sha256":"<hex>"},
//	 "candidate":{"revision":"81234","sha256":"<hex>"}}
type Rollout struct {
	Source    string `json:"source"`              // the ref: "configmap/NAME" or "secret/NAME"
	Stable    Pin    `json:"stable"`              // the last approved revision: the stable copy's own keys
	Candidate *Pin   `json:"candidate,omitempty"` // the revision being rolled out, if any
}

// Pin names one revision: an opaque identity (the source's resourceVersion
// when it was captured) and the sum of its content (see Sum).
type Pin struct {
	Revision string `json:"revision"`
	SHA256   string `json:"sha256"`
}

// maxRolloutSize bounds the reserved key: a few hundred bytes hold it.
const maxRolloutSize = 64 << 10

// ParseRollout reads the reserved key. Every field the sidecar relies on
// must be there and well formed: a source, a stable revision and sum, and,
// if present, a candidate revision and sum. Unknown fields are ignored, so
// that a newer controller may add some.
func ParseRollout(b []byte) (Rollout, error) {
	var r Rollout
	if len(b) > maxRolloutSize {
		return r, fmt.Errorf("%s: larger than %d bytes", ReservedKey, maxRolloutSize)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Rollout{}, fmt.Errorf("%s: %w", ReservedKey, err)
	}
	if r.Source == "" {
		return Rollout{}, fmt.Errorf("%s: no source", ReservedKey)
	}
	if err := r.Stable.check("stable"); err != nil {
		return Rollout{}, err
	}
	if r.Candidate != nil {
		if err := r.Candidate.check("candidate"); err != nil {
			return Rollout{}, err
		}
	}
	return r, nil
}

// Marshal writes r as the reserved key holds it.
func (r Rollout) Marshal() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return b
}

func (p Pin) check(what string) error {
	if p.Revision == "" {
		return fmt.Errorf("%s: %s.revision is empty", ReservedKey, what)
	}
	if _, err := ParseHex(p.SHA256); err != nil {
		return fmt.Errorf("%s: %s.%w", ReservedKey, what, err)
	}
	return nil
}

// Sum returns the pin's sum; ParseRollout has checked it.
func (p Pin) Sum() [32]byte {
	s, err := ParseHex(p.SHA256)
	if err != nil {
		return [32]byte{}
	}
	return s
}

// NewPin returns the pin of a revision with content sum.
func NewPin(revision string, sum [32]byte) Pin { return Pin{Revision: revision, SHA256: Hex(sum)} }
