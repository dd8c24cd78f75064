package controller

import (
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apiCall is a kind of call to the API server: a verb and a resource, such
// as "list pods" or "update leases".
type apiCall struct{ verb, resource string }

func (c apiCall) String() string { return c.verb + " " + c.resource }

// The kinds of calls the controller makes, the values of the labels of
// hotreload_controller_api_errors_total.
var (
	listPods         = apiCall{"list", "pods"}
	watchPods        = apiCall{"watch", "pods"}
	patchPods        = apiCall{"patch", "pods"}
	listConfigMaps   = apiCall{"list", "configmaps"}
	watchConfigMaps  = apiCall{"watch", "configmaps"}
	listSecrets      = apiCall{"list", "secrets"}
	watchSecrets     = apiCall{"watch", "secrets"}
	getLeases        = apiCall{"get", "leases"}
	createLeases     = apiCall{"create", "leases"}
	updateLeases     = apiCall{"update", "leases"}
	everyAPICallKind = []apiCall{listPods, watchPods, patchPods, listConfigMaps, watchConfigMaps, listSecrets, watchSecrets, getLeases, createLeases, updateLeases}
)

// apiCalls reports the calls to the API server that fail. Each kind of call
// that starts failing gets one warning with the error; while it keeps
// failing, one more at most every interval, with the number of failures
// since the last. When it works again, one info line says so. Every failure
// counts in hotreload_controller_api_errors_total. The callers retry by
// themselves (client-go's reflectors and leader election, the queue's
// backoff): this only speaks for them, once.
type apiCalls struct {
	logger   log.Logger
	now      func() time.Time
	interval time.Duration
	errors   *prometheus.CounterVec

	mu      sync.Mutex
	failing map[apiCall]*failure
}

type failure struct {
	since, warned time.Time
	unreported    int // failures since the last warning
	total         int
}

// failed reports a failed call. retrying says what is done about it, such
// as "retrying with backoff".
func (a *apiCalls) failed(call apiCall, err error, retrying string) {
	a.errors.WithLabelValues(call.verb, call.resource).Inc()
	now := a.now()
	a.mu.Lock()
	f, ok := a.failing[call]
	if !ok {
		f = &failure{since: now}
		a.failing[call] = f
	}
	f.unreported++
	f.total++
	if !f.warned.IsZero() && now.Sub(f.warned) < a.interval {
		a.mu.Unlock()
		level.Debug(a.logger).Log("msg", "API call failed", "call", call, "err", err)
		return
	}
	n := f.unreported
	f.unreported, f.warned = 0, now
	a.mu.Unlock()
	kv := []any{"msg", "API call failed, " + retrying, "call", call, "err", err, "failures", n}
	if h := hint(call, err); h != "" {
		kv = append(kv, "hint", h)
	}
	level.Warn(a.logger).Log(kv...)
}

// ok reports a call that worked.
func (a *apiCalls) ok(call apiCall) {
	a.mu.Lock()
	f, ok := a.failing[call]
	if ok {
		delete(a.failing, call)
	}
	a.mu.Unlock()
	if ok {
		level.Info(a.logger).Log("msg", "API call works again", "call", call, "failures", f.total, "after", a.now().Sub(f.since).Round(time.Millisecond))
	}
}

// hint names the likely cause of the commonest failures, those that no
// retry cures.
func hint(call apiCall, err error) string {
	switch {
	case apierrors.IsUnauthorized(err):
		return "the API server does not accept the controller's credentials (its service account token, or the kubeconfig's user)"
	case apierrors.IsForbidden(err) && call == patchPods:
		return "its RBAC or an admission policy refuses the patch: the controller changes only the pod's hotreload.dev/nudged annotation"
	case apierrors.IsForbidden(err) && call.resource == "secrets":
		return "its RBAC does not allow this: grant it as examples/controller/ does, or run with --no-watch-secrets where it must not see Secrets"
	case apierrors.IsForbidden(err):
		return "its RBAC does not allow this: grant it as examples/controller/ does (a Role per --namespace, or the ClusterRole)"
	}
	return ""
}
