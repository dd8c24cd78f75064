package config

import (
	"context"
	"errors"
	"fmt"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/reloader"
)

// flags names the command-line flag behind each option of the notifier,
// signal and reloader packages, whose errors name options by their fields.
var flags = map[string]string{
	// notifier.WebhookOptions
	"URL":                "--webhook-url",
	"Method":             "--webhook-method",
	"StatusCodes":        "--webhook-status-code",
	"Timeout":            "--webhook-timeout",
	"Headers":            "--webhook-header",
	"BearerTokenFile":    "--webhook-bearer-token-file",
	"CAFile":             "--webhook-ca-file",
	"CertFile":           "--webhook-cert-file",
	"KeyFile":            "--webhook-key-file",
	"InsecureSkipVerify": "--webhook-insecure-skip-verify",
	// signal.Options and signal.Parse
	"Signal":         "--signal",
	"ProcessName":    "--process-name",
	"ProcessCmdline": "--process-cmdline",
	"PIDFile":        "--pid-file",
	"Force":          "--signal-force",
	"ConfirmTimeout": "--signal-confirm-timeout",
	// reloader.OpenStateFile
	"StateFile": "--state-file",
}

// Explain returns err with the options it names (notifier.OptionError)
// named by their flags: `--webhook-url "ftp://h": scheme must be http or
// https` for the notifier's `URL "ftp://h": ...`. The result unwraps to err.
// An error that names no option is returned as it is.
func Explain(err error) error {
	var oe *notifier.OptionError
	if err == nil || !errors.As(err, &oe) {
		return err
	}
	return &explained{text: notifier.Explain(err, func(field string) string { return flags[field] }), err: err}
}

type explained struct {
	text string
	err  error
}

func (e *explained) Error() string { return e.text }
func (e *explained) Unwrap() error { return e.err }

// NewTargets builds the targets of c: one per --webhook-url, in order, then
// the signal target when --signal is given. Errors are one line naming the
// flag. The targets' errors at reload time name flags too.
func NewTargets(c *Config) ([]notifier.Target, error) {
	var targets []notifier.Target
	seen := map[string]bool{}
	for _, u := range c.WebhookURLs {
		opts := c.Webhook
		opts.URL = u
		w, err := notifier.NewWebhook(opts)
		if err != nil {
			return nil, Explain(err)
		}
		if seen[w.Name()] {
			return nil, fmt.Errorf("--webhook-url %q: given twice", w.Name())
		}
		seen[w.Name()] = true
		targets = append(targets, flagTarget(w))
	}
	if c.Signal.Signal != "" {
		s, err := newSignalTarget(c.Signal)
		if err != nil {
			return nil, Explain(err)
		}
		targets = append(targets, flagTarget(s))
	}
	if c.Fleet.RestartContainer {
		r, err := newRestartTarget(c.Signal, c.Fleet)
		if err != nil {
			return nil, Explain(err)
		}
		targets = append(targets, flagTarget(r))
	}
	return targets, nil
}

// OpenStateFile opens --state-file, if given; else it returns nil.
func OpenStateFile(c *Config) (*reloader.StateFile, error) {
	if c.StateFile == "" {
		return nil, nil
	}
	s, err := reloader.OpenStateFile(c.StateFile)
	return s, Explain(err)
}

// flagTarget wraps t so that the errors of its reloads name flags, as the
// advice in "... not sent (use --signal-force to send anyway)" does. A
// target that is a reloader.Prober stays one.
func flagTarget(t notifier.Target) notifier.Target {
	if p, ok := t.(reloader.Prober); ok {
		return flagProber{flagNotifier{t}, p}
	}
	return flagNotifier{t}
}

type flagNotifier struct{ notifier.Target }

func (t flagNotifier) Notify(ctx context.Context) error { return Explain(t.Target.Notify(ctx)) }

type flagProber struct {
	flagNotifier
	p reloader.Prober
}

func (t flagProber) Reachable(ctx context.Context) bool { return t.p.Reachable(ctx) }

var _ reloader.Prober = flagProber{}
