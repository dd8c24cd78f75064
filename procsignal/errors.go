package procsignal

import "errors"

// Errors that a failed Notify wraps, for a caller that advises its user:
// errors.Is(err, ErrNotSent) means the target was found and left alone
// because the signal would not have made it reload (Options.Force sends it
// anyway); ErrNoProcess, that no process matched.
var (
	ErrNotSent   = errors.New("not sent")
	ErrNoProcess = errors.New("no process")
)
