package notifier

import "errors"

// Refused returns err, a refusal (errors.Is(err, ErrRefused) already, or a
// refusal by err's target's own account), marked with reason: one line
// that says what happened without quoting the app's answer, which may
// quote the configuration (see RefusedReason). err's text is unchanged,
// and the result matches ErrRefused.
func Refused(err error, reason string) error { return &refusedError{err: err, reason: reason} }

// RefusedReason returns the reason of the first refusal marked by Refused
// in err's tree, and whether there is one.
func RefusedReason(err error) (string, bool) {
	var r *refusedError
	if errors.As(err, &r) {
		return r.reason, true
	}
	return "", false
}

type refusedError struct {
	err    error
	reason string
}

func (e *refusedError) Error() string        { return e.err.Error() }
func (e *refusedError) Unwrap() error        { return e.err }
func (e *refusedError) Is(target error) bool { return target == ErrRefused }
