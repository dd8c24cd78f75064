package config

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/signal"
)

// TestHint: the errors of a failed reload that a flag would fix come with
// advice that names it; others with none.
func TestHint(t *testing.T) {
	c := &Config{}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"signal not sent", fmt.Errorf("pid 7 (sleep) does not handle SIGHUP and would be terminated by it: %w", signal.ErrNotSent),
			"use --signal-force to send anyway"},
		{"workers kept", fmt.Errorf("signal delivered but pid 7 (nginx) kept its workers: %w", notifier.ErrUnconfirmed),
			"if the app keeps its workers on a good reload too, set --signal-confirm-timeout=0"},
		{"something else", fmt.Errorf("POST http://127.0.0.1:9090/-/reload: timed out after 30s"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Hint(tt.err); got != tt.want {
				t.Errorf("Hint(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// TestWebhookReloadHints: the errors of webhook targets built from the
// flags, against a real server, come with advice that names the flag.
func TestWebhookReloadHints(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer tlsSrv.Close()
	mux := http.NewServeMux()
	mux.Handle("/found", http.RedirectHandler("/-/reload", http.StatusFound))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, tt := range []struct {
		name, url, want string
	}{
		{"certificate of an unknown CA", tlsSrv.URL + "/-/reload", "trust the app's CA with --webhook-ca-file"},
		{"redirect turning POST into GET", srv.URL + "/found", "point --webhook-url at the reload endpoint itself"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, targets, err := parseAll(t, "--volume-dir=/etc/config", "--webhook-url="+tt.url)
			if err != nil {
				t.Fatal(err)
			}
			err = targets[0].Notify(context.Background())
			if err == nil {
				t.Fatal("Notify succeeded")
			}
			if got := c.Hint(err); got != tt.want {
				t.Errorf("Hint(%v) = %q, want %q", err, got, tt.want)
			}
		})
	}
}
