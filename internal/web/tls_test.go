package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
	"github.com/hotreload/hotreload/test/support/testcert"
)

// writeCert writes a certificate for 127.0.0.1 and its key into dir and
// returns the pool that verifies it and both paths.
func writeCert(t *testing.T, dir string) (*x509.CertPool, string, string) {
	t.Helper()
	ca := testcert.NewCA(t)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteServerCert(t, certFile, keyFile, "127.0.0.1")
	return ca.Pool, certFile, keyFile
}

func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	pool, certFile, keyFile := writeCert(t, dir)
	const password = "s3cret"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "web.yml")
	yml := "tls_server_config:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\nbasic_auth_users:\n  prometheus: " + string(hash) + "\n"
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckConfigFile(cfg); err != nil {
		t.Fatalf("CheckConfigFile: %v", err)
	}

	s, err := Listen(nil, "127.0.0.1:0", Handler(prometheus.NewRegistry(), "/metrics", func() error { return nil }, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	s.ServeConfigFile(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	}()

	addr := s.ln.Addr().String()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func(scheme, path, user, pass string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", scheme, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/-/healthy", "/-/ready"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			if code := get("https", path, "prometheus", password); code != http.StatusOK {
				t.Errorf("with the password: %d, want 200", code)
			}
			if code := get("https", path, "", ""); code != http.StatusUnauthorized {
				t.Errorf("without a password: %d, want 401", code)
			}
			if code := get("https", path, "prometheus", "wrong"); code != http.StatusUnauthorized {
				t.Errorf("with a wrong password: %d, want 401", code)
			}
			if code := get("http", path, "prometheus", password); code != http.StatusBadRequest {
				t.Errorf("over plain HTTP: %d, want 400", code)
			}
		})
	}
}

func TestCheckConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name, path string
		ok         bool
	}{
		{"no file", "", true},
		{"basic auth only", write("auth.yml", "basic_auth_users:\n  u: $2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG\n"), true},
		{"missing", filepath.Join(dir, "missing.yml"), false},
		{"unknown field", write("typo.yml", "tls_server_confg: {}\n"), false},
		{"missing certificate", write("cert.yml", "tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckConfigFile(tt.path); (err == nil) != tt.ok {
				t.Errorf("CheckConfigFile(%q) = %v, want ok=%v", tt.path, err, tt.ok)
			}
		})
	}
}

// TestTLSHandshakeErrorsLogged: a client that fails the TLS handshake (a
// scanner, a probe that speaks plain HTTP) is logged as every other line,
// logfmt through the logger, at most once a minute, the next line saying
// how many were left out; nothing goes to the standard logger.
func TestTLSHandshakeErrorsLogged(t *testing.T) {
	dir := t.TempDir()
	_, certFile, keyFile := writeCert(t, dir)
	cfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(cfg, []byte("tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var std strings.Builder
	stdlog.SetOutput(&std)
	defer stdlog.SetOutput(os.Stderr)

	var buf binary.Buffer
	logger := log.NewLogfmtLogger(&buf)
	s, err := Listen(logger, "127.0.0.1:0", Handler(prometheus.NewRegistry(), "/metrics", func() error { return nil }, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	s.errorLog.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.ServeConfigFile(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	addr := s.ln.Addr().String()
	lines := func() []string {
		var out []string
		for l := range strings.Lines(buf.String()) {
			if strings.Contains(l, "TLS handshake") {
				out = append(out, strings.TrimSpace(l))
			}
		}
		return out
	}
	handshakes := func(n int) {
		t.Helper()
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
			_, _ = io.ReadAll(c) // the server's 400, then its close: it has logged by then
			c.Close()
		}
	}
	handshakes(20)
	poll.Until(10*time.Second, func() bool { return len(lines()) > 0 })
	got := lines()
	want := `level=warn component=web msg="TLS handshake failed" remote=127.0.0.1:`
	if len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.HasSuffix(got[0], `err="client sent an HTTP request to an HTTPS server"`) {
		t.Fatalf("after 20 failed handshakes, lines = %q, want one starting %s", got, want)
	}

	// The server logs a handshake after it closed the connection: wait
	// until it has seen all 20 before the clock moves on.
	leftOut := func() int {
		s.errorLog.mu.Lock()
		defer s.errorLog.mu.Unlock()
		if k := s.errorLog.kinds["TLS handshake failed"]; k != nil {
			return k.leftOut
		}
		return 0
	}
	poll.Until(10*time.Second, func() bool { return leftOut() >= 19 })
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	handshakes(1)
	poll.Until(10*time.Second, func() bool { return len(lines()) >= 2 })
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], " left_out=19") {
		t.Errorf("a minute later, lines = %q, want a second one with left_out=19", got)
	}
	if std.Len() > 0 {
		t.Errorf("the standard logger got %q", std.String())
	}
}
