package notifier

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/testcert"
)

// newTestWebhook returns a Webhook for opts and closes its idle connections
// when the test ends, so that goleak sees no client goroutines.
func newTestWebhook(t *testing.T, opts WebhookOptions) *Webhook {
	t.Helper()
	w, err := NewWebhook(opts)
	if err != nil {
		t.Fatalf("NewWebhook: %v", err)
	}
	t.Cleanup(w.client.CloseIdleConnections)
	return w
}

// startServer starts an httptest server that is closed when the test ends.
func startServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// request is what a test server saw of one request.
type request struct {
	method, host, path string
	header             http.Header
	body               string
	contentLength      int64
}

// recorder is a handler that records every request and answers with a
// status and a body.
type recorder struct {
	status int    // 0 means 200
	body   string // the response body
	mu     sync.Mutex
	seen   []request
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.seen = append(rec.seen, request{
		method: r.Method, host: r.Host, path: r.URL.Path,
		header: r.Header.Clone(), body: string(body), contentLength: r.ContentLength,
	})
	status := rec.status
	rec.mu.Unlock()
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, rec.body)
}

// last returns the last request seen, failing the test if there was none.
func (rec *recorder) last(t *testing.T) request {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) == 0 {
		t.Fatal("the server saw no request")
	}
	return rec.seen[len(rec.seen)-1]
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.seen)
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNewWebhookValidation(t *testing.T) {
	dir := t.TempDir()
	notPEM := writeFile(t, dir, "not.pem", "hello\n")
	missing := filepath.Join(dir, "missing")
	ca := testcert.NewCA(t)
	certFile, keyFile := writeClientCert(t, ca, dir, "client")
	_, otherKey := writeClientCert(t, ca, t.TempDir(), "other")
	const url = "http://127.0.0.1:9090/-/reload"

	tests := []struct {
		name    string
		opts    WebhookOptions
		wantErr string // "" means valid
		secret  string // must not appear in the error
	}{
		{name: "minimal", opts: WebhookOptions{URL: url}},
		{name: "everything", opts: WebhookOptions{
			URL: "https://127.0.0.1:9090/-/reload?x=1", Method: "PUT", StatusCodes: []string{"200", "2xx,204"},
			Timeout: time.Second, Headers: []string{"X-A: b", "Host: app", "X-Empty:"},
			BearerTokenFile: missing, CAFile: ca.File, CertFile: certFile, KeyFile: keyFile,
		}},
		{name: "bearer token file may appear later", opts: WebhookOptions{URL: url, BearerTokenFile: missing}},
		{name: "class in capitals", opts: WebhookOptions{URL: url, StatusCodes: []string{"2XX"}}},

		{name: "no scheme", opts: WebhookOptions{URL: "localhost:9090/-/reload"},
			wantErr: `URL "localhost:9090/-/reload": scheme must be http or https`},
		{name: "empty URL", opts: WebhookOptions{},
			wantErr: `URL "": scheme must be http or https`},
		{name: "other scheme", opts: WebhookOptions{URL: "ftp://example.com/"},
			wantErr: `URL "ftp://example.com/": scheme must be http or https`},
		{name: "no host", opts: WebhookOptions{URL: "http:///-/reload"},
			wantErr: `URL "http:///-/reload": no host`},
		{name: "fragment", opts: WebhookOptions{URL: url + "#top"},
			wantErr: `URL "http://127.0.0.1:9090/-/reload#top": must not have a fragment`},
		{name: "does not parse", opts: WebhookOptions{URL: "http://127.0.0.1:90 90/"},
			wantErr: `URL "http://...": not a valid URL; percent-encode / ? # % @ and spaces in its user and password (%2F %3F %23 %25 %40 %20)`},
		{name: "does not parse, with a password", opts: WebhookOptions{URL: "http://admin:s3cret-pw@127.0.0.1:90 90/?token=s3cret-q"},
			wantErr: `URL "http://...": not a valid URL;`, secret: "s3cret"},
		{name: "no scheme, does not parse", opts: WebhookOptions{URL: "admin:s3cret-pw@127.0.0.1:90 90/"},
			wantErr: `URL: not a valid URL;`, secret: "s3cret"},
		{name: "scheme error with a password", opts: WebhookOptions{URL: "ftp://admin:s3cret-pw@h/?token=s3cret-q"},
			wantErr: `URL "ftp://admin:xxxxx@h/?token=xxxxx": scheme must be`, secret: "s3cret"},

		{name: "method with a space", opts: WebhookOptions{URL: url, Method: "PO ST"},
			wantErr: `method "PO ST": not a valid HTTP method`},
		{name: "method with a slash", opts: WebhookOptions{URL: url, Method: "POST/1"},
			wantErr: `method "POST/1": not a valid HTTP method`},

		{name: "status code pattern", opts: WebhookOptions{URL: url, StatusCodes: []string{"2x5"}},
			wantErr: `status code "2x5": want a code such as 200 or a class such as 2xx`},
		{name: "status code too high", opts: WebhookOptions{URL: url, StatusCodes: []string{"200", "600"}},
			wantErr: `status code "600": want a code`},
		{name: "status code in a list", opts: WebhookOptions{URL: url, StatusCodes: []string{"200,20"}},
			wantErr: `status code "20": want a code`},
		{name: "empty status code", opts: WebhookOptions{URL: url, StatusCodes: []string{""}},
			wantErr: `status code "": want a code`},

		{name: "negative timeout", opts: WebhookOptions{URL: url, Timeout: -time.Second},
			wantErr: `timeout -1s: must not be negative`},

		{name: "header without a colon", opts: WebhookOptions{URL: url, Headers: []string{"Foo"}},
			wantErr: `header: want "Name: value"; this one has no colon (not shown, as it may hold a secret)`},
		{name: "header without a colon hides the rest", opts: WebhookOptions{URL: url, Headers: []string{"Authorization Bearer s3cret-h"}},
			wantErr: `header: want "Name: value"`, secret: "s3cret"},
		{name: "header without a colon hides it all", opts: WebhookOptions{URL: url, Headers: []string{"X-Api-Key=s3cret-h"}},
			wantErr: `header: want "Name: value"`, secret: "s3cret"},
		{name: "header name with a space", opts: WebhookOptions{URL: url, Headers: []string{"X Token: s3cret-h"}},
			wantErr: `header: not a valid header name`, secret: "s3cret"},
		{name: "header name that holds the value", opts: WebhookOptions{URL: url, Headers: []string{"X-Api-Key=s3cret-h: x"}},
			wantErr: `header: not a valid header name (not shown, as it may hold a secret)`, secret: "s3cret"},
		{name: "header without a name", opts: WebhookOptions{URL: url, Headers: []string{": s3cret-h"}},
			wantErr: `header: not a valid header name`, secret: "s3cret"},
		{name: "header value with a newline", opts: WebhookOptions{URL: url, Headers: []string{"X-Token: s3cret\nEvil: 1"}},
			wantErr: `header "X-Token": value has a control character`, secret: "s3cret"},
		{name: "empty Host header", opts: WebhookOptions{URL: url, Headers: []string{"Host: "}},
			wantErr: `header "Host": empty host`},
		{name: "Authorization header and token file", opts: WebhookOptions{URL: url, Headers: []string{"authorization: Basic s3cret-h"}, BearerTokenFile: missing},
			wantErr: `header "Authorization" and the bearer token file both set Authorization`, secret: "s3cret"},
		{name: "Authorization header and user in URL", opts: WebhookOptions{URL: "http://u:p@h/", Headers: []string{"Authorization: x"}},
			wantErr: `header "Authorization" and the user in the URL both set Authorization`},
		{name: "user in URL and token file", opts: WebhookOptions{URL: "http://u:p@h/", BearerTokenFile: missing},
			wantErr: `the bearer token file and the user in the URL both set Authorization`},

		{name: "token file is a directory", opts: WebhookOptions{URL: url, BearerTokenFile: dir},
			wantErr: fmt.Sprintf(`bearer token file %s: is a directory`, dir)},

		{name: "CA file missing", opts: WebhookOptions{URL: url, CAFile: missing},
			wantErr: fmt.Sprintf(`CA file %s: open %s: no such file or directory`, missing, missing)},
		{name: "CA file without certificates", opts: WebhookOptions{URL: url, CAFile: notPEM},
			wantErr: fmt.Sprintf(`CA file %s: no certificates found`, notPEM)},
		{name: "cert without key", opts: WebhookOptions{URL: url, CertFile: certFile},
			wantErr: `client certificate and key files go together`},
		{name: "key without cert", opts: WebhookOptions{URL: url, KeyFile: keyFile},
			wantErr: `client certificate and key files go together`},
		{name: "cert file missing", opts: WebhookOptions{URL: url, CertFile: missing, KeyFile: keyFile},
			wantErr: fmt.Sprintf(`client certificate %s with key %s: open %s: no such file or directory`, missing, keyFile, missing)},
		{name: "key of another cert", opts: WebhookOptions{URL: url, CertFile: certFile, KeyFile: otherKey},
			wantErr: fmt.Sprintf(`client certificate %s with key %s: tls: private key does not match public key`, certFile, otherKey)},
		{name: "cert file is not PEM", opts: WebhookOptions{URL: url, CertFile: notPEM, KeyFile: keyFile},
			wantErr: fmt.Sprintf(`client certificate %s with key %s: tls:`, notPEM, keyFile)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWebhook(tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("NewWebhook: %v", err)
				}
				w.client.CloseIdleConnections()
				return
			}
			if err == nil {
				t.Fatalf("NewWebhook succeeded, want an error containing %q", tt.wantErr)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantErr) {
				t.Errorf("NewWebhook error = %q, want it to contain %q", msg, tt.wantErr)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("NewWebhook error = %q, want one line", msg)
			}
			if tt.secret != "" && strings.Contains(msg, tt.secret) {
				t.Errorf("NewWebhook error = %q, contains the secret %q", msg, tt.secret)
			}
		})
	}
}

func TestStatusCodes(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		match   []int
		nomatch []int
		wantErr string
	}{
		{name: "none means 200", specs: nil, match: []int{200}, nomatch: []int{201, 204, 500}},
		{name: "exact", specs: []string{"204"}, match: []int{204}, nomatch: []int{200, 205}},
		{name: "list", specs: []string{"200", "202"}, match: []int{200, 202}, nomatch: []int{201}},
		{name: "comma list", specs: []string{"200, 202"}, match: []int{200, 202}, nomatch: []int{201}},
		{name: "class", specs: []string{"2xx"}, match: []int{200, 204, 299}, nomatch: []int{199, 300, 500}},
		{name: "class in capitals", specs: []string{"3XX"}, match: []int{301}, nomatch: []int{200}},
		{name: "class and code", specs: []string{"2xx", "304"}, match: []int{201, 304}, nomatch: []int{301}},
		{name: "letters", specs: []string{"ok"}, wantErr: `status code "ok": want a code such as 200 or a class such as 2xx`},
		{name: "partial class", specs: []string{"2x5"}, wantErr: `status code "2x5"`},
		{name: "class 6", specs: []string{"6xx"}, wantErr: `status code "6xx"`},
		{name: "too long", specs: []string{"2000"}, wantErr: `status code "2000"`},
		{name: "signed", specs: []string{"+20"}, wantErr: `status code "+20"`},
		{name: "below 100", specs: []string{"099"}, wantErr: `status code "099"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			match, _, err := parseStatusCodes(tt.specs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseStatusCodes(%q) error = %v, want one containing %q", tt.specs, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStatusCodes(%q): %v", tt.specs, err)
			}
			for _, code := range tt.match {
				if !match(code) {
					t.Errorf("parseStatusCodes(%q) does not match %d", tt.specs, code)
				}
			}
			for _, code := range tt.nomatch {
				if match(code) {
					t.Errorf("parseStatusCodes(%q) matches %d", tt.specs, code)
				}
			}
		})
	}
}

func TestNotifyStatus(t *testing.T) {
	long := strings.Repeat("é", 100) + strings.Repeat("ü", 200) // 600 bytes
	tests := []struct {
		name    string
		codes   []string
		status  int
		body    string
		wantErr string // the whole message after "POST <url>: "; "" means success
	}{
		{name: "200 by default", status: 200, body: "ok"},
		{name: "204 is not 200", status: 204, wantErr: "status 204, want 200"},
		{name: "in a list", codes: []string{"200", "204"}, status: 204},
		{name: "not in a list", codes: []string{"200", "204"}, status: 202, wantErr: "status 202, want 200 or 204"},
		{name: "class", codes: []string{"2xx"}, status: 202},
		{name: "outside the class", codes: []string{"2xx"}, status: 302, wantErr: "status 302, want 2xx"},
		{name: "prometheus rejects the config", status: 500,
			body:    "failed to reload config: couldn't load configuration (--config.file=\"/etc/prometheus/prometheus.yml\"): parsing YAML file: yaml: line 3\n",
			wantErr: `status 500, want 200: failed to reload config: couldn't load configuration (--config.file="/etc/prometheus/prometheus.yml"): parsing YAML file: yaml: line 3`},
		{name: "lines joined", status: 500, body: "\n\n  first line \r\nsecond line\n",
			wantErr: "status 500, want 200: first line second line"},
		{name: "prometheus's reason on its second line", status: 500,
			body:    "failed to reload config: couldn't load configuration (--config.file=\"/etc/prometheus/prometheus.yml\"): parsing YAML file /etc/prometheus/prometheus.yml: yaml: unmarshal errors:\n  line 16: field scrape_intervall not found in type config.ScrapeConfig\n",
			wantErr: `status 500, want 200: failed to reload config: couldn't load configuration (--config.file="/etc/prometheus/prometheus.yml"): parsing YAML file /etc/prometheus/prometheus.yml: yaml: unmarshal errors: line 16: field scrape_intervall not found in type config.ScrapeConfig`},
		{name: "control characters stripped", status: 500, body: "\x1b[31mbad\x07 config\x00",
			wantErr: "status 500, want 200: [31mbad config"},
		{name: "invalid UTF-8 dropped", status: 500, body: "bad \xff\xfeconfig",
			wantErr: "status 500, want 200: bad config"},
		{name: "long body keeps its beginning and its end", status: 500, body: long,
			wantErr: "status 500, want 200: " + strings.Repeat("é", 50) + " ... " + strings.Repeat("ü", 147)},
		{name: "empty body", status: 503, wantErr: "status 503, want 200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{status: tt.status, body: tt.body}
			srv := startServer(t, rec.ServeHTTP)
			w := newTestWebhook(t, WebhookOptions{URL: srv.URL + "/-/reload", StatusCodes: tt.codes})
			err := w.Notify(t.Context())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Notify: %v", err)
				}
				return
			}
			want := "POST " + srv.URL + "/-/reload: " + tt.wantErr
			if err == nil || err.Error() != want {
				t.Fatalf("Notify error = %v,\nwant %s", err, want)
			}
			if rec.count() != 1 {
				t.Errorf("the server saw %d requests, want 1", rec.count())
			}
		})
	}
}

// TestStatusRefuses: an answer that refuses the reload is an ErrRefused;
// one that says to come back later is not.
func TestStatusRefuses(t *testing.T) {
	for code, refused := range map[int]bool{400: true, 401: true, 404: true, 422: true, 500: true,
		408: false, 425: false, 429: false, 502: false, 503: false, 504: false} {
		if got := errors.Is(&StatusError{Code: code}, ErrRefused); got != refused {
			t.Errorf("status %d is ErrRefused = %v, want %v", code, got, refused)
		}
	}
}

func TestNotifyDrainsTheBody(t *testing.T) {
	// A body larger than the excerpt but within the drain limit must be
	// read to the end, so that the next attempt reuses the connection.
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, strings.Repeat("x", 32<<10))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	w := newTestWebhook(t, WebhookOptions{URL: srv.URL})
	for range 3 {
		if err := w.Notify(t.Context()); err == nil {
			t.Fatal("Notify succeeded, want status 500")
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("3 attempts used %d connections, want 1", n)
	}
}

func TestNotifyMethod(t *testing.T) {
	for _, tt := range []struct{ method, want string }{
		{"", "POST"},
		{"POST", "POST"},
		{"PUT", "PUT"},
		{"GET", "GET"},
	} {
		t.Run(tt.want+"/"+tt.method, func(t *testing.T) {
			rec := &recorder{}
			srv := startServer(t, rec.ServeHTTP)
			w := newTestWebhook(t, WebhookOptions{URL: srv.URL + "/-/reload", Method: tt.method})
			if err := w.Notify(t.Context()); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			if got := rec.last(t); got.method != tt.want || got.path != "/-/reload" {
				t.Errorf("the server saw %s %s, want %s /-/reload", got.method, got.path, tt.want)
			}
		})
	}
}

func TestNotifyRequest(t *testing.T) {
	tests := []struct {
		name    string
		user    string // userinfo for the URL, with its @
		headers []string
		check   func(t *testing.T, r request)
	}{
		{name: "defaults", check: func(t *testing.T, r request) {
			if got := r.header.Get("User-Agent"); got != "hotreload" {
				t.Errorf("User-Agent = %q, want hotreload", got)
			}
			if r.body != "" || r.contentLength != 0 {
				t.Errorf("body = %q (Content-Length %d), want empty", r.body, r.contentLength)
			}
			if got := r.header.Get("Authorization"); got != "" {
				t.Errorf("Authorization = %q, want none", got)
			}
		}},
		{name: "basic auth from the URL", user: "admin:pa%3Ass@", check: func(t *testing.T, r request) {
			req := &http.Request{Header: r.header}
			user, pass, ok := req.BasicAuth()
			if !ok || user != "admin" || pass != "pa:ss" {
				t.Errorf("basic auth = %q, %q, %v, want admin, pa:ss", user, pass, ok)
			}
		}},
		{name: "basic auth with a user only", user: "admin@", check: func(t *testing.T, r request) {
			req := &http.Request{Header: r.header}
			if user, pass, ok := req.BasicAuth(); !ok || user != "admin" || pass != "" {
				t.Errorf("basic auth = %q, %q, %v, want admin and no password", user, pass, ok)
			}
		}},
		{name: "headers", headers: []string{"X-One: 1", "x-multi: a", "X-Multi:b", "X-Empty:", "X-Spaces:   a b  "}, check: func(t *testing.T, r request) {
			for name, want := range map[string][]string{
				"X-One": {"1"}, "X-Multi": {"a", "b"}, "X-Empty": {""}, "X-Spaces": {"a b"},
			} {
				if got := r.header.Values(name); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
		}},
		{name: "Host header", headers: []string{"Host: app.example:8080"}, check: func(t *testing.T, r request) {
			if r.host != "app.example:8080" {
				t.Errorf("Host = %q, want app.example:8080", r.host)
			}
		}},
		{name: "User-Agent can be set", headers: []string{"User-Agent: mine"}, check: func(t *testing.T, r request) {
			if got := r.header.Values("User-Agent"); len(got) != 1 || got[0] != "mine" {
				t.Errorf("User-Agent = %q, want mine", got)
			}
		}},
		{name: "Authorization header", headers: []string{"Authorization: Token abc"}, check: func(t *testing.T, r request) {
			if got := r.header.Get("Authorization"); got != "Token abc" {
				t.Errorf("Authorization = %q, want Token abc", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			srv := startServer(t, rec.ServeHTTP)
			u := strings.Replace(srv.URL, "://", "://"+tt.user, 1) + "/-/reload"
			w := newTestWebhook(t, WebhookOptions{URL: u, Headers: tt.headers})
			if err := w.Notify(t.Context()); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			tt.check(t, rec.last(t))
		})
	}
}

func TestNotifyBearerTokenRotated(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, rec.ServeHTTP)
	token := writeFile(t, t.TempDir(), "token", "first-token\n")
	w := newTestWebhook(t, WebhookOptions{URL: srv.URL, BearerTokenFile: token})

	for _, want := range []string{"first-token", "second-token"} {
		writeFile(t, filepath.Dir(token), "token", "  "+want+"\n")
		if err := w.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		if got := rec.last(t).header.Get("Authorization"); got != "Bearer "+want {
			t.Errorf("Authorization = %q, want %q", got, "Bearer "+want)
		}
	}
}

func TestNotifyBearerTokenUnusable(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string // nil: the file does not exist
		wantErr string
	}{
		{name: "missing", wantErr: "read bearer token: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{name: "empty", content: ptr(" \n"), wantErr: "bearer token file " + filepath.Join(dir, "empty") + ": empty"},
		{name: "two lines", content: ptr("s3cret-one\ns3cret-two\n"), wantErr: ": more than one line, or a control character"},
		{name: "too large", content: ptr(strings.Repeat("a", maxTokenSize+1)), wantErr: ": larger than 16384 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			if tt.content != nil {
				writeFile(t, dir, tt.name, *tt.content)
			}
			rec := &recorder{}
			srv := startServer(t, rec.ServeHTTP)
			w := newTestWebhook(t, WebhookOptions{URL: srv.URL, BearerTokenFile: path})
			err := w.Notify(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Notify error = %v, want one containing %q", err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "POST "+srv.URL+": ") {
				t.Errorf("Notify error = %q, want it to start with the method and the URL", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Notify error = %q, contains the token", err)
			}
			if n := rec.count(); n != 0 {
				t.Errorf("the server saw %d requests without a token, want 0", n)
			}

			// A projected token that appears later is used.
			writeFile(t, dir, tt.name, "late-token")
			if err := w.Notify(t.Context()); err != nil {
				t.Fatalf("Notify once the token is there: %v", err)
			}
			if got := rec.last(t).header.Get("Authorization"); got != "Bearer late-token" {
				t.Errorf("Authorization = %q, want Bearer late-token", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestNotifyTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release // hung until the test ends, whatever the client does
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	const timeout = 200 * time.Millisecond
	w := newTestWebhook(t, WebhookOptions{URL: srv.URL + "/-/reload", Timeout: timeout})

	start := time.Now()
	err := w.Notify(t.Context())
	elapsed := time.Since(start)
	want := "POST " + srv.URL + "/-/reload: timed out after 200ms"
	if err == nil || err.Error() != want {
		t.Fatalf("Notify error = %v, want %s", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
	}
	if elapsed < timeout || elapsed > timeout+2*time.Second {
		t.Errorf("Notify returned after %v, want about %v", elapsed, timeout)
	}
}

func TestNotifyContextCanceled(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, rec.ServeHTTP)
	w := newTestWebhook(t, WebhookOptions{URL: srv.URL})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := w.Notify(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Notify error = %v, want context.Canceled", err)
	}
	if strings.Contains(err.Error(), "timed out") {
		t.Errorf("Notify error = %q, says timed out for a canceled context", err)
	}
}

func TestNotifyConnectionRefused(t *testing.T) {
	addr := e2etest.FreeAddr(t)
	w := newTestWebhook(t, WebhookOptions{URL: "http://" + addr + "/-/reload"})
	err := w.Notify(t.Context())
	want := "POST http://" + addr + "/-/reload: connection refused"
	if err == nil || err.Error() != want {
		t.Fatalf("Notify error = %v, want %s", err, want)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("errors.Is(%v, ECONNREFUSED) = false", err)
	}
}

func TestNotifyConnectionClosed(t *testing.T) {
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	w := newTestWebhook(t, WebhookOptions{URL: srv.URL})
	err := w.Notify(t.Context())
	want := "POST " + srv.URL + ": connection closed by the app before a response"
	if err == nil || err.Error() != want {
		t.Fatalf("Notify error = %v, want %s", err, want)
	}
}

func TestNotifyRedirect(t *testing.T) {
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.Handle("/-/reload", rec)
	mux.Handle("/temporary", http.RedirectHandler("/-/reload", http.StatusTemporaryRedirect))
	mux.Handle("/found", http.RedirectHandler("/-/reload?token=s3cret-loc", http.StatusFound))
	mux.Handle("/elsewhere", http.RedirectHandler("http://example.com/-/reload?token=s3cret-loc", http.StatusTemporaryRedirect))
	mux.Handle("/loop", http.RedirectHandler("/loop", http.StatusTemporaryRedirect))
	srv := startServer(t, mux.ServeHTTP)

	tests := []struct {
		name, method, path string
		wantErr            string
		wantMethod         string
	}{
		{name: "307 keeps POST", method: "POST", path: "/temporary", wantMethod: "POST"},
		{name: "302 after GET", method: "GET", path: "/found", wantMethod: "GET"},
		{name: "302 would turn POST into GET", method: "POST", path: "/found",
			wantErr: "POST " + srv.URL + "/found: redirected to " + srv.URL + "/-/reload?token=xxxxx, which would turn POST into GET"},
		{name: "loop", method: "POST", path: "/loop", wantErr: "POST " + srv.URL + "/loop: stopped after 10 redirects"},
		{name: "another host", method: "POST", path: "/elsewhere",
			wantErr: "POST " + srv.URL + "/elsewhere: redirected to http://example.com/-/reload?token=xxxxx: refusing to follow to another scheme, host or port, which would get the credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rec.count()
			w := newTestWebhook(t, WebhookOptions{URL: srv.URL + tt.path, Method: tt.method})
			err := w.Notify(t.Context())
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Notify error = %v,\nwant %s", err, tt.wantErr)
				}
				if rec.count() != before {
					t.Errorf("the reload endpoint was called")
				}
				return
			}
			if err != nil {
				t.Fatalf("Notify: %v", err)
			}
			if got := rec.last(t).method; got != tt.wantMethod {
				t.Errorf("the reload endpoint saw %s, want %s", got, tt.wantMethod)
			}
		})
	}
}

// TestRedirectKeepsCredentialsHome: a redirect to the same host on another
// port, or to another scheme, is not followed: the credentials and headers
// of the reload request stay with the app they were given for.
func TestRedirectKeepsCredentialsHome(t *testing.T) {
	other := &recorder{}
	otherSrv := startServer(t, other.ServeHTTP)
	_, otherPort, _ := net.SplitHostPort(strings.TrimPrefix(otherSrv.URL, "http://"))
	mux := http.NewServeMux()
	mux.Handle("/port", http.RedirectHandler("http://127.0.0.1:"+otherPort+"/-/reload", http.StatusTemporaryRedirect))
	mux.Handle("/scheme", http.RedirectHandler("https://127.0.0.1:"+otherPort+"/-/reload", http.StatusTemporaryRedirect))
	srv := startServer(t, mux.ServeHTTP)
	host := strings.TrimPrefix(srv.URL, "http://")

	for _, tt := range []struct{ path, to string }{
		{"/port", "http://127.0.0.1:" + otherPort + "/-/reload"},
		{"/scheme", "https://127.0.0.1:" + otherPort + "/-/reload"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			w := newTestWebhook(t, WebhookOptions{URL: "http://admin:s3cret-pw@" + host + tt.path, Headers: []string{"X-Api-Key: s3cret-h"}})
			err := w.Notify(t.Context())
			want := "POST http://admin:xxxxx@" + host + tt.path + ": redirected to " + tt.to + ": refusing to follow to another scheme, host or port, which would get the credentials"
			if err == nil || err.Error() != want {
				t.Errorf("Notify = %v,\nwant %s", err, want)
			}
			var re *RedirectError
			if !errors.As(err, &re) {
				t.Errorf("Notify = %v, want a *RedirectError", err)
			}
		})
	}
	if n := other.count(); n != 0 {
		t.Errorf("the other port got %d requests, with the credentials", n)
	}
}

func TestNotifyConcurrent(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, rec.ServeHTTP)
	token := writeFile(t, t.TempDir(), "token", "t0")
	w := newTestWebhook(t, WebhookOptions{URL: srv.URL, BearerTokenFile: token, Headers: []string{"X-A: 1"}})
	const goroutines, calls = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for range goroutines {
		wg.Go(func() {
			for range calls {
				errs <- w.Notify(t.Context())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Notify: %v", err)
		}
	}
	if n := rec.count(); n != goroutines*calls {
		t.Errorf("the server saw %d requests, want %d", n, goroutines*calls)
	}
}

func TestWebhookName(t *testing.T) {
	tests := []struct{ url, want string }{
		{"http://127.0.0.1:9090/-/reload", "http://127.0.0.1:9090/-/reload"},
		{"http://admin:s3cret@127.0.0.1:9090/-/reload", "http://admin:xxxxx@127.0.0.1:9090/-/reload"},
		{"http://admin@127.0.0.1:9090/-/reload", "http://admin@127.0.0.1:9090/-/reload"},
		{"https://h/x?token=abc&b=2&flag&empty=", "https://h/x?token=xxxxx&b=xxxxx&flag&empty="},
		{"HTTP://h:80/a%20b?q=a%20b", "http://h:80/a%20b?q=xxxxx"},
		{"http://[::1]:9090/", "http://[::1]:9090/"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			w := newTestWebhook(t, WebhookOptions{URL: tt.url})
			if got := w.Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestNoCredentialInNamesOrErrors makes every kind of failed attempt, with
// an app that echoes every credential back, and checks that neither the
// name nor the error shows one.
func TestNoCredentialInNamesOrErrors(t *testing.T) {
	const (
		password   = "pa55word-secret"
		queryToken = "query-token-secret"
		headerKey  = "header-key-secret"
		bearer     = "bearer-token-secret"
	)
	secrets := []string{password, queryToken, headerKey, bearer, base64.StdEncoding.EncodeToString([]byte("admin:" + password))}
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "denied %s %s %s %s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.URL.RawQuery, r.URL.Query().Get("token"))
	}
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/hang", func(http.ResponseWriter, *http.Request) { <-release })
	mux.Handle("/redirect", http.RedirectHandler("/echo?token="+queryToken, http.StatusFound))
	srv := startServer(t, mux.ServeHTTP)
	t.Cleanup(func() { close(release) })
	host := strings.TrimPrefix(srv.URL, "http://")
	tokenFile := writeFile(t, t.TempDir(), "token", bearer)

	auths := map[string]func(scheme, host, path string) WebhookOptions{
		"basic auth": func(scheme, host, path string) WebhookOptions {
			return WebhookOptions{URL: scheme + "://admin:" + password + "@" + host + path + "?token=" + queryToken, Headers: []string{"X-Api-Key: " + headerKey}}
		},
		"bearer token": func(scheme, host, path string) WebhookOptions {
			return WebhookOptions{URL: scheme + "://" + host + path + "?token=" + queryToken, Headers: []string{"X-Api-Key: " + headerKey}, BearerTokenFile: tokenFile}
		},
	}
	failures := []struct {
		name, scheme, host, path string
		timeout                  time.Duration
		wantErr                  string
	}{
		{name: "status with the secrets echoed", host: host, path: "/echo", wantErr: "status 403, want 200: denied"},
		{name: "redirect", host: host, path: "/redirect", wantErr: "redirected to"},
		{name: "timeout", host: host, path: "/hang", timeout: 100 * time.Millisecond, wantErr: "timed out"},
		{name: "connection refused", host: e2etest.FreeAddr(t), path: "/echo", wantErr: "connection refused"},
		{name: "https to an http server", scheme: "https", host: host, path: "/echo", wantErr: "HTTP response to HTTPS client"},
	}
	for authName, opts := range auths {
		for _, f := range failures {
			t.Run(authName+"/"+f.name, func(t *testing.T) {
				scheme := cmp.Or(f.scheme, "http")
				o := opts(scheme, f.host, f.path)
				o.Timeout = f.timeout
				w := newTestWebhook(t, o)
				err := w.Notify(t.Context())
				if err == nil || !strings.Contains(err.Error(), f.wantErr) {
					t.Fatalf("Notify error = %v, want one containing %q", err, f.wantErr)
				}
				for _, s := range secrets {
					if strings.Contains(w.Name(), s) {
						t.Errorf("Name() = %q, contains %q", w.Name(), s)
					}
					if strings.Contains(err.Error(), s) {
						t.Errorf("Notify error = %q, contains %q", err, s)
					}
				}
			})
		}
	}
}

// A password with / ? # or a bad % escape breaks the URL's authority: the
// error shows the scheme only, never a part of the password nor the
// parser's text, which quotes it.
func TestUnparsedURLShowsNoPassword(t *testing.T) {
	const want = `URL "http://...": not a valid URL; percent-encode / ? # % @ and spaces in its user and password (%2F %3F %23 %25 %40 %20)`
	for _, password := range []string{"s3cret/pw", "s3cret?pw", "s3cret#pw", "s3cret%zz", "12/s3cret", "12?s3cret", "12#s3cret"} {
		t.Run(password, func(t *testing.T) {
			_, err := NewWebhook(WebhookOptions{URL: "http://admin:" + password + "@127.0.0.1:9090/-/reload"})
			if err == nil || err.Error() != want {
				t.Fatalf("NewWebhook error = %v, want %q", err, want)
			}
		})
	}
	t.Run("escaped", func(t *testing.T) {
		w, err := NewWebhook(WebhookOptions{URL: "http://admin:s3cret%2Fpw%3F%23%25@127.0.0.1:9090/-/reload"})
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := w.user.Password(); p != "s3cret/pw?#%" {
			t.Errorf("password = %q, want it decoded", p)
		}
		if want := "http://admin:xxxxx@127.0.0.1:9090/-/reload"; w.Name() != want {
			t.Errorf("Name() = %q, want %q", w.Name(), want)
		}
	})
}

// An app that echoes the credential of an Authorization or
// Proxy-Authorization header on its own, without its scheme, or the
// decoded user:password of Basic, or the password alone, has it scrubbed.
func TestAuthorizationHeaderPartsScrubbed(t *testing.T) {
	const (
		token    = "t0ken-s3cret"
		user     = "admin"
		password = "pa55-s3cret"
	)
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	tests := []struct {
		name, header, echo, want string
	}{
		{"bearer token alone", "Authorization: Bearer " + token, token,
			"status 401, want 200: bad token xxxxx"},
		{"proxy bearer token alone", "Proxy-Authorization: Bearer " + token, token,
			"status 401, want 200: bad token xxxxx"},
		{"basic user:password", "Authorization: Basic " + basic, user + ":" + password,
			"status 401, want 200: bad token xxxxx"},
		{"basic password alone", "authorization: basic " + basic, password,
			"status 401, want 200: bad token xxxxx"},
		{"basic base64 alone", "Authorization: Basic " + basic, basic,
			"status 401, want 200: bad token xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, "bad token %s", tt.echo)
			})
			w := newTestWebhook(t, WebhookOptions{URL: srv.URL + "/reload", Headers: []string{tt.header}})
			err := w.Notify(t.Context())
			want := "POST " + srv.URL + "/reload: " + tt.want
			if err == nil || err.Error() != want {
				t.Fatalf("Notify error = %v, want %q", err, want)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Code != http.StatusUnauthorized || se.Body != "bad token xxxxx" {
				t.Errorf("Notify error's StatusError = %+v, want code 401 and the scrubbed body", se)
			}
		})
	}
}
