package config

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/procsignal"
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
		{"signal not sent", fmt.Errorf("pid 7 (sleep) does not handle SIGHUP and would be terminated by it: %w", procsignal.ErrNotSent),
			"use --signal-force to send anyway"},
		{"workers kept", fmt.Errorf("signal delivered but pid 7 (nginx) kept its workers: %w", notifier.ErrUnconfirmed),
			"if the app keeps its workers on a good reload too, set --signal-confirm-timeout=0"},
		{"no process", fmt.Errorf("%w named nginx", procsignal.ErrNoProcess),
			"the app must run in this pod under that name (its comm, executable or argv[0]), and the pod needs shareProcessNamespace: true"},
		{"something else", fmt.Errorf("POST http://127.0.0.1:9090/-/reload: timed out after 30s"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Hint(tt.err); got != tt.want {
				t.Errorf("Hint(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
	// As pid 1, hotreload knows that the pod does not share its PID
	// namespace: the pause container would be pid 1.
	pid1 := &Config{pid: 1}
	if got, want := pid1.Hint(fmt.Errorf("%w named nginx", procsignal.ErrNoProcess)),
		"hotreload is pid 1, so this pod does not share its process namespace: set shareProcessNamespace: true in the pod's spec"; got != want {
		t.Errorf("Hint as pid 1 = %q, want %q", got, want)
	}
}

// TestWebhookReloadHints: the errors of webhook targets built from the
// flags, against a real server, come with advice that names the flag.
func TestWebhookReloadHints(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer tlsSrv.Close()
	mux := http.NewServeMux()
	mux.Handle("/found", http.RedirectHandler("/-/reload", http.StatusFound))
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "Unauthorized", http.StatusUnauthorized) })
	mux.HandleFunc("/lifecycle", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Lifecycle API is not enabled.", http.StatusForbidden) // Prometheus without --web.enable-lifecycle
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	plainHost := strings.TrimPrefix(srv.URL, "http://")
	tlsHost := strings.TrimPrefix(tlsSrv.URL, "https://")

	const (
		wantsCredentials = `the app wants credentials: give --webhook-bearer-token-file, a user and password in --webhook-url (from a Secret, as HOTRELOAD_WEBHOOK_URL), or --webhook-header "Authorization: ..."`
		refusedThem      = "the app refused the credentials given: check --webhook-bearer-token-file, the user and password in --webhook-url, or the Authorization --webhook-header"
	)
	for _, tt := range []struct {
		name, url string
		extra     []string
		want      string
	}{
		{"certificate of an unknown CA", tlsSrv.URL + "/-/reload", nil, "trust the app's CA with --webhook-ca-file"},
		{"redirect turning POST into GET", srv.URL + "/found", nil, "point --webhook-url at the reload endpoint itself"},
		{"https to an http app", "https://" + plainHost + "/-/reload", nil, "the app speaks plain HTTP: use http:// in --webhook-url"},
		{"http to an https app", "http://" + tlsHost + "/-/reload", nil, "the app speaks HTTPS: use https:// in --webhook-url"},
		{"401 without credentials", srv.URL + "/auth", nil, wantsCredentials},
		{"401 with a token", srv.URL + "/auth", []string{"--webhook-bearer-token-file=" + writeToken(t)}, refusedThem},
		{"401 with a user", "http://admin:pw@" + plainHost + "/auth", nil, refusedThem},
		{"404", srv.URL + "/-/relaod", nil, "the app has no such path: check the path in --webhook-url (Prometheus and Alertmanager: /-/reload)"},
		{"Prometheus without lifecycle", srv.URL + "/lifecycle", nil, "start Prometheus with --web.enable-lifecycle"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, targets, err := parseAll(t, append([]string{"--volume-dir=/etc/config", "--webhook-url=" + tt.url}, tt.extra...)...)
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

func writeToken(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
