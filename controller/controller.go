package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Options configure a Controller.
type Options struct {
	// Pods lists, watches and patches pods; Metadata lists and watches
	// ConfigMaps and Secrets by metadata only. Both are required. Leases
	// holds the Lease of the leader election, required with LeaderElection.
	// Each is a typed client of one API group (corev1client.NewForConfig,
	// coordinationv1client.NewForConfig), so that the binary links only
	// those groups' clients.
	Pods     corev1client.PodsGetter
	Metadata metadata.Interface
	Leases   coordinationv1client.LeasesGetter

	// Namespaces to watch; none watches the whole cluster.
	Namespaces []string
	// ConfigMapsOnly leaves Secrets unwatched: their edits are delivered by
	// the kubelet's periodic sync, and the controller needs no access to
	// Secrets at all.
	ConfigMapsOnly bool
	// Workers patch pods in parallel, one pod each; default 2.
	Workers int
	// MaxRetries is how often a pod whose patch failed is retried, with
	// exponential backoff, before it is left to the kubelet's periodic
	// sync; default 15 (about 3 minutes).
	MaxRetries int
	// RateLimiter spaces the retries; default client-go's controller
	// limiter (5ms doubling, 1000s at most, 10/s overall).
	RateLimiter workqueue.TypedRateLimiter[types.NamespacedName]
	// Coalesce merges a burst of changes into fewer nudges of each pod: a
	// pod nudged less than Coalesce ago waits until no change has come for
	// Coalesce, and at most 10 times Coalesce (see due). 0 nudges on every
	// change.
	Coalesce time.Duration
	// WarnInterval is the least time between two warnings about one kind
	// of failing API call; default a minute.
	WarnInterval time.Duration

	// LeaderElection, when set, makes only the holder of a Lease patch pods.
	// Nil: this replica always leads.
	LeaderElection *LeaderElection

	// Parts are loops that share the controller's caches and its Lease,
	// such as the rollouts (package rollout).
	Parts []Part

	// Now is the clock of the lag metric, of coalescing and of the
	// warnings' rate; default time.Now.
	Now func() time.Time
}

// A Part is a loop that shares the controller's informers and its Lease.
// New calls Attach with the informers of each namespace it watches, before
// they start (add indexes and handlers there); Run runs the part's own
// informers beside them and is ready when all have synced; Lead runs while
// this replica leads, and must return when ctx is done.
type Part interface {
	Attach(Scope) error
	Informers() []cache.SharedIndexInformer
	Lead(ctx context.Context)
}

// Scope is the shared informers of one namespace, or of all ("").
// Secrets is nil when the controller does not watch Secrets.
type Scope struct {
	Namespace                 string
	Pods, ConfigMaps, Secrets cache.SharedIndexInformer
}

// LeaderElection names the Lease the replicas compete for.
type LeaderElection struct {
	Namespace, Name string
	// Identity of this replica in the Lease, such as its pod name. Required.
	Identity string
	// Timings of client-go's leader election; defaults 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Controller nudges the pods that mount a ConfigMap or Secret when it
// changes. See the package documentation.
type Controller struct {
	logger log.Logger
	opts   Options
	scopes map[string]*scope // by namespace; "" when cluster-wide
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	m      *metrics
	calls  *apiCalls

	mu      sync.Mutex
	synced  bool
	marks   marks
	timing  map[types.NamespacedName]*podTiming
	leading atomic.Bool
	ready   atomic.Bool

	leadMu   sync.Mutex
	leadDone bool
	stopLead context.CancelFunc // while leading under leader election
	leadWG   sync.WaitGroup
}

// scope is the informers of one namespace (or of all).
type scope struct {
	pods, configMaps, secrets cache.SharedIndexInformer // secrets nil with ConfigMapsOnly
}

func (s *scope) objects(k Kind) cache.SharedIndexInformer {
	if k == Secret {
		return s.secrets
	}
	return s.configMaps
}

func (s *scope) informers() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{s.pods, s.configMaps}
	if s.secrets != nil {
		out = append(out, s.secrets)
	}
	return out
}

// New builds a Controller; Run starts it.
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Controller, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if opts.Pods == nil || opts.Metadata == nil {
		return nil, errors.New("controller: Pods and Metadata are required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 15
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()
	}
	if opts.WarnInterval <= 0 {
		opts.WarnInterval = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if le := opts.LeaderElection; le != nil {
		if le.Identity == "" || le.Name == "" || le.Namespace == "" {
			return nil, errors.New("controller: leader election needs a lease namespace, a lease name and an identity")
		}
		if opts.Leases == nil {
			return nil, errors.New("controller: leader election needs Leases")
		}
		if le.LeaseDuration == 0 {
			le.LeaseDuration = 15 * time.Second
		}
		if le.RenewDeadline == 0 {
			le.RenewDeadline = 10 * time.Second
		}
		if le.RetryPeriod == 0 {
			le.RetryPeriod = 2 * time.Second
		}
	}
	c := &Controller{
		logger: log.With(logger, "component", "controller"),
		opts:   opts,
		scopes: map[string]*scope{},
		marks:  marks{},
		timing: map[types.NamespacedName]*podTiming{},
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "hotreload-nudges"})
	c.m = newMetrics(reg, func() float64 { return float64(c.queue.Len()) }, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.marks))
	})
	c.calls = &apiCalls{logger: c.logger, now: opts.Now, interval: opts.WarnInterval, errors: c.m.apiErrors, failing: map[apiCall]*failure{}}

	namespaces := slices.Clone(opts.Namespaces)
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		s := &scope{
			pods:       c.podInformer(opts.Pods, ns),
			configMaps: c.metadataInformer(opts.Metadata, configMapsGVR, listConfigMaps, watchConfigMaps, ns),
		}
		if !opts.ConfigMapsOnly {
			s.secrets = c.metadataInformer(opts.Metadata, secretsGVR, listSecrets, watchSecrets, ns)
		}
		if err := s.pods.SetTransform(TrimPod); err != nil {
			return nil, fmt.Errorf("pod informer: %w", err)
		}
		if _, err := s.pods.AddEventHandler(c.podHandler()); err != nil {
			return nil, fmt.Errorf("pod informer: %w", err)
		}
		for _, k := range []Kind{ConfigMap, Secret} {
			inf := s.objects(k)
			if inf == nil {
				continue
			}
			if err := inf.SetTransform(TrimObject); err != nil {
				return nil, fmt.Errorf("%s informer: %w", k, err)
			}
			if _, err := inf.AddEventHandler(c.objectHandler(k)); err != nil {
				return nil, fmt.Errorf("%s informer: %w", k, err)
			}
		}
		c.scopes[ns] = s
		for _, p := range opts.Parts {
			if err := p.Attach(Scope{Namespace: ns, Pods: s.pods, ConfigMaps: s.configMaps, Secrets: s.secrets}); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Ready reports whether every cache has synced.
func (c *Controller) Ready() bool { return c.ready.Load() }

// Leading reports whether this replica patches pods now.
func (c *Controller) Leading() bool { return c.leading.Load() }

func (c *Controller) scope(ns string) *scope {
	if s, ok := c.scopes[metav1.NamespaceAll]; ok {
		return s
	}
	return c.scopes[ns]
}

// Run watches until ctx is done. With leader election it returns an error
// when the lease is lost, so that the process restarts as a standby.
func (c *Controller) Run(ctx context.Context) error {
	// client-go's informers and leader election log through the context's
	// logger; the controller reports their failures itself.
	ctx = klog.NewContext(ctx, clientGoLogger(c.logger))
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer c.queue.ShutDown()
	var synced []cache.InformerSynced
	for _, s := range c.scopes {
		for _, inf := range s.informers() {
			wg.Go(func() { inf.RunWithContext(ctx) })
			synced = append(synced, inf.HasSynced)
		}
	}
	for _, p := range c.opts.Parts {
		for _, inf := range p.Informers() {
			wg.Go(func() { inf.RunWithContext(ctx) })
			synced = append(synced, inf.HasSynced)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx done
	}
	c.markSynced()
	c.ready.Store(true)
	level.Info(c.logger).Log("msg", "caches synced", "pods", c.optedIn())

	le := c.opts.LeaderElection
	if le == nil {
		c.lead(ctx)
		return nil
	}
	lock := &leaseLock{
		LeaseLock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     c.opts.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		},
		calls:       c.calls,
		retrying:    "retrying every " + le.RetryPeriod.String(),
		otherHolder: c.stepDown,
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				c.leadMu.Lock()
				if c.leadDone {
					c.leadMu.Unlock()
					return
				}
				ctx, stop := context.WithCancel(ctx)
				c.stopLead = stop
				c.leadWG.Add(1)
				c.leadMu.Unlock()
				defer c.leadWG.Done()
				defer func() {
					c.leadMu.Lock()
					c.stopLead = nil
					c.leadMu.Unlock()
					stop()
				}()
				c.lead(ctx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				level.Info(c.logger).Log("msg", "leader", "identity", id, "self", id == le.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	level.Info(c.logger).Log("msg", "waiting for the lease", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
	elector.Run(ctx)
	c.leadMu.Lock()
	c.leadDone = true
	c.leadMu.Unlock()
	c.leadWG.Wait()
	if ctx.Err() == nil {
		return fmt.Errorf("lease %s/%s lost", le.Namespace, le.Name)
	}
	return nil
}

// stepDown stops leading at once when the Lease shows that another replica
// holds it: client-go would go on leading until its renew deadline.
func (c *Controller) stepDown(holder string) {
	c.leadMu.Lock()
	defer c.leadMu.Unlock()
	if c.stopLead == nil {
		return
	}
	level.Warn(c.logger).Log("msg", "another replica holds the lease, no longer leading", "holder", holder)
	c.stopLead()
	c.stopLead = nil
}

// lead patches pods until ctx is done: first those behind, then on every
// change.
func (c *Controller) lead(ctx context.Context) {
	c.leading.Store(true)
	c.m.leader.Set(1)
	defer func() {
		c.leading.Store(false)
		c.m.leader.Set(0)
	}()
	n := c.catchUp()
	level.Info(c.logger).Log("msg", "leading", "behind", n)

	var wg sync.WaitGroup
	for _, p := range c.opts.Parts {
		wg.Go(func() { p.Lead(ctx) })
	}
	for range c.opts.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

// catchUp queues every nudgeable pod that mounts an object in a newer
// version than the pod's mark, and returns how many it queued.
func (c *Controller) catchUp() int {
	now := c.opts.Now()
	n := 0
	for _, s := range c.scopes {
		for _, obj := range s.pods.GetStore().List() {
			if p := obj.(*corev1.Pod); len(c.behind(p)) > 0 {
				c.changed(p, now)
				n++
			}
		}
	}
	return n
}

// target is a nudge to send: an object and the version it is at.
type target struct {
	key ObjectKey
	rv  string
}

// behind lists, for each kind of object that p mounts in a newer version
// than its mark, the newest of them: one nudge of it makes the kubelet
// read every object of that kind that the pod mounts.
func (c *Controller) behind(p *corev1.Pod) []target {
	if !nudgeable(p) {
		return nil
	}
	s := c.scope(p.Namespace)
	var out []target
	for _, kind := range []Kind{ConfigMap, Secret} {
		var newest target
		for _, k := range Mounts(p) {
			if k.Kind != kind {
				continue
			}
			if rv, ok := c.version(s, k); ok && c.isBehind(p, kind, rv) && newer(rv, newest.rv) {
				newest = target{k, rv}
			}
		}
		if newest.rv != "" {
			out = append(out, newest)
		}
	}
	return out
}

// version is the resourceVersion of the object in the cache.
func (c *Controller) version(s *scope, k ObjectKey) (string, bool) {
	if s == nil || s.objects(k.Kind) == nil {
		return "", false
	}
	obj, ok, err := s.objects(k.Kind).GetStore().GetByKey(k.Namespace + "/" + k.Name)
	if err != nil || !ok {
		return "", false
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", false
	}
	return m.GetResourceVersion(), true
}

// isBehind reports whether version rv of an object of kind k is newer than
// what p is known to hold.
func (c *Controller) isBehind(p *corev1.Pod, k Kind, rv string) bool {
	mark := ""
	c.mu.Lock()
	if m, ok := c.marks[p.UID]; ok {
		mark = m.get(k)
	}
	c.mu.Unlock()
	if kind, _, arv, err := ParseNudge(p.Annotations[AnnotationNudged]); err == nil && kind == k && newer(arv, mark) {
		mark = arv
	}
	return newer(rv, mark)
}

// changed records that a change concerning p was seen at now, and queues p.
func (c *Controller) changed(p *corev1.Pod, now time.Time) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	c.mu.Lock()
	t, ok := c.timing[key]
	if !ok {
		t = &podTiming{}
		c.timing[key] = t
	}
	if t.pending.IsZero() {
		t.pending = now
	}
	t.lastChange = now
	c.mu.Unlock()
	c.queue.Add(key)
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	if err == nil || ctx.Err() != nil {
		c.queue.Forget(key)
		return true
	}
	if n := c.queue.NumRequeues(key); n < c.opts.MaxRetries {
		level.Debug(c.logger).Log("msg", "nudge failed, retrying with backoff", "pod", key, "retries", n, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	level.Debug(c.logger).Log("msg", "nudge failed, giving up; the kubelet's periodic sync will update the pod", "pod", key, "retries", c.opts.MaxRetries, "err", err)
	c.m.givenUp.Inc()
	c.queue.Forget(key)
	c.mu.Lock()
	if t, ok := c.timing[key]; ok {
		t.pending = time.Time{}
	}
	c.mu.Unlock()
	return true
}

// sync brings one pod up to date: if it mounts an object in a newer
// version than it holds, it nudges the pod, now or, within a burst, once
// the burst has settled.
func (c *Controller) sync(ctx context.Context, key types.NamespacedName) error {
	s := c.scope(key.Namespace)
	if s == nil {
		return nil
	}
	obj, ok, err := s.pods.GetIndexer().GetByKey(key.String())
	if err != nil {
		return fmt.Errorf("get pod %s from the cache: %w", key, err)
	}
	var targets []target
	if ok {
		targets = c.behind(obj.(*corev1.Pod))
	}
	start := c.opts.Now()
	c.mu.Lock()
	t, tracked := c.timing[key]
	if !tracked {
		t = &podTiming{}
	}
	if len(targets) == 0 {
		t.pending = time.Time{} // gone, not nudgeable, or current
		c.mu.Unlock()
		return nil
	}
	if t.pending.IsZero() {
		t.pending = start // behind without a change seen: as if seen now
	}
	at := due(*t, c.opts.Coalesce, start)
	seen := t.pending
	c.mu.Unlock()
	if at.After(start) {
		c.queue.AddAfter(key, at.Sub(start))
		return nil
	}

	p := obj.(*corev1.Pod)
	for _, tg := range targets {
		err := c.patch(ctx, p, tg)
		switch {
		case err == nil:
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Deleted, or replaced by a pod of the same name: its informer
			// event brings the new one, if any.
			c.m.nudges.WithLabelValues(ResultGone).Inc()
			return nil
		default:
			c.m.nudges.WithLabelValues(ResultFailed).Inc()
			c.calls.failed(patchPods, err, fmt.Sprintf("retrying with backoff; a pod is left to the kubelet's periodic sync after %d tries", c.opts.MaxRetries))
			return fmt.Errorf("patch pod %s: %w", key, err)
		}
		c.calls.ok(patchPods)
		now := c.opts.Now()
		c.m.nudges.WithLabelValues(ResultPatched).Inc()
		if !seen.IsZero() {
			c.m.lag.Observe(now.Sub(seen).Seconds())
		}
		c.mu.Lock()
		if m, ok := c.marks[p.UID]; ok {
			m.raise(tg.key.Kind, tg.rv)
		}
		t.lastPatch = now
		c.mu.Unlock()
		level.Debug(c.logger).Log("msg", "nudged", "pod", key, "object", tg.key, "version", tg.rv)
	}
	c.mu.Lock()
	// A change seen while patching is still to come: sync runs again for
	// it, since its event queued the pod.
	if !t.lastChange.After(start) {
		t.pending = time.Time{}
	} else {
		t.pending = t.lastChange
	}
	c.mu.Unlock()
	return nil
}

type nudgePatch struct {
	Metadata struct {
		// UID makes the patch fail with a conflict if the pod was replaced
		// by one of the same name.
		UID         types.UID         `json:"uid"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// patch nudges p for tg: a merge patch of one annotation that carries the
// pod's uid but not its resourceVersion (see write.go for why).
func (c *Controller) patch(ctx context.Context, p *corev1.Pod, tg target) error {
	var np nudgePatch
	np.Metadata.UID = p.UID
	np.Metadata.Annotations = map[string]string{AnnotationNudged: tg.key.Nudge(tg.rv)}
	data, err := json.Marshal(np)
	if err != nil {
		return err
	}
	_, err = c.opts.Pods.Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

func (c *Controller) optedIn() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.marks)
}

// markSynced gives every opted-in pod of the initial lists its marks, now
// that the ConfigMaps and Secrets are in the caches too.
func (c *Controller) markSynced() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.synced = true
	for _, s := range c.scopes {
		for _, obj := range s.pods.GetStore().List() {
			c.observeLocked(obj.(*corev1.Pod))
		}
	}
}

// observeLocked records what the pod is known to hold: on first sight, the
// objects it mounts as the caches have them now (a pod is current when it
// starts) or the version its annotation names; later, every nudge its
// annotation shows, including those of another replica.
func (c *Controller) observeLocked(p *corev1.Pod) {
	if !c.synced || !OptedIn(p) {
		return
	}
	m, ok := c.marks[p.UID]
	if !ok {
		m = &podMarks{}
		c.marks[p.UID] = m
		annotated, _, _, _ := ParseNudge(p.Annotations[AnnotationNudged])
		s := c.scope(p.Namespace)
		for _, k := range Mounts(p) {
			if k.Kind == annotated {
				continue
			}
			if rv, ok := c.version(s, k); ok {
				m.raise(k.Kind, rv)
			}
		}
	}
	if kind, _, rv, err := ParseNudge(p.Annotations[AnnotationNudged]); err == nil {
		m.raise(kind, rv)
	}
}

func (c *Controller) objectHandler(kind Kind) cache.ResourceEventHandler {
	key := func(obj any) (ObjectKey, string, bool) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return ObjectKey{}, "", false
		}
		return ObjectKey{kind, m.GetNamespace(), m.GetName()}, m.GetResourceVersion(), true
	}
	changed := func(k ObjectKey) {
		// A follower queues nothing: on becoming leader it compares every
		// pod with the objects it mounts.
		if !c.leading.Load() {
			return
		}
		s := c.scope(k.Namespace)
		if s == nil {
			return
		}
		pods, err := s.pods.GetIndexer().ByIndex(mountsIndex, k.String())
		if err != nil {
			level.Error(c.logger).Log("msg", "index pods by mount", "object", k, "err", err)
			return
		}
		now := c.opts.Now()
		for _, obj := range pods {
			if p := obj.(*corev1.Pod); nudgeable(p) {
				c.changed(p, now)
			}
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			// A new object matters to pods that mount it as optional.
			if k, _, ok := key(obj); ok && !isInInitialList {
				changed(k)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			k, rv, ok := key(newObj)
			_, oldRV, _ := key(oldObj)
			if ok && rv != oldRV {
				changed(k)
			}
		},
	}
}

func (c *Controller) podHandler() cache.ResourceEventHandler {
	observe := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		c.mu.Lock()
		c.observeLocked(p)
		c.mu.Unlock()
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, _ bool) { observe(obj) },
		UpdateFunc: func(oldObj, newObj any) {
			observe(newObj)
			// A pod that starts running during an edit may hold the old
			// version: nudge it once it runs.
			o, ok1 := oldObj.(*corev1.Pod)
			n, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 && c.leading.Load() && !nudgeable(o) && nudgeable(n) && len(c.behind(n)) > 0 {
				c.changed(n, c.opts.Now())
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				c.mu.Lock()
				delete(c.marks, p.UID)
				delete(c.timing, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
				c.mu.Unlock()
			}
		},
	}
}
