package notifier

import (
	"cmp"
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hotreload/hotreload/test/support/testcert"
)

// writeClientCert writes a client certificate for cn signed by ca, and its
// key, to cn.pem and cn-key.pem in dir.
func writeClientCert(t *testing.T, ca *testcert.CA, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	ca.WriteClientCert(t, certFile, keyFile, cn)
	return certFile, keyFile
}

// startTLSServer starts an httptest TLS server and writes its certificate
// to a PEM file, to use as CAFile.
func startTLSServer(t *testing.T, h http.Handler, cfg *tls.Config) (srv *httptest.Server, caFile string) {
	t.Helper()
	srv = httptest.NewUnstartedServer(h)
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = writeFile(t, t.TempDir(), "server-ca.pem",
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	return srv, caFile
}

func TestNotifyTLS(t *testing.T) {
	rec := &recorder{}
	srv, caFile := startTLSServer(t, rec, nil)
	otherCA := testcert.NewCA(t)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]

	tests := []struct {
		name    string
		url     string // "" means srv.URL
		opts    WebhookOptions
		wantErr string // the message after "POST <url>: "; "" means success
		partial bool   // wantErr is a prefix of the message, which also says "not localhost"
	}{
		{name: "CA file", opts: WebhookOptions{CAFile: caFile}},
		{name: "no CA file", wantErr: "TLS: certificate signed by an unknown authority"},
		{name: "another CA", opts: WebhookOptions{CAFile: otherCA.File},
			wantErr: "TLS: certificate signed by an unknown authority"},
		{name: "skip verify", opts: WebhookOptions{InsecureSkipVerify: true}},
		{name: "wrong host name", url: "https://localhost:" + port, opts: WebhookOptions{CAFile: caFile},
			wantErr: "TLS: x509: certificate is valid for example.com", partial: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rec.count()
			opts := tt.opts
			opts.URL = cmp.Or(tt.url, srv.URL)
			w := newTestWebhook(t, opts)
			err := w.Notify(t.Context())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Notify: %v", err)
				}
				if rec.count() != before+1 {
					t.Errorf("the server saw %d requests, want 1", rec.count()-before)
				}
				return
			}
			want := "POST " + opts.URL + ": " + tt.wantErr
			switch {
			case err == nil:
				t.Fatalf("Notify succeeded, want error %s", want)
			case tt.partial && (!strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "not localhost")):
				t.Fatalf("Notify error = %v,\nwant %s..., not localhost", err, want)
			case !tt.partial && err.Error() != want:
				t.Fatalf("Notify error = %v,\nwant %s", err, want)
			}
		})
	}
}

func TestNotifyRedirectFromHTTPS(t *testing.T) {
	rec := &recorder{}
	plain := startServer(t, rec.ServeHTTP)
	srv, caFile := startTLSServer(t, http.RedirectHandler(plain.URL+"/-/reload", http.StatusTemporaryRedirect), nil)
	w := newTestWebhook(t, WebhookOptions{URL: srv.URL, CAFile: caFile})
	err := w.Notify(t.Context())
	want := "POST " + srv.URL + ": redirected to " + plain.URL + "/-/reload: refusing to follow to another scheme, host or port, which would get the credentials"
	if err == nil || err.Error() != want {
		t.Fatalf("Notify error = %v,\nwant %s", err, want)
	}
	if rec.count() != 0 {
		t.Errorf("the plain http server was called")
	}
}

func TestNotifyMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	var (
		mu  sync.Mutex
		cns []string
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		cns = append(cns, r.TLS.PeerCertificates[0].Subject.CommonName)
	})
	lastCN := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(cns) == 0 {
			return ""
		}
		return cns[len(cns)-1]
	}
	srv, caFile := startTLSServer(t, h, &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool})
	dir := t.TempDir()
	certFile, keyFile := writeClientCert(t, ca, dir, "client")

	t.Run("without a client certificate", func(t *testing.T) {
		w := newTestWebhook(t, WebhookOptions{URL: srv.URL, CAFile: caFile})
		if err := w.Notify(t.Context()); err == nil {
			t.Fatal("Notify succeeded without a client certificate")
		}
		if cn := lastCN(); cn != "" {
			t.Errorf("the handler ran for %q", cn)
		}
	})

	w := newTestWebhook(t, WebhookOptions{URL: srv.URL, CAFile: caFile, CertFile: certFile, KeyFile: keyFile})
	t.Run("with a client certificate", func(t *testing.T) {
		if err := w.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		if cn := lastCN(); cn != "client" {
			t.Errorf("the server saw client certificate %q, want client", cn)
		}
	})

	t.Run("rotated certificate on a new connection", func(t *testing.T) {
		ca.WriteClientCert(t, certFile, keyFile, "client-rotated")
		w.client.CloseIdleConnections()
		if err := w.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		if cn := lastCN(); cn != "client-rotated" {
			t.Errorf("the server saw client certificate %q, want client-rotated", cn)
		}
	})

	t.Run("key file gone", func(t *testing.T) {
		if err := os.Remove(keyFile); err != nil {
			t.Fatal(err)
		}
		w.client.CloseIdleConnections()
		err := w.Notify(t.Context())
		want := "load client certificate: open " + keyFile + ": no such file or directory"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Notify error = %v, want one containing %q", err, want)
		}
	})
}
