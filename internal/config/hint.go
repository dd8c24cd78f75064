package config

import (
	"crypto/x509"
	"errors"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/signal"
)

// Hint returns advice on the error of a failed reload, in terms of the
// flags that would fix it, or "" when there is none: the reloader logs it
// beside the error. The libraries' errors say what went wrong; only here
// are they matched to flags.
func (c *Config) Hint(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		redirect  *notifier.RedirectError
	)
	switch {
	case errors.Is(err, signal.ErrNotSent):
		return "use --signal-force to send anyway"
	case errors.Is(err, notifier.ErrUnconfirmed):
		return "if the app keeps its workers on a good reload too, set --signal-confirm-timeout=0"
	case errors.As(err, &unknownCA):
		return "trust the app's CA with --webhook-ca-file"
	case errors.As(err, &redirect):
		return "point --webhook-url at the reload endpoint itself"
	}
	return ""
}
