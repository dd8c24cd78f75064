package injector

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// The keys of the certificate Secret's data. tls.crt, tls.key and ca.crt
// are also what cert-manager writes.
const (
	secretCert     = "tls.crt"
	secretKey      = "tls.key"
	secretCA       = "ca.crt"
	secretCAKey    = "ca.key"
	secretNextCA   = "next-ca.crt"
	secretNextKey  = "next-ca.key"
	secretBundle   = "ca-bundle.crt"
	annotateRotate = "hotreload.dev/rotate" // on the Secret: "ca" or "cert" rotates now
)

// backdate is how far before its making a certificate is valid from, so
// that an API server whose clock is behind ours by less still trusts it.
const backdate = 5 * time.Minute

// CertTimes are the lifetimes of the injector's own certificates.
type CertTimes struct {
	// CA is the lifetime of the CA; a new one is made when a third of it is
	// left, trusted at once, and signs from Overlap later.
	CA time.Duration
	// Cert is the lifetime of the serving certificate; a new one is made
	// when a third of it is left. At most a quarter of CA.
	Cert time.Duration
	// Overlap is how long a new CA is trusted (in the webhook's caBundle)
	// before it signs, and an old one still trusted after it stopped:
	// longer than the API server takes to read the webhook configuration
	// and every replica the Secret.
	Overlap time.Duration
}

// DefaultCertTimes are the lifetimes without flags: a serving
// certificate lives 30 days (renewed after 20), the CA a year.
var DefaultCertTimes = CertTimes{CA: 365 * 24 * time.Hour, Cert: 30 * 24 * time.Hour, Overlap: 2 * time.Minute}

// Check says what is wrong with the times, naming the flags.
func (t CertTimes) Check() error {
	switch {
	case t.Cert < time.Minute:
		return fmt.Errorf("--injector.cert-validity %s: want a minute or more", t.Cert)
	case t.CA < 4*t.Cert:
		return fmt.Errorf("--injector.ca-validity %s: want at least 4 times --injector.cert-validity %s", t.CA, t.Cert)
	case t.Overlap < time.Second || t.Overlap > t.Cert/3:
		return fmt.Errorf("--injector.cert-overlap %s: want a second or more, and at most a third of --injector.cert-validity %s", t.Overlap, t.Cert)
	}
	return nil
}

// keyPair is a certificate and its key, parsed and as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// made is when the certificate was made.
func (k *keyPair) made() time.Time { return k.cert.NotBefore.Add(backdate) }

// certState is what the certificate Secret holds: the CA that signs, a new
// CA not signing yet, every CA the webhook trusts, the serving certificate.
type certState struct {
	ca, next *keyPair
	trusted  []*x509.Certificate // in the bundle: ca, next, then older ones
	serving  *keyPair
}

// parseState reads the Secret's data. What does not parse is left out, to
// be made anew; extra are CAs the webhook configuration trusts now, kept
// trusted for a while so that a replica serving a certificate they signed
// keeps working.
func parseState(data map[string][]byte, extra []byte) certState {
	var s certState
	s.ca, _ = parseKeyPair(data[secretCA], data[secretCAKey])
	s.next, _ = parseKeyPair(data[secretNextCA], data[secretNextKey])
	s.serving, _ = parseKeyPair(data[secretCert], data[secretKey])
	for _, b := range [][]byte{data[secretBundle], extra} {
		for _, c := range parseCerts(b) {
			if !slices.ContainsFunc(s.trusted, c.Equal) {
				s.trusted = append(s.trusted, c)
			}
		}
	}
	return s
}

// data is the Secret's data for s.
func (s certState) data() map[string][]byte {
	d := map[string][]byte{secretBundle: s.bundle()}
	if s.ca != nil {
		d[secretCA], d[secretCAKey] = s.ca.certPEM, s.ca.keyPEM
	}
	if s.next != nil {
		d[secretNextCA], d[secretNextKey] = s.next.certPEM, s.next.keyPEM
	}
	if s.serving != nil {
		d[secretCert], d[secretKey] = s.serving.certPEM, s.serving.keyPEM
	}
	return d
}

// bundle is the PEM of every trusted CA: the caBundle of the webhook.
func (s certState) bundle() []byte {
	var b bytes.Buffer
	for _, c := range s.trusted {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// rotate returns the state at now: what plan to keep, what to make. force
// is the Secret's rotate annotation ("ca", "cert" or ""). did says what
// changed, for the log and the metrics ("ca", "next-ca", "cert", "bundle").
func rotate(s certState, now time.Time, dnsNames []string, t CertTimes, force string) (certState, []string, error) {
	var did []string
	valid := func(k *keyPair) bool {
		return k != nil && !now.Before(k.cert.NotBefore) && now.Before(k.cert.NotAfter)
	}
	due := func(k *keyPair, lifetime time.Duration) bool {
		return !now.Before(k.cert.NotAfter.Add(-lifetime / 3))
	}
	var err error
	if !valid(s.next) {
		s.next = nil
	}
	switch {
	case valid(s.ca):
	case s.next != nil: // the CA expired before its successor signed: now
		s.ca, s.next, s.serving = s.next, nil, nil
		did = append(did, "ca")
	default: // none yet, or lost: a new one signs at once
		if s.ca, err = newCA(now, t.CA); err != nil {
			return s, nil, err
		}
		s.serving = nil
		did = append(did, "ca")
	}
	if s.next == nil && (due(s.ca, t.CA) || force == "ca") {
		if s.next, err = newCA(now, t.CA); err != nil {
			return s, nil, err
		}
		did = append(did, "next-ca")
	}
	if s.next != nil && !now.Before(s.next.made().Add(t.Overlap)) {
		s.ca, s.next, s.serving = s.next, nil, nil
		did = append(did, "ca")
	}
	if !valid(s.serving) || due(s.serving, t.Cert) || force == "cert" ||
		s.serving.cert.CheckSignatureFrom(s.ca.cert) != nil || !slices.Equal(s.serving.cert.DNSNames, dnsNames) {
		if s.serving, err = newServing(now, t.Cert, dnsNames, s.ca); err != nil {
			return s, nil, err
		}
		did = append(did, "cert")
	}

	// Trusted: the CA, its successor, and for Overlap after the serving
	// certificate was made the CAs trusted before, which replicas that
	// have not read the Secret yet may still serve with.
	trusted := []*x509.Certificate{s.ca.cert}
	if s.next != nil {
		trusted = append(trusted, s.next.cert)
	}
	for _, c := range s.trusted {
		if !slices.ContainsFunc(trusted, c.Equal) && now.Before(c.NotAfter) && now.Before(s.serving.made().Add(t.Overlap)) {
			trusted = append(trusted, c)
		}
	}
	if !slices.EqualFunc(trusted, s.trusted, (*x509.Certificate).Equal) {
		did = append(did, "bundle")
	}
	s.trusted = trusted
	return s, did, nil
}

// nextCheck is when rotate will have something to do, unless forced.
func (s certState) nextCheck(t CertTimes) time.Time {
	at := s.serving.cert.NotAfter.Add(-t.Cert / 3)
	earlier := func(u time.Time) {
		if u.Before(at) {
			at = u
		}
	}
	earlier(s.ca.cert.NotAfter.Add(-t.CA / 3))
	if s.next != nil {
		earlier(s.next.made().Add(t.Overlap))
	}
	if len(s.trusted) > 1+btoi(s.next != nil) {
		earlier(s.serving.made().Add(t.Overlap))
	}
	return at
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newCA(now time.Time, lifetime time.Duration) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "hotreload-injector-ca@" + now.UTC().Format(time.RFC3339)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return makeCert(tmpl, nil)
}

func newServing(now time.Time, lifetime time.Duration, dnsNames []string, ca *keyPair) (*keyPair, error) {
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		NotBefore:   now.Add(-backdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return makeCert(tmpl, ca)
}

// makeCert signs tmpl with parent's key, or itself with none. ECDSA P-256:
// quick to make on a busy node, and what every API server trusts.
func makeCert(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	signer, issuer := crypto.Signer(key), tmpl
	if parent != nil {
		signer, issuer = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return parseKeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// parseKeyPair reads a certificate and its key from PEM.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errors.New("missing")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the key cannot sign")
	}
	return &keyPair{cert: pair.Leaf, key: signer, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// parseCerts reads every certificate of a PEM bundle, skipping what does
// not parse.
func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}
