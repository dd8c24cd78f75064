package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/reloader"
)

// NewTargets builds the targets of c: one per --webhook-url, in order, then
// the signal target when --signal is given, or the restart target with
// --restart-container. The flags are checked first, so
// that each error is one line naming its flag.
func NewTargets(c *Config) ([]notifier.Target, error) {
	if err := c.checkWebhooks(); err != nil {
		return nil, err
	}
	var targets []notifier.Target
	for _, u := range c.WebhookURLs {
		opts := c.Webhook
		opts.URL = u
		w, err := notifier.NewWebhook(opts)
		if err != nil {
			// checkWebhooks has refused every bad flag; this is
			// for what it cannot check.
			return nil, fmt.Errorf("--webhook-url %q: %w", notifier.RedactURL(u), err)
		}
		targets = append(targets, w)
	}
	if c.Signal.Signal != "" {
		s, err := newSignalTarget(c.Signal)
		if err != nil {
			return nil, err
		}
		targets = append(targets, s)
	}
	if c.Fleet.RestartContainer {
		r, err := newRestartTarget(c.Signal, c.Fleet)
		if err != nil {
			return nil, err
		}
		targets = append(targets, r)
	}
	return targets, nil
}

// checkWebhooks checks the flags of the webhook targets, each on its own
// and together, before NewTargets builds them.
func (c *Config) checkWebhooks() error {
	if len(c.WebhookURLs) == 0 {
		return nil
	}
	seen := map[string]bool{}
	user := false // a URL carries basic auth
	for _, raw := range c.WebhookURLs {
		u, err := notifier.ParseURL(raw)
		if err != nil {
			if shown := notifier.RedactURL(raw); shown != "" || raw == "" {
				return fmt.Errorf("--webhook-url %q: %w", shown, err)
			}
			return fmt.Errorf("--webhook-url: %w", err)
		}
		name := notifier.RedactURL(raw)
		if seen[name] {
			return fmt.Errorf("--webhook-url %q: given twice", name)
		}
		seen[name] = true
		user = user || u.User != nil
	}
	o := c.Webhook
	if err := notifier.CheckMethod(o.Method); err != nil {
		return fmt.Errorf("--webhook-method %q: %w", o.Method, err)
	}
	for _, spec := range o.StatusCodes {
		for s := range strings.SplitSeq(spec, ",") {
			s = strings.TrimSpace(s)
			if err := notifier.CheckStatusCode(s); err != nil {
				return fmt.Errorf("--webhook-status-code %q: %w", s, err)
			}
		}
	}
	authHeader := false
	for i, h := range o.Headers {
		name, _, err := notifier.ParseHeader(h)
		switch {
		case err != nil && name == "":
			// Nothing of it is shown: say which one it is.
			which := ""
			if len(o.Headers) > 1 {
				which = fmt.Sprintf(" #%d", i+1)
			}
			return fmt.Errorf("--webhook-header%s: %w (not shown, as it may hold a secret)", which, err)
		case err != nil:
			return fmt.Errorf("--webhook-header %q: %w", name, err)
		}
		authHeader = authHeader || http.CanonicalHeaderKey(name) == "Authorization"
	}
	switch {
	case authHeader && o.BearerTokenFile != "":
		return errors.New(`--webhook-header "Authorization" and --webhook-bearer-token-file both set Authorization: use one`)
	case authHeader && user:
		return errors.New(`--webhook-header "Authorization" and the user in --webhook-url both set Authorization: use one`)
	case user && o.BearerTokenFile != "":
		return errors.New("--webhook-bearer-token-file and the user in --webhook-url both set Authorization: use one")
	}
	if o.BearerTokenFile != "" {
		// The file may not exist yet (a projected token), but a directory
		// will never do.
		if fi, err := os.Stat(o.BearerTokenFile); err == nil && fi.IsDir() {
			return fmt.Errorf("--webhook-bearer-token-file %s: is a directory", o.BearerTokenFile)
		}
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return fmt.Errorf("--webhook-ca-file %s: %w", o.CAFile, err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return fmt.Errorf("--webhook-ca-file %s: no certificates found", o.CAFile)
		}
	}
	switch {
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("--webhook-cert-file and --webhook-key-file go together")
	case o.CertFile != "":
		if _, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile); err != nil {
			return fmt.Errorf("--webhook-cert-file %s with --webhook-key-file %s: %w", o.CertFile, o.KeyFile, err)
		}
	}
	return nil
}

// OpenStateFile opens --state-file, if given; else it returns nil. Close it
// when done: it holds a lock.
func OpenStateFile(c *Config) (*reloader.StateFile, error) {
	if c.StateFile == "" {
		return nil, nil
	}
	if dir := watchedDirOf(c.StateFile, c.VolumeDirs); dir != "" {
		return nil, fmt.Errorf("--state-file %s: inside --volume-dir %s, where every save would be a change: put it on an emptyDir of its own", c.StateFile, dir)
	}
	s, err := reloader.OpenStateFile(c.StateFile)
	if err != nil {
		return nil, fmt.Errorf("--state-file %s: %w", c.StateFile, err)
	}
	return s, nil
}

// watchedDirOf returns the directory of dirs that holds file, or "". Paths
// are compared as the kernel resolves them, links included; a directory
// that does not exist holds nothing yet. A state file there would make
// every save a change to reload for, and every reload a save.
func watchedDirOf(file string, dirs []string) string {
	real := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return ""
		}
		r, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return ""
		}
		return r
	}
	fileDir := real(filepath.Dir(file))
	if fileDir == "" {
		return ""
	}
	for _, d := range dirs {
		rd := real(d)
		if rd == "" {
			continue
		}
		if rel, err := filepath.Rel(rd, fileDir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return d
		}
	}
	return ""
}
