package injector

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/hotreload/hotreload/controller"
)

// Where the certificates come from, the values of --injector.certs.
const (
	CertsSelf     = "self"     // the leader makes and rotates them
	CertsExternal = "external" // another writes the Secret and the CA bundle (cert-manager)
)

// The values of --injector.native-sidecars.
const (
	NativeAuto  = "auto"
	NativeTrue  = "true"
	NativeFalse = "false"
)

// nativeSince is the first Kubernetes version whose sidecar containers
// are GA, and on by default whatever the feature gates say.
var nativeSince = version.MustParseGeneric("1.33")

// Options configure an Injector.
type Options struct {
	// Sidecar is what the injector adds; its Native and ContentKeySecret
	// are decided per pod.
	Sidecar Sidecar
	// NativeSidecars is auto (native on an API server of 1.33 or later,
	// asked through ServerVersion), true or false.
	NativeSidecars string
	// ServerVersion returns the API server's gitVersion, such as
	// v1.33.13. Required with auto.
	ServerVersion func(context.Context) (string, error)

	// Namespace is the injector's own: where its Secret is, and one it
	// never injects into, with kube-system and ExcludeNamespaces.
	Namespace         string
	ExcludeNamespaces []string
	// MissedInterval is how often the leader reports missed injections;
	// default 10s.
	MissedInterval time.Duration

	// ContentKey is KeyCreate, KeyExisting or KeyOff; ContentKeySecret the
	// Secret's name in each namespace, default hotreload-content-key.
	ContentKey       string
	ContentKeySecret string

	// Certs is CertsSelf or CertsExternal. CertSecret is the Secret of the
	// serving certificate in Namespace; Webhook the
	// MutatingWebhookConfiguration whose caBundle the leader keeps (self
	// only); Service the Service the API server calls, which the
	// certificate names.
	Certs      string
	CertSecret string
	Webhook    string
	Service    string
	CertTimes  CertTimes

	Secrets  corev1client.SecretsGetter
	Events   corev1client.EventsGetter // nil: no Events
	Webhooks admissionregistrationv1client.MutatingWebhookConfigurationsGetter

	// Now is the clock of certificates and rate limits; default time.Now.
	Now func() time.Time
}

// Injector is the mutating admission webhook that adds the hotreload
// sidecar, with its certificates and the check of missed injections. It is
// a part of the controller (controller.Part): it reads the controller's
// pod informers, and its leader's work runs under the controller's Lease.
type Injector struct {
	logger  log.Logger
	opts    Options
	m       *metrics
	webhook *webhook
	serving *servingCert
	certs   *certManager // nil with external certificates
	missed  *missed
	native  atomic.Bool
	wake    chan struct{}

	broadcaster record.EventBroadcaster
	informers   []cache.SharedIndexInformer
}

var _ controller.Part = (*Injector)(nil)

// DNSNames are the names of the Service in namespace ns that the serving
// certificate holds: those the API server may dial.
func DNSNames(service, ns string) []string {
	return []string{service + "." + ns + ".svc", service + "." + ns + ".svc.cluster.local", service + "." + ns, service}
}

// New builds an Injector. Give it to the controller as a part
// (controller.Options.Parts), which runs its informers and, while this
// replica leads, Lead; Run runs the rest.
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Injector, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	logger = log.With(logger, "component", "injector")
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MissedInterval <= 0 {
		opts.MissedInterval = 10 * time.Second
	}
	if opts.ContentKey == "" {
		opts.ContentKey = KeyCreate
	}
	if opts.ContentKeySecret == "" {
		opts.ContentKeySecret = "hotreload-content-key"
	}
	if opts.CertTimes == (CertTimes{}) {
		opts.CertTimes = DefaultCertTimes
	}
	switch {
	case opts.Sidecar.Image == "":
		return nil, errors.New("injector: no sidecar image")
	case opts.Namespace == "" || opts.CertSecret == "" || opts.Service == "":
		return nil, errors.New("injector: Namespace, CertSecret and Service are required")
	case opts.Secrets == nil:
		return nil, errors.New("injector: Secrets is required")
	case opts.Certs == CertsSelf && (opts.Webhook == "" || opts.Webhooks == nil):
		return nil, errors.New("injector: certificates of its own need the webhook configuration's name and Webhooks")
	case opts.Certs != CertsSelf && opts.Certs != CertsExternal:
		return nil, fmt.Errorf("injector: certificates %q: want %s or %s", opts.Certs, CertsSelf, CertsExternal)
	case !slices.Contains([]string{NativeAuto, NativeTrue, NativeFalse}, opts.NativeSidecars):
		return nil, fmt.Errorf("injector: native sidecars %q: want auto, true or false", opts.NativeSidecars)
	case opts.NativeSidecars == NativeAuto && opts.ServerVersion == nil:
		return nil, errors.New("injector: native sidecars auto needs ServerVersion")
	case !slices.Contains([]string{KeyCreate, KeyExisting, KeyOff}, opts.ContentKey):
		return nil, fmt.Errorf("injector: content key %q: want create, existing or off", opts.ContentKey)
	}
	if err := opts.CertTimes.Check(); err != nil {
		return nil, err
	}
	excluded := append([]string{metav1.NamespaceSystem, opts.Namespace}, opts.ExcludeNamespaces...)
	i := &Injector{
		logger:  logger,
		opts:    opts,
		serving: &servingCert{},
		wake:    make(chan struct{}, 1),
	}
	i.native.Store(opts.NativeSidecars == NativeTrue)
	var events record.EventRecorder
	if opts.Events != nil {
		i.broadcaster = record.NewBroadcaster()
		scheme := runtime.NewScheme()
		if err := corev1.AddToScheme(scheme); err != nil {
			return nil, err
		}
		events = i.broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "hotreload-injector"})
	}
	i.missed = newMissed(logger, excluded, events, nil)
	i.m = newMetrics(reg, i.missed.byNamespace, i.serving.notAfter)
	i.missed.m = i.m
	warnings := newLimiter(time.Minute)
	i.webhook = &webhook{
		logger:   logger,
		opts:     opts.Sidecar,
		native:   i.native.Load,
		keys:     &contentKeys{secrets: opts.Secrets, mode: opts.ContentKey, name: opts.ContentKeySecret, now: opts.Now, known: map[string]time.Time{}},
		excluded: excluded,
		events:   events,
		m:        i.m,
		warnings: warnings,
		now:      opts.Now,
	}
	if opts.Certs == CertsSelf {
		i.certs = &certManager{
			logger:   logger,
			secrets:  opts.Secrets,
			webhooks: opts.Webhooks,
			ns:       opts.Namespace,
			name:     opts.CertSecret,
			webhook:  opts.Webhook,
			dnsNames: DNSNames(opts.Service, opts.Namespace),
			times:    opts.CertTimes,
			now:      opts.Now,
			m:        i.m,
			warnings: warnings,
		}
	}
	i.informers = append(i.informers, i.secretInformer())
	if i.certs != nil {
		i.informers = append(i.informers, i.webhookInformer())
	}
	return i, nil
}

// Attach watches the controller's pods of one scope for missed
// injections: the controller's informer keeps their hotreload.dev/
// annotations (controller.TrimPod).
func (i *Injector) Attach(s controller.Scope) error {
	if _, err := s.Pods.AddEventHandler(i.missed.handler()); err != nil {
		return fmt.Errorf("injector: pod informer: %w", err)
	}
	return nil
}

// Informers are the injector's own: its certificate Secret and, with
// certificates of its own, its webhook configuration. The controller runs
// them and waits for them to sync.
func (i *Injector) Informers() []cache.SharedIndexInformer { return i.informers }

// Handler serves the admission reviews.
func (i *Injector) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/inject", i.webhook)
	return mux
}

// TLSConfig is the webhook server's TLS: the current certificate at every
// handshake.
func (i *Injector) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: i.serving.get, MinVersion: tls.VersionTLS12}
}

// Ready reports whether this replica has a certificate to serve.
func (i *Injector) Ready() bool { return i.serving.ready() }

// Native reports whether the injector adds native sidecars now.
func (i *Injector) Native() bool { return i.native.Load() }

// Run records Events and follows the API server's version until ctx is
// done; the controller runs the injector's informers.
func (i *Injector) Run(ctx context.Context) error {
	if i.broadcaster != nil {
		i.broadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: i.opts.Events.Events("")})
		defer i.broadcaster.Shutdown()
	}
	if i.opts.NativeSidecars == NativeAuto {
		i.watchVersion(ctx)
		return nil
	}
	<-ctx.Done()
	return nil
}

// Lead makes and rotates the certificates (with certificates of its own)
// and reports missed injections, until ctx is done: the leader's part.
func (i *Injector) Lead(ctx context.Context) {
	var wg sync.WaitGroup
	if i.certs != nil {
		wg.Go(func() { i.certs.run(ctx, i.wake) })
	}
	wg.Go(func() { i.missed.run(ctx, i.opts.MissedInterval) })
	wg.Wait()
}

func (i *Injector) poke() {
	select {
	case i.wake <- struct{}{}:
	default:
	}
}

func (i *Injector) secretInformer() cache.SharedIndexInformer {
	secrets := i.opts.Secrets.Secrets(i.opts.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", i.opts.CertSecret).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return secrets.Watch(ctx, o)
		},
	}
	// A client that cannot send initial events (a fake) says so; the
	// reflector then lists.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, i.opts.Secrets), &corev1.Secret{}, 0, cache.Indexers{})
	load := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != i.opts.CertSecret {
			return
		}
		i.poke()
		changed, err := i.serving.set(s.Data)
		switch {
		case err != nil:
			if i.webhook.warnings.allow("serving certificate", i.opts.Now()) {
				level.Warn(i.logger).Log("msg", "the certificate Secret holds no usable certificate, serving the last good one", "secret", i.opts.Namespace+"/"+s.Name, "err", err, "serving", i.serving.ready())
			}
		case changed:
			c := i.serving.cur.Load().Leaf
			level.Info(i.logger).Log("msg", "serving certificate loaded", "secret", i.opts.Namespace+"/"+s.Name, "expires", c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
		DeleteFunc: func(any) {
			i.poke()
			level.Warn(i.logger).Log("msg", "the certificate Secret was deleted, serving the last good certificate until a new one is written", "secret", i.opts.Namespace+"/"+i.opts.CertSecret)
		},
	})
	return inf
}

func (i *Injector) webhookInformer() cache.SharedIndexInformer {
	whs := i.opts.Webhooks.MutatingWebhookConfigurations()
	sel := fields.OneTermEqualSelector("metadata.name", i.opts.Webhook).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return whs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return whs.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, i.opts.Webhooks), &admissionregistrationv1.MutatingWebhookConfiguration{}, 0, cache.Indexers{})
	poke := func(any) { i.poke() }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, obj any) { i.poke() }, DeleteFunc: poke})
	return inf
}

// watchVersion asks the API server for its version at start and every 10
// minutes (an upgrade), and adds native sidecars from 1.33 on. Until it
// knows, it adds classic ones, which every version runs.
func (i *Injector) watchVersion(ctx context.Context) {
	known := ""
	wait := time.Second
	for {
		v, err := i.opts.ServerVersion(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if i.webhook.warnings.allow("version", i.opts.Now()) {
				level.Warn(i.logger).Log("msg", "API server version unknown, adding classic sidecars until it is known", "err", err, "retry_in", wait)
			}
			wait = min(2*wait, time.Minute)
		case err == nil:
			native, perr := nativeFor(v)
			if perr != nil {
				level.Warn(i.logger).Log("msg", "API server version does not parse, adding classic sidecars; set --injector.native-sidecars", "version", v, "err", perr)
			}
			i.native.Store(native)
			if v != known {
				level.Info(i.logger).Log("msg", "API server version", "version", v, "native_sidecars", native)
				known = v
			}
			wait = 10 * time.Minute
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// nativeFor reports whether an API server of version v runs native
// sidecars whatever its feature gates say.
func nativeFor(v string) (bool, error) {
	parsed, err := version.ParseGeneric(v)
	if err != nil {
		return false, err
	}
	return parsed.AtLeast(nativeSince), nil
}
