package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	promauto.With(reg).NewCounter(prometheus.CounterOpts{Name: "hotreload_test_total", Help: "t"}).Add(3)
	var ready atomic.Bool
	h := Handler(reg, "/custom-metrics", func() error {
		if !ready.Load() {
			return errors.New("volume /etc/confg missing for 30s")
		}
		return nil
	}, nil, nil)

	tests := []struct {
		name, path string
		ready      bool
		wantCode   int
		wantBody   string
	}{
		{"healthy while running", "/-/healthy", false, 200, "healthy"},
		{"not ready, saying why", "/-/ready", false, 503, "hotreload is not ready: volume /etc/confg missing for 30s."},
		{"ready once they are", "/-/ready", true, 200, "is ready"},
		{"metrics at the telemetry path", "/custom-metrics", false, 200, "hotreload_test_total 3"},
		{"no metrics elsewhere", "/metrics", false, 404, ""},
		{"an index that links them", "/", false, 200, `href="/custom-metrics"`},
		{"no content before a volume is known", "/-/content", false, 200, `"volumes": []`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready.Store(tt.ready)
			code, body := get(t, h, tt.path)
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s = %d %q, want %d with %q", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

// Metrics are served uncompressed even to a client that asks for gzip, as
// Prometheus does: compress/flate's writer holds about 0.8 MiB, more than
// the rest of an idle hotreload's heap (BenchmarkMemory in test/cost).
func TestMetricsUncompressed(t *testing.T) {
	reg := prometheus.NewRegistry()
	promauto.With(reg).NewCounter(prometheus.CounterOpts{Name: "hotreload_test_total", Help: "t"}).Add(3)
	h := Handler(reg, "/metrics", func() error { return nil }, nil, nil)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2,*/*;q=0.1")
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if enc := rec.Header().Get("Content-Encoding"); enc != "" {
		t.Errorf("Content-Encoding %q, want none", enc)
	}
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, "hotreload_test_total 3") {
		t.Errorf("GET /metrics = %d %q, want 200 with the counter in plain text", rec.Code, body)
	}
}

func TestServer(t *testing.T) {
	if _, err := Listen(nil, "127.0.0.1:bad", http.NotFoundHandler()); err == nil || !strings.Contains(err.Error(), "--web.listen-address 127.0.0.1:bad") {
		t.Errorf("Listen on a bad address: err = %v, want one naming --web.listen-address", err)
	}
	s, err := Listen(nil, "127.0.0.1:0", Handler(prometheus.NewRegistry(), "/metrics", func() error { return nil }, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(nil, s.ln.Addr().String(), http.NotFoundHandler()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Listen on a port in use: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp, err := http.Get("http://" + s.ln.Addr().String() + "/-/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /-/ready = %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestContent(t *testing.T) {
	at := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	var vols []Volume
	h := Handler(prometheus.NewRegistry(), "/metrics", func() error { return nil }, func() []Volume { return vols }, nil)
	for _, tt := range []struct {
		name string
		vols []Volume
		want string
	}{
		{"none", nil, `{"volumes":[]}`},
		{"two volumes", []Volume{{"/etc/a", "0123456789ab", at}, {"/etc/b", "ba9876543210", at.Add(time.Second)}},
			`{"volumes":[{"dir":"/etc/a","hash":"0123456789ab","delivered_at":"2026-11-23T08:00:00Z"},{"dir":"/etc/b","hash":"ba9876543210","delivered_at":"2026-11-23T08:00:01Z"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vols = tt.vols
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/-/content", nil))
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var got, want any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("GET /-/content: %v; body %q", err, rec.Body.String())
			}
			_ = json.Unmarshal([]byte(tt.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("GET /-/content = %s, want %s", rec.Body.String(), tt.want)
			}
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/-/content", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /-/content = %d, want 405", rec.Code)
	}
}

func TestContentViews(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	views := []View{
		{Ref: "configmap/app-config", Dir: "/etc/app", Want: "81234", Running: "81234", Result: "applied", At: at},
		{Ref: "configmap/b", Dir: "/etc/b", Want: "", Running: "3f2a9c01b7de", Result: "rejected", Error: "POST http://127.0.0.1:9090/-/reload: status 500", Rejected: "0a1b2c3d4e5f", At: at},
		{Ref: "configmap/env", Want: "7", Running: "6", Result: "waiting", Reason: "the source volume does not hold candidate revision 7 yet", At: at},
	}
	h := Handler(prometheus.NewRegistry(), "/metrics", func() error { return nil }, nil, func() []View { return views })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/-/content", nil))
	want := `{"volumes":[],"views":[
		{"ref":"configmap/app-config","dir":"/etc/app","want":"81234","running":"81234","result":"applied","at":"2026-11-25T10:00:00Z"},
		{"ref":"configmap/b","dir":"/etc/b","want":"","running":"3f2a9c01b7de","result":"rejected","error":"POST http://127.0.0.1:9090/-/reload: status 500","rejected":"0a1b2c3d4e5f","at":"2026-11-25T10:00:00Z"},
		{"ref":"configmap/env","want":"7","running":"6","result":"waiting","reason":"the source volume does not hold candidate revision 7 yet","at":"2026-11-25T10:00:00Z"}]}`
	var got, w any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("GET /-/content = %s, want %s", rec.Body.String(), want)
	}
}
