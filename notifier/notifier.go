package notifier

import (
	"context"
	"errors"
)

// Notifier tells one target to reload its configuration. Notify makes exactly
// one attempt and returns nil only when the target confirmed the reload.
type Notifier interface {
	Notify(ctx context.Context) error
}

// Target is a Notifier with the name it is known by in logs and metric
// labels. The name never carries a credential.
type Target interface {
	Notifier
	Name() string
}

// ErrRefused is wrapped by the error of an attempt that the target refused:
// it answered, and not with success (an HTTP status such as 500 for a
// config it cannot load). Sending the same reload again soon will most
// likely be refused again.
var ErrRefused = errors.New("reload refused")

// ErrUnconfirmed is wrapped by the error of an attempt that reached the
// target but whose effect could not be confirmed, such as a signal that a
// process took without showing that it reloaded. Sending the same reload
// again would only repeat it.
var ErrUnconfirmed = errors.New("reload not confirmed")
