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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
)

// Options configure a Controller.
type Options struct {
	// Client patches pods and reads them; Metadata lists and watches
	// ConfigMaps and Secrets by metadata only. Both are required.
	Client   kubernetes.Interface
	Metadata metadata.Interface

	// Namespaces to watch; none watches the whole cluster.
	Namespaces []string
	// Workers patch pods in parallel, one object each; default 2.
	Workers int
	// MaxRetries is how often an object whose patches failed is retried,
	// with exponential backoff, before it is dropped; default 15 (about
	// 3 minutes).
	MaxRetries int
	// RateLimiter spaces the retries; default client-go's controller
	// limiter (5ms doubling, 1000s at most, 10/s overall).
	RateLimiter workqueue.TypedRateLimiter[ObjectKey]

	// LeaderElection, when set, makes only the holder of a Lease patch pods.
	// Nil: this replica always leads.
	LeaderElection *LeaderElection

	// Now is the clock of the lag metric; default time.Now.
	Now func() time.Time
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
	queue  workqueue.TypedRateLimitingInterface[ObjectKey]
	m      *metrics

	mu      sync.Mutex
	synced  bool
	marks   marks
	seen    map[ObjectKey]time.Time // first unhandled change of each queued object
	leading atomic.Bool
	ready   atomic.Bool

	leadMu   sync.Mutex
	leadDone bool
	leadWG   sync.WaitGroup
}

// scope is the informers of one namespace (or of all).
type scope struct {
	pods, configMaps, secrets cache.SharedIndexInformer
}

func (s *scope) objects(k Kind) cache.SharedIndexInformer {
	if k == Secret {
		return s.secrets
	}
	return s.configMaps
}

var (
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// New builds a Controller; Run starts it.
func New(logger log.Logger, reg prometheus.Registerer, opts Options) (*Controller, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if opts.Client == nil || opts.Metadata == nil {
		return nil, errors.New("controller: Client and Metadata are required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 15
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[ObjectKey]()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if le := opts.LeaderElection; le != nil {
		if le.Identity == "" || le.Name == "" || le.Namespace == "" {
			return nil, errors.New("controller: leader election needs a lease namespace, a lease name and an identity")
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
		seen:   map[ObjectKey]time.Time{},
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
		workqueue.TypedRateLimitingQueueConfig[ObjectKey]{Name: "hotreload-nudges"})
	c.m = newMetrics(reg, func() float64 { return float64(c.queue.Len()) }, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.marks))
	})

	namespaces := slices.Clone(opts.Namespaces)
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		s := &scope{
			pods:       coreinformers.NewPodInformer(opts.Client, ns, 0, cache.Indexers{mountsIndex: indexMounts}),
			configMaps: metadatainformer.NewFilteredMetadataInformer(opts.Metadata, configMapsGVR, ns, 0, cache.Indexers{}, nil).Informer(),
			secrets:    metadatainformer.NewFilteredMetadataInformer(opts.Metadata, secretsGVR, ns, 0, cache.Indexers{}, nil).Informer(),
		}
		if err := s.pods.SetTransform(TrimPod); err != nil {
			return nil, fmt.Errorf("pod informer: %w", err)
		}
		for _, k := range []Kind{ConfigMap, Secret} {
			inf := s.objects(k)
			if err := inf.SetTransform(TrimObject); err != nil {
				return nil, fmt.Errorf("%s informer: %w", k, err)
			}
			if _, err := inf.AddEventHandler(c.objectHandler(k)); err != nil {
				return nil, fmt.Errorf("%s informer: %w", k, err)
			}
		}
		if _, err := s.pods.AddEventHandler(c.podHandler()); err != nil {
			return nil, fmt.Errorf("pod informer: %w", err)
		}
		c.scopes[ns] = s
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
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer c.queue.ShutDown()
	var synced []cache.InformerSynced
	for _, s := range c.scopes {
		for _, inf := range []cache.SharedIndexInformer{s.pods, s.configMaps, s.secrets} {
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
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     c.opts.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		},
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
				c.leadWG.Add(1)
				c.leadMu.Unlock()
				defer c.leadWG.Done()
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

// catchUp queues every object that a nudgeable pod mounts in a newer version
// than the pod's mark, and returns how many it queued.
func (c *Controller) catchUp() int {
	now := c.opts.Now()
	queued := map[ObjectKey]bool{}
	for _, s := range c.scopes {
		for _, obj := range s.pods.GetStore().List() {
			for _, k := range c.behind(obj.(*corev1.Pod)) {
				if !queued[k] {
					queued[k] = true
					c.enqueue(k, now)
				}
			}
		}
	}
	return len(queued)
}

// behind lists the objects that p mounts in a newer version than its marks.
func (c *Controller) behind(p *corev1.Pod) []ObjectKey {
	if !nudgeable(p) {
		return nil
	}
	s := c.scope(p.Namespace)
	var keys []ObjectKey
	for _, k := range Mounts(p) {
		rv, ok := c.version(s, k)
		if ok && c.isBehind(p, k.Kind, rv) {
			keys = append(keys, k)
		}
	}
	return keys
}

// version is the resourceVersion of the object in the cache.
func (c *Controller) version(s *scope, k ObjectKey) (string, bool) {
	if s == nil {
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

func (c *Controller) enqueue(k ObjectKey, seen time.Time) {
	c.mu.Lock()
	if _, ok := c.seen[k]; !ok {
		c.seen[k] = seen
	}
	c.mu.Unlock()
	c.queue.Add(k)
}

func (c *Controller) takeSeen(k ObjectKey) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.seen[k]
	delete(c.seen, k)
	return t, ok
}

func (c *Controller) processNext(ctx context.Context) bool {
	k, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(k)
	seen, ok := c.takeSeen(k)
	if !ok {
		seen = c.opts.Now()
	}
	err := c.nudge(ctx, k, seen)
	if err == nil || ctx.Err() != nil {
		c.queue.Forget(k)
		return true
	}
	if n := c.queue.NumRequeues(k); n < c.opts.MaxRetries {
		level.Warn(c.logger).Log("msg", "nudge failed, retrying with backoff", "object", k, "retries", n, "err", err)
		c.mu.Lock()
		if _, ok := c.seen[k]; !ok {
			c.seen[k] = seen
		}
		c.mu.Unlock()
		c.queue.AddRateLimited(k)
		return true
	}
	level.Error(c.logger).Log("msg", "nudge failed, giving up; the kubelet's periodic sync will update the pods", "object", k, "retries", c.opts.MaxRetries, "err", err)
	c.queue.Forget(k)
	return true
}

// nudge patches every nudgeable pod that mounts k and is behind its
// current version.
func (c *Controller) nudge(ctx context.Context, k ObjectKey, seen time.Time) error {
	s := c.scope(k.Namespace)
	rv, ok := c.version(s, k)
	if !ok {
		return nil // deleted since
	}
	pods, err := s.pods.GetIndexer().ByIndex(mountsIndex, k.String())
	if err != nil {
		return fmt.Errorf("index pods: %w", err)
	}
	var errs []error
	for _, obj := range pods {
		p := obj.(*corev1.Pod)
		if !nudgeable(p) || !c.isBehind(p, k.Kind, rv) {
			continue
		}
		if err := c.patch(ctx, p, k, rv); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				c.m.nudges.WithLabelValues(ResultGone).Inc()
				continue
			}
			c.m.nudges.WithLabelValues(ResultFailed).Inc()
			errs = append(errs, fmt.Errorf("patch pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		c.m.nudges.WithLabelValues(ResultPatched).Inc()
		c.m.lag.Observe(c.opts.Now().Sub(seen).Seconds())
		c.mu.Lock()
		if m, ok := c.marks[p.UID]; ok {
			m.raise(k.Kind, rv)
		}
		c.mu.Unlock()
		level.Debug(c.logger).Log("msg", "nudged", "pod", p.Namespace+"/"+p.Name, "object", k, "version", rv)
	}
	return errors.Join(errs...)
}

type nudgePatch struct {
	Metadata struct {
		// UID makes the patch fail with a conflict if the pod was replaced
		// by one of the same name.
		UID         types.UID         `json:"uid"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

func (c *Controller) patch(ctx context.Context, p *corev1.Pod, k ObjectKey, rv string) error {
	var np nudgePatch
	np.Metadata.UID = p.UID
	np.Metadata.Annotations = map[string]string{AnnotationNudged: k.Nudge(rv)}
	data, err := json.Marshal(np)
	if err != nil {
		return err
	}
	_, err = c.opts.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, data, metav1.PatchOptions{})
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
		// object with the pods' marks.
		if c.leading.Load() {
			c.enqueue(k, c.opts.Now())
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
			if ok1 && ok2 && c.leading.Load() && !nudgeable(o) && nudgeable(n) {
				now := c.opts.Now()
				for _, k := range c.behind(n) {
					c.enqueue(k, now)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				c.mu.Lock()
				delete(c.marks, p.UID)
				c.mu.Unlock()
			}
		},
	}
}
