package notifier

import (
	"errors"
	"strings"
)

// Refused returns err, a refusal (errors.Is(err, ErrRefused) already, or a
// refusal by err's target's own account), marked with reason: one line
// that says what happened without quoting the app's answer, which may
// quote the configuration (see RefusedReason). err's text is unchanged,
// and the result matches ErrRefused.
func Refused(err error, reason string) error {
	return &reasonError{err: err, reason: reason, refused: true}
}

// WithReason returns err marked with reason, as Refused does, for a
// failed attempt that is not a refusal (an answer that says to come back
// later): Reason returns it instead of err's text, which quotes the
// answer. The result matches what err matches, and nothing more.
func WithReason(err error, reason string) error { return &reasonError{err: err, reason: reason} }

// RefusedReason returns the reason of the first refusal marked by Refused
// in err's tree, and whether there is one.
func RefusedReason(err error) (string, bool) {
	var r *reasonError
	if errors.As(err, &r) && r.refused {
		return r.reason, true
	}
	return "", false
}

// maxReason bounds the length of Reason's line.
const maxReason = 300

// Reason says in one line why an attempt failed, without quoting the
// app's answer: the reason a Refused or WithReason mark gives, else the
// first line of err's text (the errors of the targets of this module
// quote an answer only where they mark a reason), at most 300 bytes. It
// is what a sidecar may show about a failed reload to anyone who can
// read its endpoints.
func Reason(err error) string {
	var r *reasonError
	if errors.As(err, &r) {
		return r.reason
	}
	line, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	if len(line) > maxReason {
		cut := maxReason
		for cut > 0 && line[cut]&0xc0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		line = line[:cut] + "..."
	}
	return line
}

type reasonError struct {
	err     error
	reason  string
	refused bool
}

func (e *reasonError) Error() string        { return e.err.Error() }
func (e *reasonError) Unwrap() error        { return e.err }
func (e *reasonError) Is(target error) bool { return e.refused && target == ErrRefused }
