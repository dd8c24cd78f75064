package notifier

import "context"

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
