// Package testcert makes certificates for tests: a certificate authority of
// the test's own and the server and client certificates it signs, written
// as PEM files, as TLS options and web config files name them. Keys are
// ECDSA P-256, quick to make; certificates are valid from an hour ago to an
// hour from now. Test support: no program links it.
//
// The controller's injector makes its own certificates (controller/injector,
// certs.go): that is product code, with its own lifetimes and rotation.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool // Cert alone, for a tls.Config's RootCAs or ClientCAs
	File string         // Cert, PEM, in a temporary directory of the test's

	key *ecdsa.PrivateKey
}

// NewCA makes a certificate authority and writes its certificate to File.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "hotreload test CA"},
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der := sign(tb, tmpl, tmpl, key, key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{Cert: cert, Pool: x509.NewCertPool(), File: filepath.Join(tb.TempDir(), "ca.pem"), key: key}
	ca.Pool.AddCert(cert)
	writePEM(tb, ca.File, "CERTIFICATE", der)
	return ca
}

// WriteServerCert writes a server certificate for hosts (IP addresses or
// DNS names) signed by ca, and its key, to certFile and keyFile, replacing
// what was there.
func (ca *CA) WriteServerCert(tb testing.TB, certFile, keyFile string, hosts ...string) {
	tb.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	ca.write(tb, tmpl, certFile, keyFile)
}

// WriteClientCert writes a client certificate for cn signed by ca, and its
// key, to certFile and keyFile, replacing what was there.
func (ca *CA) WriteClientCert(tb testing.TB, certFile, keyFile, cn string) {
	tb.Helper()
	ca.write(tb, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, certFile, keyFile)
}

func (ca *CA) write(tb testing.TB, tmpl *x509.Certificate, certFile, keyFile string) {
	tb.Helper()
	key := newKey(tb)
	der := sign(tb, tmpl, ca.Cert, key, ca.key)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, certFile, "CERTIFICATE", der)
	writePEM(tb, keyFile, "PRIVATE KEY", keyDER)
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// sign fills in tmpl's serial number and validity and signs it for key
// with parent's key.
func sign(tb testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	tb.Helper()
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		tb.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	return der
}

func writePEM(tb testing.TB, file, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
