package controller

import (
	"context"
	"errors"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

var (
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// reported marks an error that apiCalls has already reported, so that the
// reflector's error handler does not report it again.
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// listWatch is the lists and watches of one informer, each reported to
// calls: a failure as a failure of list or watch, a success as the end of
// one. A watch that asks for the initial events (client-go's watch-list,
// tried before a list) is a list: the reflector retries it by itself while
// the API server is unreachable, and falls back to a real list only when
// the server refuses it as a bad request (a server without watch-list),
// which is therefore not reported.
func (c *Controller) listWatch(list, watchCall apiCall, client any,
	listFn func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := listFn(ctx, opts)
			if err != nil {
				if ctx.Err() == nil {
					c.calls.failed(list, err, "retrying with backoff")
				}
				return nil, reported{err}
			}
			c.calls.ok(list)
			return obj, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			call := watchCall
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				call = list
			}
			w, err := watchFn(ctx, opts)
			switch {
			case err == nil:
				c.calls.ok(call)
				return w, nil
			case call == list && (apierrors.IsBadRequest(err) || apierrors.IsInvalid(err)):
				return nil, err
			case ctx.Err() == nil:
				c.calls.failed(call, err, "retrying with backoff")
			}
			return nil, reported{err}
		},
	}
	// A fake client that cannot send initial events says so; the reflector
	// then lists.
	return cache.ToListWatcherWithWatchListSemantics(lw, client)
}

// watchErrors is the reflectors' error handler, in place of client-go's,
// which would log every failure at error level: it reports what the
// listWatch did not (a watch that ended with an error), and leaves out the
// ends of watches that are routine (expired, closed).
func (c *Controller) watchErrors(call apiCall) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, _ *cache.Reflector, err error) {
		var r reported
		switch {
		case errors.As(err, &r), ctx.Err() != nil:
		case apierrors.IsResourceExpired(err), apierrors.IsGone(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		default:
			c.calls.failed(call, err, "retrying with backoff")
		}
	}
}

func (c *Controller) podInformer(pods corev1client.PodsGetter, ns string) cache.SharedIndexInformer {
	lw := c.listWatch(listPods, watchPods, pods,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return pods.Pods(ns).List(ctx, opts)
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return pods.Pods(ns).Watch(ctx, opts)
		})
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{mountsIndex: indexMounts})
	_ = inf.SetWatchErrorHandlerWithContext(c.watchErrors(watchPods))
	return inf
}

func (c *Controller) metadataInformer(client metadata.Interface, gvr schema.GroupVersionResource, list, watchCall apiCall, ns string) cache.SharedIndexInformer {
	lw := c.listWatch(list, watchCall, client,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.Resource(gvr).Namespace(ns).List(ctx, opts)
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Resource(gvr).Namespace(ns).Watch(ctx, opts)
		})
	inf := cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	_ = inf.SetWatchErrorHandlerWithContext(c.watchErrors(watchCall))
	return inf
}
