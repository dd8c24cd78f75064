package injector

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// certManager keeps the injector's certificates: the leader makes and
// rotates them (rotate), writes the CA bundle into the webhook
// configuration and the certificates into the Secret, in that order, so
// that the API server trusts a certificate before any replica serves it.
type certManager struct {
	logger   log.Logger
	secrets  corev1client.SecretsGetter
	webhooks admissionregistrationv1client.MutatingWebhookConfigurationsGetter
	ns, name string // the Secret
	webhook  string // the MutatingWebhookConfiguration
	dnsNames []string
	times    CertTimes
	now      func() time.Time
	m        *metrics
	warnings *limiter
}

// errNoWebhook is reconcile's error while the webhook configuration does
// not exist: nothing is written until it does.
var errNoWebhook = errors.New("no webhook configuration")

// reconcile brings the certificates up to date once, and returns when it
// must run again.
func (c *certManager) reconcile(ctx context.Context) (time.Time, error) {
	now := c.now()
	sec, err := c.secrets.Secrets(c.ns).Get(ctx, c.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		sec = nil
	case err != nil:
		return time.Time{}, fmt.Errorf("get secret %s/%s: %w", c.ns, c.name, err)
	}
	wh, err := c.webhooks.MutatingWebhookConfigurations().Get(ctx, c.webhook, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return time.Time{}, fmt.Errorf("%w: MutatingWebhookConfiguration %s does not exist (the chart or examples/injector installs it)", errNoWebhook, c.webhook)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("get mutatingwebhookconfiguration %s: %w", c.webhook, err)
	}
	var data map[string][]byte
	var force string
	if sec != nil {
		data, force = sec.Data, sec.Annotations[annotateRotate]
	}
	var current []byte
	for _, w := range wh.Webhooks {
		current = append(current, w.ClientConfig.CABundle...)
	}
	state, did, err := rotate(parseState(data, current), now, c.dnsNames, c.times, force)
	if err != nil {
		return time.Time{}, err
	}
	bundle := state.bundle()

	// The webhook's bundle first: it trusts the CA of every certificate
	// that a replica serves now or will serve once the Secret is written.
	stale := false
	for _, w := range wh.Webhooks {
		stale = stale || !bytes.Equal(w.ClientConfig.CABundle, bundle)
	}
	if stale {
		for i := range wh.Webhooks {
			wh.Webhooks[i].ClientConfig.CABundle = bundle
		}
		if _, err := c.webhooks.MutatingWebhookConfigurations().Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
			return time.Time{}, fmt.Errorf("update mutatingwebhookconfiguration %s: %w", c.webhook, err)
		}
		level.Info(c.logger).Log("msg", "CA bundle written into the webhook configuration", "webhook", c.webhook, "cas", len(state.trusted))
	}

	want := state.data()
	switch {
	case sec == nil:
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "hotreload-controller"}},
			Type:       corev1.SecretTypeTLS,
			Data:       want,
		}
		if _, err := c.secrets.Secrets(c.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return time.Time{}, fmt.Errorf("create secret %s/%s: %w", c.ns, c.name, err)
		}
	case force != "" || !maps.EqualFunc(sec.Data, want, bytes.Equal):
		sec.Data = want
		delete(sec.Annotations, annotateRotate)
		if _, err := c.secrets.Secrets(c.ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return time.Time{}, fmt.Errorf("update secret %s/%s: %w", c.ns, c.name, err)
		}
	}
	for _, d := range did {
		switch d {
		case "ca", "cert":
			c.m.rotations.WithLabelValues(d).Inc()
		}
	}
	if len(did) > 0 {
		level.Info(c.logger).Log("msg", "certificates rotated", "did", fmt.Sprint(did), "forced", force,
			"cert_expires", state.serving.cert.NotAfter.UTC().Format(time.RFC3339), "ca_expires", state.ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return state.nextCheck(c.times), nil
}

// run reconciles until ctx is done: when a certificate is due, when the
// Secret or the webhook configuration changes (wake), and after a failure
// with backoff.
func (c *certManager) run(ctx context.Context, wake <-chan struct{}) {
	backoff := time.Second
	for {
		at, err := c.reconcile(ctx)
		wait := time.Until(at)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if c.warnings.allow("certificates", c.now()) {
				level.Warn(c.logger).Log("msg", "certificates not written, retrying with backoff", "err", err, "retry_in", backoff)
			}
			wait = backoff
			backoff = min(2*backoff, time.Minute)
		} else {
			backoff = time.Second
		}
		wait = min(max(wait, time.Second), 10*time.Minute)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-wake:
			t.Stop()
		}
	}
}

// servingCert is the certificate every replica serves: the Secret's,
// replaced as the Secret changes; the last good one stays while the Secret
// is missing or holds one that does not parse.
type servingCert struct {
	cur atomic.Pointer[tls.Certificate]
}

// set serves the certificate of data, if it parses.
func (s *servingCert) set(data map[string][]byte) (changed bool, err error) {
	pair, err := tls.X509KeyPair(data[secretCert], data[secretKey])
	if err != nil {
		return false, err
	}
	if old := s.cur.Load(); old != nil && slices.EqualFunc(old.Certificate, pair.Certificate, bytes.Equal) {
		return false, nil
	}
	s.cur.Store(&pair)
	return true, nil
}

func (s *servingCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cur.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no certificate yet")
}

func (s *servingCert) ready() bool { return s.cur.Load() != nil }

func (s *servingCert) notAfter() float64 {
	if c := s.cur.Load(); c != nil && c.Leaf != nil {
		return float64(c.Leaf.NotAfter.Unix())
	}
	return 0
}
