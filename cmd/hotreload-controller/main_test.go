package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

func TestBadInputIsOneLine(t *testing.T) {
	kubeconfigFile := kubeconfig(t, "https://127.0.0.1:1", "token")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad flag value", []string{"--workers", "0"}, "hotreload-controller: error: --workers 0: want 1 to 100\n"},
		{"missing kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig", "--no-leader-elect"}, "hotreload-controller: error: --kubeconfig /nonexistent/kubeconfig: "},
		{"injector without image", []string{"--injector", "--no-leader-elect", "--injector.namespace=x"}, "hotreload-controller: error: --injector.image is required"},
		{"injector certificate times", []string{"--kubeconfig", kubeconfigFile, "--injector", "--injector.image=x", "--no-leader-elect", "--injector.namespace=x", "--injector.cert-validity=1h", "--injector.ca-validity=2h"},
			"hotreload-controller: error: --injector.ca-validity 2h0m0s: want at least 4 times --injector.cert-validity 1h0m0s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := runMain(context.Background(), tt.args, io.Discard, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.HasPrefix(stderr.String(), tt.want) || strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("stderr = %q, want one line starting %q", stderr.String(), tt.want)
			}
		})
	}
}

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	promauto.With(reg).NewGauge(prometheus.GaugeOpts{Name: "hotreload_controller_leader", Help: "h"}).Set(1)
	var ready atomic.Bool
	h := handler(reg, "/metrics", ready.Load)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/-/healthy"); code != 200 {
		t.Errorf("/-/healthy = %d, want 200", code)
	}
	if code, body := get("/-/ready"); code != 503 || !strings.Contains(body, "caches") {
		t.Errorf("/-/ready before sync = %d %q, want 503 naming the caches", code, body)
	}
	ready.Store(true)
	if code, _ := get("/-/ready"); code != 200 {
		t.Errorf("/-/ready after sync = %d, want 200", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "hotreload_controller_leader 1") {
		t.Errorf("/metrics = %d %q", code, body)
	}
}

// TestSidecarDoesNotImportClientGo keeps the sidecar's binary small: the
// controller's dependencies must not reach it.
func TestSidecarDoesNotImportClientGo(t *testing.T) {
	out, err := goList("github.com/hotreload/hotreload/cmd/hotreload")
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(out) {
		if strings.HasPrefix(dep, "k8s.io/client-go") {
			t.Errorf("cmd/hotreload imports %s", dep)
		}
	}
}

// TestCommandsLinkNoTestSupport: what ships links nothing of test/ (the
// fakes, harnesses and helpers that only tests and the demo use).
func TestCommandsLinkNoTestSupport(t *testing.T) {
	for _, cmd := range []string{"hotreload", "hotreload-controller"} {
		out, err := goList("github.com/hotreload/hotreload/cmd/" + cmd)
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dep := range strings.Fields(out) {
			if strings.HasPrefix(dep, "github.com/hotreload/hotreload/test/") {
				t.Errorf("cmd/%s links %s", cmd, dep)
			}
		}
	}
}
