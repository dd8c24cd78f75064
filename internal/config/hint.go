package config

import (
	"crypto/x509"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/procsignal"
)

// Hint returns advice on the error of a failed reload, in terms of the
// flags or the pod's spec that would fix it, or "" when there is none: the
// reloader logs it beside the error. The libraries' errors say what went
// wrong; only here are they matched to flags. It covers the commonest
// mistakes: a pod that does not share its process namespace, a signal the
// app would die of, https to an http app and back, credentials missing or
// refused, a wrong path, a CA not trusted.
func (c *Config) Hint(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		redirect  *notifier.RedirectError
		status    *notifier.StatusError
	)
	switch {
	case errors.Is(err, procsignal.ErrNoProcess):
		pid := c.pid
		if pid == 0 {
			pid = os.Getpid()
		}
		if pid == 1 {
			// With a shared namespace, the pause container is pid 1.
			return "hotreload is pid 1, so this pod does not share its process namespace: set shareProcessNamespace: true in the pod's spec"
		}
		return "the app must run in this pod under that name (its comm, executable or argv[0]), and the pod needs shareProcessNamespace: true"
	case errors.Is(err, procsignal.ErrNotSent):
		return "use --signal-force to send anyway"
	case errors.Is(err, notifier.ErrUnconfirmed):
		return "if the app keeps its workers on a good reload too, set --signal-confirm-timeout=0"
	case errors.Is(err, http.ErrSchemeMismatch):
		return "the app speaks plain HTTP: use http:// in --webhook-url"
	case errors.As(err, &unknownCA):
		return "trust the app's CA with --webhook-ca-file"
	case errors.As(err, &redirect):
		return "point --webhook-url at the reload endpoint itself"
	case errors.As(err, &status):
		return c.statusHint(status)
	}
	return ""
}

// statusHint returns advice on a status code that the flags can explain.
func (c *Config) statusHint(e *notifier.StatusError) string {
	body := strings.ToLower(e.Body)
	switch {
	case e.Code == http.StatusBadRequest && strings.Contains(body, "http request to an https server"),
		e.Code == http.StatusBadRequest && strings.Contains(body, "plain http request was sent to https port"): // Go, nginx
		return "the app speaks HTTPS: use https:// in --webhook-url"
	case e.Code == http.StatusUnauthorized && c.hasCredentials():
		return "the app refused the credentials given: check --webhook-bearer-token-file, the user and password in --webhook-url, or the Authorization --webhook-header"
	case e.Code == http.StatusUnauthorized:
		return `the app wants credentials: give --webhook-bearer-token-file, a user and password in --webhook-url (from a Secret, as HOTRELOAD_WEBHOOK_URL), or --webhook-header "Authorization: ..."`
	case e.Code == http.StatusForbidden && strings.Contains(body, "lifecycle api is not enabled"):
		return "start Prometheus with --web.enable-lifecycle"
	case e.Code == http.StatusNotFound:
		return "the app has no such path: check the path in --webhook-url (Prometheus and Alertmanager: /-/reload)"
	case e.Code == http.StatusMethodNotAllowed:
		return "the app takes another method at that path: check --webhook-method"
	}
	return ""
}

// hasCredentials reports whether the webhooks send credentials.
func (c *Config) hasCredentials() bool {
	if c.Webhook.BearerTokenFile != "" {
		return true
	}
	for _, h := range c.Webhook.Headers {
		if name, _, err := notifier.ParseHeader(h); err == nil && http.CanonicalHeaderKey(name) == "Authorization" {
			return true
		}
	}
	for _, raw := range c.WebhookURLs {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			return true
		}
	}
	return false
}
