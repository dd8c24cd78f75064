package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
)

// TestChains: what WriteServerCert and WriteClientCert write loads as a key
// pair and verifies against the CA's pool for its use, and only for it.
func TestChains(t *testing.T) {
	ca := NewCA(t)
	dir := t.TempDir()
	load := func(name string) *x509.Certificate {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		return pair.Leaf
	}
	ca.WriteServerCert(t, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), "127.0.0.1", "example.test")
	ca.WriteClientCert(t, filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"), "client")
	server, client := load("server"), load("client")

	for _, host := range []string{"127.0.0.1", "example.test"} {
		if _, err := server.Verify(x509.VerifyOptions{Roots: ca.Pool, DNSName: host}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := server.Verify(x509.VerifyOptions{Roots: ca.Pool, DNSName: "other.test"}); err == nil {
		t.Error("server certificate verified for a host it was not made for")
	}
	clientUse := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if _, err := client.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: clientUse}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := server.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: clientUse}); err == nil {
		t.Error("server certificate verified as a client's")
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: NewCA(t).Pool, KeyUsages: clientUse}); err == nil {
		t.Error("client certificate verified against another CA")
	}
}
