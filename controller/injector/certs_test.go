package injector

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotreload/hotreload/test/support/poll"
)

var testDNS = DNSNames("hotreload-injector", "hotreload-system")

// verifies reports whether cert verifies for the webhook's Service
// against bundle at now, as the API server checks it.
func verifies(cert *x509.Certificate, bundle []byte, now time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return errors.New("empty bundle")
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: testDNS[0], CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// Over two days of minutes, with a CA that lives 6 hours and certificates
// that live an hour, the API server always trusts what every replica
// serves, though both are late by less than the overlap: a new
// certificate is trusted by the bundle written an overlap before (an API
// server that has not read the webhook configuration since), and the one
// before it by the new bundle (a replica that has not read the Secret).
func TestRotateNeverBreaksTrust(t *testing.T) {
	times := CertTimes{CA: 6 * time.Hour, Cert: time.Hour, Overlap: 2 * time.Minute}
	start := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var (
		s         certState
		old       *x509.Certificate // the serving certificate before the last change
		changedAt time.Time
		counts    = map[string]int{}
		bundles   = map[time.Time][]byte{} // written at
	)
	const step = time.Minute
	for now := start; now.Before(start.Add(48 * time.Hour)); now = now.Add(step) {
		next, did, err := rotate(s, now, testDNS, times, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range did {
			counts[d]++
		}
		bundle := next.bundle()
		if err := verifies(next.serving.cert, bundle, now); err != nil {
			t.Fatalf("%s: the new certificate does not verify: %v", now.Sub(start), err)
		}
		bundles[now] = bundle
		if late, ok := bundles[now.Add(step-times.Overlap)]; ok {
			if err := verifies(next.serving.cert, late, now); err != nil {
				t.Fatalf("%s: the new certificate is not trusted by the bundle of %s before: %v", now.Sub(start), times.Overlap-step, err)
			}
		}
		if s.serving != nil && !next.serving.cert.Equal(s.serving.cert) {
			old, changedAt = s.serving.cert, now
		}
		if old != nil && now.Sub(changedAt) < times.Overlap {
			if err := verifies(old, bundle, now); err != nil {
				t.Fatalf("%s: the certificate a slow replica still serves, made %s before, does not verify: %v", now.Sub(start), now.Sub(changedAt), err)
			}
		}
		if len(next.trusted) > 3 {
			t.Fatalf("%s: %d CAs trusted", now.Sub(start), len(next.trusted))
		}
		s = next
	}
	// A certificate lives an hour and is renewed after 40 minutes; a CA
	// after 4 hours, and signs 2 minutes later.
	if counts["cert"] < 70 || counts["cert"] > 75 || counts["ca"] < 12 || counts["ca"] > 13 || counts["next-ca"] != counts["ca"]-1 {
		t.Errorf("rotations %v", counts)
	}
}

func TestRotateForced(t *testing.T) {
	times := CertTimes{CA: 24 * time.Hour, Cert: time.Hour, Overlap: time.Minute}
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	s, _, err := rotate(certState{}, now, testDNS, times, "")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	c, did, _ := rotate(s, now, testDNS, times, "cert")
	if !slices.Equal(did, []string{"cert"}) || c.serving.cert.Equal(s.serving.cert) || !c.ca.cert.Equal(s.ca.cert) {
		t.Errorf("forced cert: did %v", did)
	}
	c, did, _ = rotate(s, now, testDNS, times, "ca")
	if !slices.Equal(did, []string{"next-ca", "bundle"}) || !c.serving.cert.Equal(s.serving.cert) || len(c.trusted) != 2 {
		t.Errorf("forced ca: did %v: want a new CA trusted, signing nothing yet", did)
	}
	// The new CA signs once the overlap is over; the old one is trusted
	// for another overlap, then dropped.
	now = now.Add(time.Minute)
	p, did, _ := rotate(c, now, testDNS, times, "")
	if !slices.Equal(did, []string{"ca", "cert", "bundle"}) || !p.ca.cert.Equal(c.next.cert) || p.serving.cert.CheckSignatureFrom(c.next.cert) != nil || len(p.trusted) != 2 {
		t.Errorf("promotion: did %v, %d trusted", did, len(p.trusted))
	}
	if err := verifies(s.serving.cert, p.bundle(), now); err != nil {
		t.Errorf("the old certificate is not trusted during the overlap: %v", err)
	}
	now = now.Add(time.Minute)
	p, did, _ = rotate(p, now, testDNS, times, "")
	if !slices.Equal(did, []string{"bundle"}) || len(p.trusted) != 1 {
		t.Errorf("after the overlap: did %v, %d trusted", did, len(p.trusted))
	}
	if verifies(s.serving.cert, p.bundle(), now) == nil {
		t.Error("the old CA is still trusted after the overlap")
	}
	// DNS names that change (another Service) make a new certificate.
	_, did, _ = rotate(p, now, DNSNames("other", "ns"), times, "")
	if !slices.Equal(did, []string{"cert"}) {
		t.Errorf("new names: did %v", did)
	}
}

// A Secret that was deleted (or never written while the webhook trusts
// another CA) gets a new CA, and the CAs the webhook trusts stay trusted
// for the overlap, so replicas serving the old certificate keep working.
func TestRotateAfterLostSecret(t *testing.T) {
	times := CertTimes{CA: 24 * time.Hour, Cert: time.Hour, Overlap: time.Minute}
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	s, _, _ := rotate(certState{}, now, testDNS, times, "")
	now = now.Add(10 * time.Minute)
	n, did, err := rotate(parseState(nil, s.bundle()), now, testDNS, times, "")
	if err != nil || !slices.Equal(did, []string{"ca", "cert", "bundle"}) {
		t.Fatalf("did %v, %v", did, err)
	}
	if err := verifies(s.serving.cert, n.bundle(), now); err != nil {
		t.Errorf("the old certificate is not trusted: %v", err)
	}
	if err := verifies(n.serving.cert, n.bundle(), now); err != nil {
		t.Errorf("the new certificate is not trusted: %v", err)
	}
	// Data round-trips through the Secret.
	back := parseState(n.data(), nil)
	if !back.ca.cert.Equal(n.ca.cert) || !back.serving.cert.Equal(n.serving.cert) || len(back.trusted) != 2 {
		t.Errorf("the Secret's data does not read back")
	}
}

func TestCertTimesCheck(t *testing.T) {
	if err := DefaultCertTimes.Check(); err != nil {
		t.Error(err)
	}
	for _, tt := range []struct {
		times CertTimes
		want  string
	}{
		{CertTimes{CA: time.Hour, Cert: time.Second, Overlap: time.Second}, "--injector.cert-validity 1s: want a minute or more"},
		{CertTimes{CA: time.Hour, Cert: time.Hour, Overlap: time.Minute}, "--injector.ca-validity 1h0m0s: want at least 4 times"},
		{CertTimes{CA: 4 * time.Hour, Cert: time.Hour, Overlap: time.Hour}, "--injector.cert-overlap 1h0m0s: want a second or more, and at most a third"},
	} {
		if err := tt.times.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.times, err, tt.want)
		}
	}
}

func webhookConfig(bundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hotreload-injector"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "inject.hotreload.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: bundle},
		}},
	}
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	ti := newTestInjector(t, true, webhookConfig(nil))
	ti.Injector.opts.CertTimes = CertTimes{CA: 24 * time.Hour, Cert: time.Hour, Overlap: time.Minute}
	ti.certs.times = ti.Injector.opts.CertTimes
	secrets := ti.client.CoreV1().Secrets("hotreload-system")
	webhooks := ti.client.AdmissionregistrationV1().MutatingWebhookConfigurations()

	// Bootstrap: the webhook's bundle, then the Secret.
	at, err := ti.certs.reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, a := range ti.client.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "create" {
			order = append(order, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	if want := []string{"update mutatingwebhookconfigurations", "create secrets"}; !slices.Equal(order, want) {
		t.Errorf("writes %q, want %q", order, want)
	}
	sec, err := secrets.Get(ctx, "hotreload-injector-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := webhooks.Get(ctx, "hotreload-injector", metav1.GetOptions{})
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil || sec.Type != corev1.SecretTypeTLS {
		t.Fatalf("the Secret holds no key pair: %v (type %s)", err, sec.Type)
	}
	if err := verifies(pair.Leaf, wh.Webhooks[0].ClientConfig.CABundle, ti.now); err != nil {
		t.Errorf("the webhook does not trust the Secret's certificate: %v", err)
	}
	if want := ti.now.Add(40 * time.Minute); !at.Equal(want) {
		t.Errorf("next check at %s, want %s", at, want)
	}
	if v := testutilValue(ti, "cert"); v != 1 {
		t.Errorf("%v cert rotations", v)
	}

	// Nothing due: nothing written.
	ti.client.ClearActions()
	if _, err := ti.certs.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range ti.client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("%s %s with nothing due", a.GetVerb(), a.GetResource().Resource)
		}
	}

	// helm upgrade writes the configuration without its bundle: put back,
	// the Secret unchanged.
	wh.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := webhooks.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ti.certs.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	wh, _ = webhooks.Get(ctx, "hotreload-injector", metav1.GetOptions{})
	sec2, _ := secrets.Get(ctx, "hotreload-injector-tls", metav1.GetOptions{})
	if err := verifies(pair.Leaf, wh.Webhooks[0].ClientConfig.CABundle, ti.now); err != nil || sec2.ResourceVersion != sec.ResourceVersion {
		t.Errorf("bundle not restored (%v), or the Secret rewritten", err)
	}

	// kubectl annotate secret ... hotreload.dev/rotate=cert: a new
	// certificate, and the annotation goes.
	sec2.Annotations = map[string]string{annotateRotate: "cert"}
	if _, err := secrets.Update(ctx, sec2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ti.certs.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	sec3, _ := secrets.Get(ctx, "hotreload-injector-tls", metav1.GetOptions{})
	if _, ok := sec3.Annotations[annotateRotate]; ok || string(sec3.Data["tls.crt"]) == string(sec.Data["tls.crt"]) {
		t.Errorf("forced rotation: annotations %v, certificate changed %v", sec3.Annotations, string(sec3.Data["tls.crt"]) != string(sec.Data["tls.crt"]))
	}
}

func testutilValue(ti *testInjector, kind string) float64 {
	return testutil.ToFloat64(ti.m.rotations.WithLabelValues(kind))
}

func TestReconcileWithoutWebhookWritesNothing(t *testing.T) {
	ti := newTestInjector(t, true)
	if _, err := ti.certs.reconcile(context.Background()); !errors.Is(err, errNoWebhook) {
		t.Errorf("err %v", err)
	}
	if _, err := ti.client.CoreV1().Secrets("hotreload-system").Get(context.Background(), "hotreload-injector-tls", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret written without a webhook to trust it: %v", err)
	}
}

func TestServingCertKeepsTheLastGood(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	s, _, _ := rotate(certState{}, now, testDNS, DefaultCertTimes, "")
	var sc servingCert
	if sc.ready() {
		t.Error("ready without a certificate")
	}
	if _, err := sc.get(nil); err == nil {
		t.Error("a certificate before one was set")
	}
	if changed, err := sc.set(s.data()); !changed || err != nil {
		t.Fatalf("set: %v %v", changed, err)
	}
	if changed, _ := sc.set(s.data()); changed {
		t.Error("the same certificate counted as a change")
	}
	if _, err := sc.set(map[string][]byte{"tls.crt": []byte("garbage")}); err == nil {
		t.Error("garbage taken")
	}
	c, err := sc.get(nil)
	if err != nil || !c.Leaf.Equal(s.serving.cert) || sc.notAfter() != float64(s.serving.cert.NotAfter.Unix()) {
		t.Errorf("the last good certificate is not served: %v", err)
	}
}

// The whole path on every replica: the leader writes the certificates,
// the Secret's informer loads them, the TLS server serves them, and a
// forced rotation reaches the next handshake, trusted by the webhook's
// bundle all along.
func TestServesTheRotatedCertificate(t *testing.T) {
	ti := newTestInjector(t, true, webhookConfig(nil))
	ti.run(t, true)
	ctx := context.Background()
	var wg sync.WaitGroup
	defer wg.Wait()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ti.Handler(), TLSConfig: ti.TLSConfig(), ErrorLog: stdlog.New(io.Discard, "", 0)}
	wg.Go(func() { _ = srv.ServeTLS(ln, "", "") })
	defer srv.Close()

	webhooks := ti.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	handshake := func() (*x509.Certificate, error) {
		wh, err := webhooks.Get(ctx, "hotreload-injector", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(wh.Webhooks[0].ClientConfig.CABundle)
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: testDNS[0], Time: func() time.Time { return ti.now }})
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	var first *x509.Certificate
	if !poll.Until(10*time.Second, func() bool {
		first, err = handshake()
		return err == nil && ti.Ready()
	}) {
		t.Fatalf("no trusted handshake: %v", err)
	}
	secrets := ti.client.CoreV1().Secrets("hotreload-system")
	sec, _ := secrets.Get(ctx, "hotreload-injector-tls", metav1.GetOptions{})
	sec.Annotations = map[string]string{annotateRotate: "cert"}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var second *x509.Certificate
	if !poll.Until(10*time.Second, func() bool {
		second, err = handshake()
		return err == nil && !second.Equal(first)
	}) {
		t.Fatalf("the rotated certificate is not served: %v", err)
	}
}

func TestNativeFor(t *testing.T) {
	for v, want := range map[string]bool{"v1.33.13": true, "v1.34.0": true, "v2.0.0": true, "v1.32.9": false, "v1.29.0-eks-1": false, "v1.33.1+k3s1": true} {
		if got, err := nativeFor(v); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", v, got, err, want)
		}
	}
	if _, err := nativeFor("garbage"); err == nil {
		t.Error("garbage parsed")
	}
}
