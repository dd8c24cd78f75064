package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/internal/revision"
)

// Options configure a Controller.
type Options struct {
	// Core reads ConfigMaps and Secrets (get), writes their stable copies
	// (create, update, delete), patches pods and records Events.
	Core corev1client.CoreV1Interface
	// Dynamic reads ConfigRollouts and writes their status; nil runs
	// without ConfigRollouts (restart mode only).
	Dynamic dynamic.Interface
	// Workers sync sources in parallel; default 4.
	Workers int
	// ScrapeTimeout bounds one GET of a sidecar's /-/content; default 2s.
	ScrapeTimeout time.Duration
	// QueryTimeout bounds one analysis query; default 10s.
	QueryTimeout time.Duration
	// HTTPClient scrapes sidecars and queries Prometheus; default a
	// client of its own.
	HTTPClient *http.Client
	// ContentURL, for tests only, replaces the address of every sidecar's
	// /-/content: {namespace} and {pod} are filled in. See contentURL.
	ContentURL string
	// Report and Query replace the HTTP scrape and the Prometheus query,
	// for unit tests.
	Report func(ctx context.Context, p *corev1.Pod, ref string) (*Report, error)
	Query  func(ctx context.Context, q *Query) (float64, error)
	// Now is the clock of the decisions; default time.Now.
	Now func() time.Time
}

// Controller rolls the edits of ConfigMaps and Secrets out to the pods
// that opted in, as ConfigRollouts say, and staggers the restarts of pods
// in restart mode. It is a controller.Part: it shares the nudge
// controller's informers and Lease, and acts only while leading.
type Controller struct {
	logger log.Logger
	opts   Options
	client *Client
	m      *metrics

	scopes   map[string]*scope
	informer []cache.SharedIndexInformer

	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[controller.ObjectKey] // nil while not leading
	rec   record.EventRecorder
	// What this replica wrote last, used until the informers catch up.
	wroteCR   map[controller.ObjectKey]written[*ConfigRollout]
	wrotePod  map[types.UID]written[*corev1.Pod]
	sums      map[controller.ObjectKey]sumEntry
	implicit  map[controller.ObjectKey]State // the state of restart policies
	baselines map[types.UID]baseline
	rejected  map[types.UID]string // the last PodRejected reason recorded, per pod
	lastQuery map[controller.ObjectKey]queryRun
	exported  map[controller.ObjectKey]string // the rollout label of the metrics
}

type written[T any] struct {
	from string // the resourceVersion it was written from
	obj  T
}

type sumEntry struct {
	rv       string
	uid      types.UID
	sum      [32]byte
	size     int
	has      bool
	reserved Reserved
	err      error // the reserved key does not parse
	ours     bool  // labelled as a stable copy
}

type baseline struct {
	rev      string
	restarts int
}

type queryRun struct {
	at     time.Time
	result AnalysisResult
}

type scope struct {
	controller.Scope
	rollouts cache.SharedIndexInformer // nil without ConfigRollouts
}

const (
	sourcesIndex = "rollout-sources"
	rolloutIndex = "rollout-source"
)

// New builds a Controller; pass it to controller.Options.Parts.
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Controller, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if opts.Core == nil {
		return nil, errors.New("rollout: Core is required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 2 * time.Second
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = 10 * time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Controller{
		logger:    log.With(logger, "component", "rollout"),
		opts:      opts,
		m:         newMetrics(reg),
		scopes:    map[string]*scope{},
		wroteCR:   map[controller.ObjectKey]written[*ConfigRollout]{},
		wrotePod:  map[types.UID]written[*corev1.Pod]{},
		sums:      map[controller.ObjectKey]sumEntry{},
		implicit:  map[controller.ObjectKey]State{},
		baselines: map[types.UID]baseline{},
		rejected:  map[types.UID]string{},
		lastQuery: map[controller.ObjectKey]queryRun{},
		exported:  map[controller.ObjectKey]string{},
	}
	if opts.Dynamic != nil {
		c.client = NewClient(opts.Dynamic)
	}
	if opts.Report == nil {
		c.opts.Report = c.scrape
	}
	if opts.Query == nil {
		c.opts.Query = func(ctx context.Context, q *Query) (float64, error) { return query(ctx, c.opts.HTTPClient, q) }
	}
	return c, nil
}

var _ controller.Part = (*Controller)(nil)

// Attach adds the rollout's index and handlers to the shared informers of
// one scope, and makes the scope's ConfigRollout informer.
func (c *Controller) Attach(s controller.Scope) error {
	sc := &scope{Scope: s}
	if err := s.Pods.AddIndexers(cache.Indexers{sourcesIndex: indexSources}); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	if _, err := s.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(obj) },
		UpdateFunc: func(_, obj any) { c.podChanged(obj) },
		DeleteFunc: func(obj any) {
			c.podChanged(obj)
			c.forget(obj)
		},
	}); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	for kind, inf := range map[controller.Kind]cache.SharedIndexInformer{controller.ConfigMap: s.ConfigMaps, controller.Secret: s.Secrets} {
		if inf == nil {
			continue
		}
		h := func(obj any) { c.objectChanged(kind, obj) }
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: h, UpdateFunc: func(_, obj any) { h(obj) }, DeleteFunc: h,
		}); err != nil {
			return fmt.Errorf("%s informer: %w", kind, err)
		}
	}
	if c.client != nil {
		ns := s.Namespace
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return c.client.List(ctx, ns, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return c.client.Watch(ctx, ns, opts)
			},
		}
		inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, c.opts.Dynamic), &unstructured.Unstructured{}, 0,
			cache.Indexers{rolloutIndex: indexRollout})
		if err := inf.SetTransform(func(obj any) (any, error) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				r, err := FromUnstructured(u)
				if err != nil {
					level.Warn(c.logger).Log("msg", "a ConfigRollout does not decode, ignoring it", "err", err)
					return &ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}}, nil
				}
				r.ManagedFields = nil
				return r, nil
			}
			return obj, nil
		}); err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { c.rolloutChanged(obj) },
			UpdateFunc: func(old, obj any) {
				c.rolloutChanged(old)
				c.rolloutChanged(obj)
			},
			DeleteFunc: func(obj any) { c.rolloutChanged(obj) },
		}); err != nil {
			return err
		}
		sc.rollouts = inf
		c.informer = append(c.informer, inf)
	}
	c.scopes[s.Namespace] = sc
	return nil
}

// Informers are the ConfigRollout informers, one per scope.
func (c *Controller) Informers() []cache.SharedIndexInformer { return c.informer }

func (c *Controller) scope(ns string) *scope {
	if s, ok := c.scopes[metav1.NamespaceAll]; ok {
		return s
	}
	return c.scopes[ns]
}

func indexSources(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, k := range Sources(p) {
		out = append(out, k.String())
	}
	return out, nil
}

func indexRollout(obj any) ([]string, error) {
	r, ok := obj.(*ConfigRollout)
	if !ok || r.Spec.Source.Name == "" {
		return nil, nil
	}
	return []string{sourceKey(r).String()}, nil
}

func sourceKey(r *ConfigRollout) controller.ObjectKey {
	k := controller.ConfigMap
	if r.Spec.Source.Kind == "Secret" {
		k = controller.Secret
	}
	return controller.ObjectKey{Kind: k, Namespace: r.Namespace, Name: r.Spec.Source.Name}
}

func (c *Controller) add(k controller.ObjectKey) {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q != nil {
		q.Add(k)
	}
}

func (c *Controller) podChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	for _, k := range Sources(p) {
		c.add(k)
	}
}

// forget drops what is kept about a deleted pod.
func (c *Controller) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		c.mu.Lock()
		delete(c.baselines, p.UID)
		delete(c.rejected, p.UID)
		delete(c.wrotePod, p.UID)
		c.mu.Unlock()
	}
}

func (c *Controller) rolloutChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if r, ok := obj.(*ConfigRollout); ok && r.Spec.Source.Name != "" {
		c.add(sourceKey(r))
	}
}

// objectChanged queues the source of a stable copy, and a source that a
// rollout or a pod in restart mode uses.
func (c *Controller) objectChanged(kind controller.Kind, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	k := controller.ObjectKey{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
	if name, ok := strings.CutSuffix(k.Name, StableSuffix); ok {
		k.Name = name
		c.add(k)
		return
	}
	s := c.scope(k.Namespace)
	if s == nil {
		return
	}
	if pods, _ := s.Pods.GetIndexer().IndexKeys(sourcesIndex, k.String()); len(pods) > 0 {
		c.add(k)
		return
	}
	if s.rollouts != nil {
		if rs, _ := s.rollouts.GetIndexer().IndexKeys(rolloutIndex, k.String()); len(rs) > 0 {
			c.add(k)
		}
	}
}

// Lead syncs every source until ctx is done: first all, then on every
// change and while rollouts run.
func (c *Controller) Lead(ctx context.Context) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[controller.ObjectKey](50*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[controller.ObjectKey]{Name: "hotreload-rollouts"})
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: c.opts.Core.Events("")})
	c.mu.Lock()
	c.queue = q
	c.rec = b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "hotreload-controller"})
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.queue = nil
		c.implicit = map[controller.ObjectKey]State{}
		c.mu.Unlock()
		q.ShutDown()
		b.Shutdown()
		c.m.reset()
	}()
	n := c.queueAll()
	level.Info(c.logger).Log("msg", "leading rollouts", "sources", n)

	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() {
			for c.processNext(ctx, q) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// queueAll queues every source that a ConfigRollout names, that a pod in
// restart mode uses, or that has a stable copy.
func (c *Controller) queueAll() int {
	seen := map[controller.ObjectKey]bool{}
	for _, s := range c.scopes {
		if s.rollouts != nil {
			for _, obj := range s.rollouts.GetStore().List() {
				if r, ok := obj.(*ConfigRollout); ok && r.Spec.Source.Name != "" {
					seen[sourceKey(r)] = true
				}
			}
		}
		for _, obj := range s.Pods.GetStore().List() {
			if p := obj.(*corev1.Pod); restartMode(p) {
				for _, k := range Sources(p) {
					seen[k] = true
				}
			}
		}
		for kind, inf := range map[controller.Kind]cache.SharedIndexInformer{controller.ConfigMap: s.ConfigMaps, controller.Secret: s.Secrets} {
			if inf == nil {
				continue
			}
			for _, key := range inf.GetStore().ListKeys() {
				ns, name, _ := strings.Cut(key, "/")
				if src, ok := strings.CutSuffix(name, StableSuffix); ok {
					seen[controller.ObjectKey{Kind: kind, Namespace: ns, Name: src}] = true
				}
			}
		}
	}
	for k := range seen {
		c.add(k)
	}
	return len(seen)
}

func (c *Controller) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[controller.ObjectKey]) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	after, err := c.sync(ctx, key)
	switch {
	case ctx.Err() != nil:
		q.Forget(key)
	case controller.Lost(err):
		level.Debug(c.logger).Log("msg", "another writer was first, deciding again", "source", key, "err", err)
		q.AddRateLimited(key)
	case err != nil:
		level.Warn(c.logger).Log("msg", "sync failed, retrying with backoff", "source", key, "err", err)
		q.AddRateLimited(key)
	default:
		q.Forget(key)
		if after > 0 {
			q.AddAfter(key, after)
		}
	}
	return true
}

func (c *Controller) recorder() record.EventRecorder {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rec
}

// event records an Event on the rollout (if any) and on the source.
func (c *Controller) event(cr *ConfigRollout, key controller.ObjectKey, src types.UID, e Event) {
	rec := c.recorder()
	if rec == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if e.Warning {
		typ = corev1.EventTypeWarning
	}
	if cr != nil {
		rec.Event(&corev1.ObjectReference{APIVersion: Group + "/" + Version, Kind: Kind, Namespace: cr.Namespace, Name: cr.Name, UID: cr.UID}, typ, e.Reason, e.Message)
	}
	if src != "" {
		rec.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: kindName(key.Kind), Namespace: key.Namespace, Name: key.Name, UID: src}, typ, e.Reason, e.Message)
	}
}

// rolloutOf is the ConfigRollout of a source: the oldest of those that
// name it; the others are reported as invalid.
func (c *Controller) rolloutOf(s *scope, key controller.ObjectKey) (*ConfigRollout, []*ConfigRollout) {
	if s.rollouts == nil {
		return nil, nil
	}
	objs, _ := s.rollouts.GetIndexer().ByIndex(rolloutIndex, key.String())
	var rs []*ConfigRollout
	for _, o := range objs {
		if r, ok := o.(*ConfigRollout); ok {
			rs = append(rs, c.latestCR(key, r).DeepCopy())
		}
	}
	if len(rs) == 0 {
		return nil, nil
	}
	slices.SortFunc(rs, func(a, b *ConfigRollout) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return rs[0], rs[1:]
}

// latestCR is r, or what this replica wrote from r's version if the
// informer has not brought that yet.
func (c *Controller) latestCR(key controller.ObjectKey, r *ConfigRollout) *ConfigRollout {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.wroteCR[key]; ok && w.obj.UID == r.UID && w.from == r.ResourceVersion {
		return w.obj
	}
	return r
}

func (c *Controller) latestPod(p *corev1.Pod) *corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.wrotePod[p.UID]; ok {
		if w.from == p.ResourceVersion {
			return w.obj
		}
		if w.obj.ResourceVersion == p.ResourceVersion || !controller.Newer(w.obj.ResourceVersion, p.ResourceVersion) {
			delete(c.wrotePod, p.UID)
		}
	}
	return p
}

// metaRV is the resourceVersion of an object in the metadata cache.
func (s *scope) metaRV(k controller.ObjectKey) (string, types.UID, bool) {
	inf := s.ConfigMaps
	if k.Kind == controller.Secret {
		inf = s.Secrets
	}
	if inf == nil {
		return "", "", false
	}
	obj, ok, _ := inf.GetStore().GetByKey(k.Namespace + "/" + k.Name)
	if !ok {
		return "", "", false
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", "", false
	}
	return m.GetResourceVersion(), m.GetUID(), true
}

// sumOf returns what the controller keeps of an object: its sum, size and
// reserved key, read again only when its resourceVersion moves.
func (c *Controller) sumOf(ctx context.Context, k controller.ObjectKey, rv string) (sumEntry, error) {
	c.mu.Lock()
	e, ok := c.sums[k]
	c.mu.Unlock()
	if ok && e.rv == rv && rv != "" {
		return e, nil
	}
	ct, err := c.read(ctx, k)
	if err != nil {
		return sumEntry{}, err
	}
	e = entryOf(ct)
	c.mu.Lock()
	c.sums[k] = e
	c.mu.Unlock()
	return e, nil
}

func entryOf(ct *content) sumEntry {
	e := sumEntry{rv: ct.rv, uid: ct.uid, sum: ct.sum(), has: ct.has, ours: ct.labels[LabelStableOf] != ""}
	for k, v := range ct.data {
		e.size += len(k) + len(v)
	}
	for k, v := range ct.binary {
		e.size += len(k) + len(v)
	}
	if ct.has {
		e.reserved, e.err = ParseReserved(ct.reserved)
	}
	return e
}

// maxObject is the API server's limit on a ConfigMap's or Secret's data;
// a stable copy needs room for the reserved key besides the content.
const maxObject = 1 << 20

// sync decides one source and writes what the decision says. It returns
// when to decide again (0: on the next change).
func (c *Controller) sync(ctx context.Context, key controller.ObjectKey) (time.Duration, error) {
	s := c.scope(key.Namespace)
	if s == nil {
		return 0, nil
	}
	cr, extra := c.rolloutOf(s, key)
	for _, o := range extra {
		c.failExtra(ctx, o, cr)
	}
	objs, _ := s.Pods.GetIndexer().ByIndex(sourcesIndex, key.String())
	pods := make([]*corev1.Pod, 0, len(objs))
	owners := map[types.UID]int{}
	for _, o := range objs {
		p := c.latestPod(o.(*corev1.Pod))
		pods = append(pods, p)
		if p.DeletionTimestamp == nil {
			owners[ownerUID(p)]++
		}
	}
	var ms []member
	restart := false
	for _, p := range pods {
		if m, ok := classify(p, key, owners); ok {
			ms = append(ms, m)
			restart = restart || m.restart && m.managed
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
	if cr == nil && !restart {
		return 0, c.cleanup(ctx, s, key)
	}
	name := "restart:" + Ref(key)
	if cr != nil {
		name = cr.Name
	}
	logger := log.With(c.logger, "source", Ref(key), "namespace", key.Namespace, "rollout", name)

	// The policy.
	var (
		pol    Policy
		polErr error
	)
	if cr != nil {
		pol, polErr = Parse(cr.Spec)
	} else {
		batch, bad := restartBatch(ms, len(ms))
		if bad != "" {
			level.Warn(logger).Log("msg", "bad annotation", "err", bad)
		}
		pol = RestartPolicy(batch)
	}
	if polErr == nil && key.Kind == controller.Secret && s.Secrets == nil {
		polErr = errors.New("the controller runs with --no-watch-secrets: it does not roll Secrets out")
	}
	var srcUID types.UID
	srcRV, uid, ok := s.metaRV(key)
	if polErr == nil && !ok {
		polErr = fmt.Errorf("%s %s does not exist", kindName(key.Kind), key.Name)
	}
	var src sumEntry
	if polErr == nil {
		var err error
		src, err = c.sumOf(ctx, key, srcRV)
		switch {
		case errors.Is(err, errNotFound):
			polErr = fmt.Errorf("%s %s does not exist", kindName(key.Kind), key.Name)
		case apierrors.IsForbidden(err):
			polErr = fmt.Errorf("%w (grant get on %ss in namespace %s: see docs/rollout.md, RBAC)", err, strings.ToLower(kindName(key.Kind)), key.Namespace)
		case err != nil:
			return 0, err
		case src.has:
			polErr = fmt.Errorf("%s %s holds the reserved key %s, which is the controller's", kindName(key.Kind), key.Name, revision.ReservedKey)
		case src.size+2048 > maxObject:
			polErr = fmt.Errorf("%s %s holds %d bytes: too big to copy with the reserved key into its stable copy (%d at most)", kindName(key.Kind), key.Name, src.size, maxObject-2048)
		default:
			srcUID = uid
		}
	}
	for _, m := range ms {
		if m.Refused != "" {
			c.podRejected(cr, key, srcUID, m, logger)
		}
	}

	// The stable copy.
	sk := StableKey(key)
	var st sumEntry
	if polErr == nil {
		stRV, _, exists := s.metaRV(sk)
		if !exists {
			// Created by this replica, and not in the informer's cache
			// yet: read it (an empty version is never a cache hit).
			c.mu.Lock()
			_, exists = c.sums[sk]
			c.mu.Unlock()
		}
		var err error
		if exists {
			st, err = c.sumOf(ctx, sk, stRV)
		}
		switch {
		case !exists || errors.Is(err, errNotFound):
			return c.createStable(ctx, key, logger)
		case apierrors.IsForbidden(err):
			polErr = fmt.Errorf("cannot read the stable copy: %w", err)
		case err != nil:
			return 0, err
		case !st.has || !st.ours:
			polErr = fmt.Errorf("%s %s exists and is not a stable copy (no %s label and reserved key): rename or delete it", kindName(key.Kind), sk.Name, LabelStableOf)
		case st.err != nil:
			polErr = fmt.Errorf("the stable copy %s: %w: delete it to start over", sk.Name, st.err)
		case st.reserved.Source != Ref(key):
			polErr = fmt.Errorf("the stable copy %s names %s, not %s: delete it to start over", sk.Name, st.reserved.Source, Ref(key))
		}
	}

	state := c.stateOf(cr, key)
	in := Input{Policy: pol, PolicyErr: polErr, State: state, Now: c.opts.Now(), SourceRV: src.rv, SourceSum: src.sum, Stable: st.reserved}
	if cr != nil {
		if a := cr.Annotations[AnnotationAction]; a != "" {
			in.Action = a
			if a != ActionPromote && a != ActionAbort {
				in.Action = ""
				c.event(cr, key, "", Event{Warning: true, Reason: ReasonInvalid, Message: fmt.Sprintf("%s=%q: want promote or abort; removed", AnnotationAction, a)})
				if err := c.client.RemoveAction(ctx, cr); err != nil {
					return 0, err
				}
			} else if cr.Status.LastAction == a+" "+cr.Status.Revision && cr.Status.Phase != PhaseProgressing && cr.Status.Phase != PhasePaused {
				in.Action = "" // handled; the annotation's removal did not land
			}
		}
	}
	if polErr != nil {
		in.Stable = Reserved{Rollout: revision.Rollout{Stable: revision.Pin{Revision: state.StableRevision}}}
		out := Decide(in)
		return 0, c.writeState(ctx, cr, key, in, out, srcUID, logger)
	}
	c.observe(ctx, key, ms, st.reserved, pol, &in)
	for _, m := range ms {
		in.Members = append(in.Members, m.Member)
	}
	out := Decide(in)
	return out.Requeue, c.apply(ctx, cr, key, in, out, ms, st, srcUID, logger)
}

// observe scrapes the pods on the candidate, tracks their restarts and
// runs the analysis query when it is due.
func (c *Controller) observe(ctx context.Context, key controller.ObjectKey, ms []member, r Reserved, pol Policy, in *Input) {
	cand := r.Candidate
	ref := Ref(key)
	if cand != nil {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for i := range ms {
			m := &ms[i]
			if m.Want != cand.Revision || !m.Running || m.Refused != "" {
				continue
			}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				sctx, cancel := context.WithTimeout(ctx, c.opts.ScrapeTimeout)
				defer cancel()
				rep, err := c.opts.Report(sctx, m.pod, ref)
				if err != nil {
					m.ReportErr = err.Error()
					c.m.scrapes.WithLabelValues("failed").Inc()
					return
				}
				c.m.scrapes.WithLabelValues("ok").Inc()
				m.Report = rep
			})
		}
		wg.Wait()
		c.mu.Lock()
		for i := range ms {
			m := &ms[i]
			if m.Want != cand.Revision {
				continue
			}
			b, ok := c.baselines[m.pod.UID]
			// A pod in restart mode restarts to apply the revision: count
			// its restarts from when it is Ready again after reporting it
			// applied (the kubelet's status has the restart by then).
			applied := m.Report != nil && m.Report.Running == cand.Revision && m.Report.Result == ResultApplied
			if !ok || b.rev != cand.Revision {
				if m.restart && !(applied && m.Ready) {
					m.Settling = applied
					continue
				}
				b = baseline{rev: cand.Revision, restarts: m.restarts}
				c.baselines[m.pod.UID] = b
			}
			m.Restarted = m.restarts > b.restarts
		}
		c.mu.Unlock()
	}
	q := pol.Analysis
	if q == nil {
		return
	}
	running := cand != nil && in.SourceSum == cand.Sum()
	fresh := in.SourceSum != r.Stable.Sum() && !running && (r.Aborted == nil || in.SourceSum != r.Aborted.Sum())
	if !running && !fresh {
		return
	}
	c.mu.Lock()
	last, ok := c.lastQuery[key]
	c.mu.Unlock()
	if ok && !fresh && in.Now.Sub(last.at) < q.Interval {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, c.opts.QueryTimeout)
	defer cancel()
	v, err := c.opts.Query(qctx, q)
	res := AnalysisResult{Value: v, Err: err}
	if err != nil && qctx.Err() != nil && ctx.Err() == nil {
		res.Err = fmt.Errorf("no answer within %s: %w", c.opts.QueryTimeout, err)
	}
	c.mu.Lock()
	c.lastQuery[key] = queryRun{at: in.Now, result: res}
	c.mu.Unlock()
	in.Analysis = &res
}

// stateOf is the state of key's rollout: the ConfigRollout's status, or
// the restart policy's, kept in memory (a new leader rebuilds it from the
// stable copy and the pods).
func (c *Controller) stateOf(cr *ConfigRollout, key controller.ObjectKey) State {
	if cr == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.implicit[key]
	}
	s := cr.Status
	t := func(m *metav1.Time) time.Time {
		if m == nil {
			return time.Time{}
		}
		return m.Time
	}
	return State{
		Phase: s.Phase, Revision: s.Revision, StableRevision: s.StableRevision, Step: s.Step,
		StartedAt: t(s.StartedAt), StepStartedAt: t(s.StepStartedAt), BakeStartedAt: t(s.BakeStartedAt),
		Message: s.Message, LastAction: s.LastAction, Updated: s.Updated, Healthy: s.Healthy, Total: s.Total,
	}
}

// statusOf writes a state into a copy of cr's status.
func statusOf(cr *ConfigRollout, st State, steps int) Status {
	s := cr.Status
	mt := func(t time.Time) *metav1.Time {
		if t.IsZero() {
			return nil
		}
		m := metav1.NewTime(t.Truncate(time.Second))
		return &m
	}
	s.ObservedGeneration = cr.Generation
	s.Phase, s.Revision, s.StableRevision = st.Phase, st.Revision, st.StableRevision
	s.Step, s.Steps = st.Step, steps
	s.Updated, s.Healthy, s.Total = st.Updated, st.Healthy, st.Total
	s.Message, s.LastAction = st.Message, st.LastAction
	s.StartedAt, s.StepStartedAt, s.BakeStartedAt = mt(st.StartedAt), mt(st.StepStartedAt), mt(st.BakeStartedAt)
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: st.Phase, Message: st.Message, ObservedGeneration: cr.Generation}
	if st.Phase == PhaseHealthy {
		ready.Status = metav1.ConditionTrue
	}
	conds := slices.Clone(cr.Status.Conditions)
	i := slices.IndexFunc(conds, func(c metav1.Condition) bool { return c.Type == "Ready" })
	switch {
	case i < 0:
		ready.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
		conds = append(conds, ready)
	case conds[i].Status != ready.Status || conds[i].Reason != ready.Reason || conds[i].Message != ready.Message || conds[i].ObservedGeneration != ready.ObservedGeneration:
		ready.LastTransitionTime = conds[i].LastTransitionTime
		if conds[i].Status != ready.Status {
			ready.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
		}
		conds[i] = ready
	}
	s.Conditions = conds
	return s
}

// writeState stores a decision's state: the ConfigRollout's status, with
// its resourceVersion as the precondition, or the restart policy's in
// memory. It records the decision's Events once the state is stored.
func (c *Controller) writeState(ctx context.Context, cr *ConfigRollout, key controller.ObjectKey, in Input, out Output, src types.UID, logger log.Logger) error {
	if cr == nil {
		c.mu.Lock()
		c.implicit[key] = out.State
		c.mu.Unlock()
	} else {
		steps := 0
		if in.PolicyErr == nil {
			steps = in.Policy.StepCount(out.State.Total)
		}
		status := statusOf(cr, out.State, steps)
		if !reflect.DeepEqual(status, cr.Status) || len(out.Pods) > 0 || out.Promote || !reflect.DeepEqual(out.Stable, in.Stable) {
			w := cr.DeepCopy()
			w.Status = status
			got, err := c.client.UpdateStatus(ctx, w)
			if err != nil {
				return fmt.Errorf("update status of configrollout %s/%s: %w", cr.Namespace, cr.Name, err)
			}
			c.mu.Lock()
			c.wroteCR[key] = written[*ConfigRollout]{from: cr.ResourceVersion, obj: got}
			c.mu.Unlock()
			*cr = *got
		}
	}
	for _, e := range out.Events {
		lvl := level.Info
		if e.Warning {
			lvl = level.Warn
		}
		lvl(logger).Log("msg", e.Message, "reason", e.Reason)
		c.event(cr, key, src, e)
		switch e.Reason {
		case ReasonStarted:
			c.m.rollouts.WithLabelValues(key.Namespace, c.label(cr, key), "started").Inc()
		case ReasonPromoted:
			c.m.rollouts.WithLabelValues(key.Namespace, c.label(cr, key), "promoted").Inc()
		case ReasonAborted:
			if out.State.Phase == PhaseAborted {
				c.m.rollouts.WithLabelValues(key.Namespace, c.label(cr, key), "aborted").Inc()
			}
		}
	}
	label := c.label(cr, key)
	c.mu.Lock()
	prev, had := c.exported[key]
	c.exported[key] = label
	c.mu.Unlock()
	if had && prev != label {
		c.m.drop(key.Namespace, prev)
	}
	c.m.set(key.Namespace, label, out.State)
	return nil
}

func (c *Controller) label(cr *ConfigRollout, key controller.ObjectKey) string {
	if cr != nil {
		return cr.Name
	}
	return "restart:" + Ref(key)
}

// apply writes a decision in order: the state, the stable copy, the pods,
// and the action's removal.
func (c *Controller) apply(ctx context.Context, cr *ConfigRollout, key controller.ObjectKey, in Input, out Output, ms []member, st sumEntry, src types.UID, logger log.Logger) error {
	sk := StableKey(key)
	stableChanged := out.Promote || !reflect.DeepEqual(out.Stable, in.Stable)
	if cr != nil {
		if err := c.writeState(ctx, cr, key, in, out, src, logger); err != nil {
			return err
		}
	}
	// The stable copy; for a restart policy, whose state is in memory, a
	// write of it (unchanged if need be) is the precondition of the pods'
	// patches, so that two leaders cannot both move pods.
	if stableChanged || cr == nil && len(out.Pods) > 0 {
		var from *content
		if out.Promote {
			ct, err := c.read(ctx, key)
			if err != nil {
				return err
			}
			if ct.sum() != out.Stable.Stable.Sum() {
				level.Info(logger).Log("msg", "the source changed while being promoted, deciding again")
				return fmt.Errorf("%w: the source changed", controller.ErrLost)
			}
			from = ct
		}
		old, err := c.read(ctx, sk)
		if err != nil {
			return err
		}
		if old.rv != st.rv {
			return fmt.Errorf("%w: the stable copy changed", controller.ErrLost)
		}
		rv, err := c.writeStable(ctx, sk, from, old, out.Stable)
		if err != nil {
			return err
		}
		e := st
		e.rv, e.reserved, e.err = rv, out.Stable, nil
		if from != nil {
			e.sum, e.size = from.sum(), entryOf(from).size
		}
		c.mu.Lock()
		c.sums[sk] = e
		c.mu.Unlock()
	}
	if cr == nil {
		if err := c.writeState(ctx, nil, key, in, out, src, logger); err != nil {
			return err
		}
	}
	if err := c.patchPods(ctx, key, ms, out.Pods, logger); err != nil {
		return err
	}
	if cr != nil && out.ActionDone && cr.Annotations[AnnotationAction] != "" {
		if err := c.client.RemoveAction(ctx, cr); err != nil && !controller.Lost(err) {
			return fmt.Errorf("remove %s from configrollout %s/%s: %w", AnnotationAction, cr.Namespace, cr.Name, err)
		}
	}
	return nil
}

// patchPods sets the revisions annotation of each pod in want, each patch
// with the pod's resourceVersion as read as its precondition.
func (c *Controller) patchPods(ctx context.Context, key controller.ObjectKey, ms []member, want map[string]string, logger log.Logger) error {
	if len(want) == 0 {
		return nil
	}
	ref := Ref(key)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 8)
	)
	for _, m := range ms {
		rev, ok := want[m.Name]
		if !ok {
			continue
		}
		p := m.pod
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			revs := Revisions(p)
			revs[ref] = rev
			b, _ := json.Marshal(revs)
			v := string(b)
			got, err := controller.PatchPodAnnotations(ctx, c.opts.Core, p, map[string]*string{controller.AnnotationRevisions: &v})
			switch {
			case err == nil:
				c.m.patches.WithLabelValues("patched").Inc()
				level.Debug(logger).Log("msg", "pod moved", "pod", p.Name, "revision", rev)
				if m.restart && m.Want != "" && m.Want != rev {
					// What tells this restart from a crash, in the pod's Events.
					if rec := c.recorder(); rec != nil {
						rec.Eventf(&corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}, corev1.EventTypeNormal, ReasonRestartAssigned,
							"revision %s of %s assigned: hotreload restarts the app's container to apply it", rev, ref)
					}
				}
				if t, err := controller.TrimPod(got); err == nil {
					c.mu.Lock()
					c.wrotePod[p.UID] = written[*corev1.Pod]{from: p.ResourceVersion, obj: t.(*corev1.Pod)}
					c.mu.Unlock()
				}
			case apierrors.IsNotFound(err):
				c.m.patches.WithLabelValues("gone").Inc()
			default:
				if controller.Lost(err) {
					c.m.patches.WithLabelValues("lost").Inc()
				} else {
					c.m.patches.WithLabelValues("failed").Inc()
					if apierrors.IsForbidden(err) {
						err = fmt.Errorf("%w (its RBAC or the admission policy refuses it: the controller changes only the pod's %s annotation)", err, controller.AnnotationRevisions)
					}
				}
				mu.Lock()
				errs = append(errs, fmt.Errorf("patch pod %s/%s: %w", p.Namespace, p.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createStable creates the stable copy of key from its content now: the
// content the pods already run.
func (c *Controller) createStable(ctx context.Context, key controller.ObjectKey, logger log.Logger) (time.Duration, error) {
	ct, err := c.read(ctx, key)
	if err != nil {
		return 0, err
	}
	r := Reserved{Rollout: revision.Rollout{Source: Ref(key), Stable: revision.NewPin(ct.rv, ct.sum())}}
	rv, err := c.writeStable(ctx, StableKey(key), ct, nil, r)
	if err != nil {
		return 0, err
	}
	e := entryOf(ct)
	e.rv, e.has, e.ours, e.reserved = rv, true, true, r
	c.mu.Lock()
	c.sums[StableKey(key)] = e
	c.mu.Unlock()
	level.Info(logger).Log("msg", "stable copy created", "copy", StableKey(key).Name, "revision", ct.rv)
	return time.Millisecond, nil // decide with it at once
}

// cleanup deletes the stable copy of a source that no rollout and no pod
// in restart mode uses any more, so that its pods run the source again.
func (c *Controller) cleanup(ctx context.Context, s *scope, key controller.ObjectKey) error {
	c.mu.Lock()
	delete(c.implicit, key)
	label, exported := c.exported[key]
	delete(c.exported, key)
	c.mu.Unlock()
	if exported {
		c.m.drop(key.Namespace, label)
	}
	sk := StableKey(key)
	rv, uid, ok := s.metaRV(sk)
	if !ok {
		return nil
	}
	e, err := c.sumOf(ctx, sk, rv)
	if errors.Is(err, errNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !e.ours || !e.has {
		return nil // not ours
	}
	if err := c.deleteStable(ctx, sk, uid); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.sums, sk)
	c.mu.Unlock()
	level.Info(c.logger).Log("msg", "stable copy deleted: no ConfigRollout and no pod in restart mode uses the source", "copy", sk.Name, "namespace", sk.Namespace)
	return nil
}

// failExtra marks a second ConfigRollout of a source as failed.
func (c *Controller) failExtra(ctx context.Context, r, first *ConfigRollout) {
	msg := fmt.Sprintf("ConfigRollout %s already manages %s %s: this one does nothing", first.Name, r.Spec.Source.Kind, r.Spec.Source.Name)
	if r.Status.Phase == PhaseFailed && r.Status.Message == msg {
		return
	}
	w := r.DeepCopy()
	w.Status = statusOf(r, State{Phase: PhaseFailed, Message: msg}, 0)
	if _, err := c.client.UpdateStatus(ctx, w); err == nil {
		c.event(r, controller.ObjectKey{}, "", Event{Warning: true, Reason: ReasonInvalid, Message: msg})
	}
}

// podRejected records, once per pod and reason, why a pod is left where
// it is.
func (c *Controller) podRejected(cr *ConfigRollout, key controller.ObjectKey, src types.UID, m member, logger log.Logger) {
	c.mu.Lock()
	seen := c.rejected[m.pod.UID] == m.Refused
	c.rejected[m.pod.UID] = m.Refused
	c.mu.Unlock()
	if seen {
		return
	}
	msg := fmt.Sprintf("pod %s is left on what it runs: %s", m.Name, m.Refused)
	level.Warn(logger).Log("msg", msg, "reason", ReasonPodRejected)
	if rec := c.recorder(); rec != nil {
		rec.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: m.pod.Namespace, Name: m.Name, UID: m.pod.UID}, corev1.EventTypeWarning, ReasonPodRejected, msg)
	}
	c.event(cr, key, src, Event{Warning: true, Reason: ReasonPodRejected, Message: msg})
}

// scrape is the default Report: GET /-/content of the pod's sidecar.
func (c *Controller) scrape(ctx context.Context, p *corev1.Pod, ref string) (*Report, error) {
	u, err := contentURL(p, c.opts.ContentURL)
	if err != nil {
		return nil, err
	}
	return scrape(ctx, c.opts.HTTPClient, u, ref)
}
