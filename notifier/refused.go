package notifier

import (
	"errors"
	"net/http"
)

// ErrRefused is matched (errors.Is) by the error of an attempt in which the
// app was reached and refused the new configuration: a reload endpoint
// answered an error status that says so, a signalled app kept its workers
// or exited, a restarted app did not come back. Trying the same
// configuration again would be refused again; a caller that keeps the
// previous configuration (last-known-good) can put it back. Transport
// problems (a refused connection, a timeout), missing processes and
// permission errors are not refusals: they are retried.
var ErrRefused = errors.New("the app refused the new configuration")

// Refused returns err marked as a refusal (errors.Is(err, ErrRefused)),
// with reason: one line that says what happened without quoting the app's
// answer, which may quote the configuration (see RefusedReason). err's text
// is unchanged.
func Refused(err error, reason string) error { return &refusedError{err: err, reason: reason} }

// RefusedReason returns the reason of the first refusal in err's tree, and
// whether there is one.
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

// refuses reports whether an unwanted status refuses the reload, rather
// than saying to come back later (an app that is starting, a proxy in
// front of one): every one but 408, 425, 429, 502, 503 and 504.
func refuses(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return false
	}
	return true
}
