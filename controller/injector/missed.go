package injector

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/hotreload/hotreload/controller"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// missed finds the pods that opted in but were admitted without the
// sidecar: failurePolicy Ignore lets a pod through when the webhook cannot
// be reached (its Service down, a timeout, a certificate the API server
// does not trust), and a pod whose annotations or spec did not suit was
// admitted unchanged. Such a pod has an opt-in annotation and no
// hotreload.dev/injected, which the injector sets on every pod it
// admitted with the sidecar. The pods come from the controller's
// informers (Attach), which keep the hotreload.dev/ annotations.
//
// Every replica keeps the gauge of such pods; the leader reports each
// once: an Event on the pod, hotreload_controller_injections_missed_total,
// and a log line per round.
type missed struct {
	logger   log.Logger
	excluded []string
	events   record.EventRecorder
	m        *metrics

	mu       sync.Mutex
	missing  map[types.UID]missingPod
	reported map[types.UID]bool
}

type missingPod struct {
	namespace, name string
	reason          string
}

func newMissed(logger log.Logger, excluded []string, events record.EventRecorder, m *metrics) *missed {
	return &missed{logger: logger, excluded: excluded, events: events, m: m, missing: map[types.UID]missingPod{}, reported: map[types.UID]bool{}}
}

// observe records a pod as it is now. A pod that runs the sidecar written
// by hand (without the injector) is not missing it.
func (c *missed) observe(p *corev1.Pod) {
	uid := p.GetUID()
	a := p.GetAnnotations()
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.excluded, p.GetNamespace()) || !OptedIn(a) || a[AnnotationInjected] != "" || controller.HasSidecar(p) {
		delete(c.missing, uid)
		return
	}
	reason := "the injector did not add it: its webhook could not be reached (failurePolicy Ignore), or the pod did not suit (see the HotreloadNotInjected events of its owner)"
	if _, _, err := ParseAnnotations(a); err != nil {
		if err == errNotOptedIn {
			delete(c.missing, uid)
			return
		}
		reason = "its annotations do not parse: " + strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	c.missing[uid] = missingPod{namespace: p.GetNamespace(), name: p.GetName(), reason: reason}
}

func (c *missed) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.missing, uid)
	delete(c.reported, uid)
}

func (c *missed) count() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(len(c.missing))
}

// byNamespace counts the missing pods of each namespace.
func (c *missed) byNamespace() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, p := range c.missing {
		out[p.namespace]++
	}
	return out
}

func (c *missed) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observeAny(obj) },
		UpdateFunc: func(_, obj any) { c.observeAny(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				c.forget(m.GetUID())
			}
		},
	}
}

func (c *missed) observeAny(obj any) {
	if p, ok := obj.(*corev1.Pod); ok {
		c.observe(p)
	}
}

// report reports the pods not reported yet, and returns how many.
func (c *missed) report() int {
	c.mu.Lock()
	var fresh []missingPod
	var uids []types.UID
	for uid, p := range c.missing {
		if !c.reported[uid] {
			c.reported[uid] = true
			fresh = append(fresh, p)
			uids = append(uids, uid)
		}
	}
	c.mu.Unlock()
	if len(fresh) == 0 {
		return 0
	}
	var names []string
	for i, p := range fresh {
		c.m.missed.Inc()
		if c.events != nil {
			c.events.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.namespace, Name: p.name, UID: uids[i]},
				corev1.EventTypeWarning, ReasonMissing,
				truncate("opted in to hotreload but runs without its sidecar: "+p.reason+". Delete the pod (or kubectl rollout restart its workload) once the injector runs.", 1024))
		}
		names = append(names, p.namespace+"/"+p.name)
	}
	slices.Sort(names)
	const shown = 5
	more := ""
	if len(names) > shown {
		more = fmt.Sprintf(" and %d more", len(names)-shown)
		names = names[:shown]
	}
	level.Warn(c.logger).Log("msg", "pods opted in to hotreload but run without its sidecar; an Event on each says why", "pods", len(fresh), "examples", strings.Join(names, ",")+more)
	return len(fresh)
}

// run reports every interval until ctx is done: the leader's part.
func (c *missed) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.report()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
