package injector

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// How the content key Secret of a namespace comes to exist, the values of
// --injector.content-key.
const (
	// KeyCreate: the injector creates it in a namespace when it first
	// injects there (32 random bytes), and mounts it.
	KeyCreate = "create"
	// KeyExisting: the injector mounts it where it exists; where it does
	// not, the sidecar runs without a key.
	KeyExisting = "existing"
	// KeyOff: no key.
	KeyOff = "off"
)

// keyKnown is how long a namespace's Secret, once seen, is taken to exist
// without asking again. One deleted meanwhile leaves the pods admitted in
// that time waiting for their volume until the next admission in the
// namespace creates it again.
const keyKnown = time.Minute

// contentKeys makes sure the content key Secret exists in a namespace
// before a pod there mounts it (docs/injector.md, "The content key").
type contentKeys struct {
	secrets corev1client.SecretsGetter
	mode    string
	name    string
	now     func() time.Time

	mu    sync.Mutex
	known map[string]time.Time // namespace: when the Secret was seen
}

// secret returns the name of the Secret to mount in ns, or "" for none.
// On a dry run nothing is created: the answer is what a real request would
// get.
func (k *contentKeys) secret(ctx context.Context, ns string, dryRun bool) (string, error) {
	if k == nil || k.mode == KeyOff {
		return "", nil
	}
	now := k.now()
	k.mu.Lock()
	seen, ok := k.known[ns]
	k.mu.Unlock()
	if ok && now.Sub(seen) < keyKnown {
		return k.name, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := k.secrets.Secrets(ns).Get(ctx, k.name, metav1.GetOptions{})
	switch {
	case err == nil:
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("get secret %s/%s: %w", ns, k.name, err)
	case k.mode == KeyExisting:
		return "", nil
	case dryRun:
		return k.name, nil
	default:
		if err := k.create(ctx, ns); err != nil {
			return "", err
		}
	}
	k.mu.Lock()
	k.known[ns] = now
	k.mu.Unlock()
	return k.name, nil
}

func (k *contentKeys) create(ctx context.Context, ns string) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      k.name,
			Namespace: ns,
			Labels:    map[string]string{"app.kubernetes.io/managed-by": "hotreload-controller", "app.kubernetes.io/component": "content-key"},
			Annotations: map[string]string{
				"hotreload.dev/about": "The key of the content values that hotreload sidecars in this namespace show (docs/security.md). Created by hotreload-controller; delete it to make a new one, which each sidecar reads when it restarts.",
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{KeySecretKey: []byte(base64.StdEncoding.EncodeToString(b))},
	}
	_, err := k.secrets.Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create secret %s/%s: %w", ns, k.name, err)
	}
	return nil
}
