package notifier

import (
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFallbackRoots runs itself again in a process that sees no system
// roots, and checks that the webhook's pool holds the fallback roots: it
// must start from x509.SystemCertPool, not from an empty pool.
func TestFallbackRoots(t *testing.T) {
	if os.Getenv("HOTRELOAD_TEST_NO_SYSTEM_ROOTS") == "1" {
		w := newTestWebhook(t, WebhookOptions{URL: "https://prometheus.example/-/reload"})
		pool := w.client.Transport.(*http.Transport).TLSClientConfig.RootCAs
		if pool == nil || pool.Equal(x509.NewCertPool()) {
			t.Fatal("the webhook trusts no root: want the fallback roots when the system has none")
		}
		return
	}
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.pem", "")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFallbackRoots$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"HOTRELOAD_TEST_NO_SYSTEM_ROOTS=1",
		"SSL_CERT_FILE="+empty,
		"SSL_CERT_DIR="+filepath.Join(dir, "none"),
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("without system roots: %v\n%s", err, out)
	}
}
