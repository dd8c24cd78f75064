//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/poll"
)

// How long a ConfigMap edit takes to reach the app, from the patch to the
// app having loaded it: with the kubelet's default syncFrequency (1m),
// waiting for its periodic sync; and with the pod annotated right after the
// patch, which makes the kubelet sync it at once. Printed, not asserted: the
// machine is shared.

// TestTimingKubeletSync: the edit waits for the kubelet's periodic sync.
// Parallel with the rest of the suite: tens of seconds of the kubelet's
// period, which the suite's load hardly moves.
func TestTimingKubeletSync(t *testing.T) {
	t.Parallel()
	// One edit per pod, in parallel: each waits for its own pod's periodic
	// sync, up to 1.5 × syncFrequency. A pod that has just started is
	// synced again as its containers and probes settle, so each pod first
	// takes an edit that is not counted.
	const pods = 3
	took := make([]time.Duration, pods)
	var wg sync.WaitGroup
	for i := range pods {
		ns, p := timingPod(t)
		wg.Go(func() {
			if timeEdit(t, ns, p, syncWait, false) == 0 {
				return
			}
			// The refresh that delivered the warm-up edit is followed by
			// another about a second later, which an edit made at once
			// would ride. A user's edit comes at any point of the
			// kubelet's cycle: make it 2 to 30 s after the last one.
			time.Sleep(2*time.Second + rand.N(28*time.Second))
			took[i] = timeEdit(t, ns, p, syncWait, false)
		})
	}
	wg.Wait()
	printTimes(t, "ConfigMap patch to app reloaded, kubelet syncFrequency 1m (every sidecar without the controller)", took)
}

// TestTimingAnnotated: the pod annotated after each edit. Not parallel, like
// TestController: Go runs it before every parallel test, alone, for its
// sub-second figures would otherwise measure the suite's own pods starting
// (seen: the controller's median went from 0.67 s to 2.35 s among them).
func TestTimingAnnotated(t *testing.T) {
	ns, p := timingPod(t)
	var took []time.Duration
	for i := range 5 {
		if i > 0 {
			// Past the kubelet's follow-up refresh of the last edit,
			// which would hold this one back by up to a second.
			time.Sleep(3 * time.Second)
		}
		took = append(took, timeEdit(t, ns, p, nudgeWait, true))
	}
	printTimes(t, "ConfigMap patch to app reloaded, pod annotated after the patch (edits 3s apart)", took)
}

func timingPod(t *testing.T) (string, testPod) {
	t.Helper()
	ns := namespace(t)
	apply(t, ns, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {edit: \"0\"}\n"))
	p := testPod{
		name:    "timing",
		volumes: []object{configMapVolume("config", "settings")},
		mounts:  map[string]string{"config": "/etc/config"},
	}
	p = p.start(t, ns)
	waitLoaded(t, nudgeWait, p.app(), "/etc/config/edit", "0")
	return ns, p
}

// timeEdit edits the pod's ConfigMap and returns how long the app took to
// load the edit. It may run in a goroutine of its own: it reports failure
// with Errorf.
func timeEdit(t *testing.T, ns string, p testPod, timeout time.Duration, annotate bool) time.Duration {
	before, err := appConfig(p.app())
	if err != nil {
		t.Error(err)
		return 0
	}
	want := fmt.Sprint(before.Generation)
	start := time.Now()
	if _, err := kubectl(nil, "-n", ns, "patch", "configmap", "settings", "--type=merge", "-p", `{"data":{"edit":"`+want+`"}}`); err != nil {
		t.Error(err)
		return 0
	}
	if annotate {
		if _, err := kubectl(nil, "-n", ns, "annotate", "--overwrite", "pod", p.name, fmt.Sprintf("e2e.hotreload.dev/nudge=%d", start.UnixNano())); err != nil {
			t.Error(err)
			return 0
		}
	}
	var took time.Duration
	if !poll.Each(20*time.Millisecond, timeout-time.Since(start), func() bool {
		l, err := appConfig(p.app())
		took = l.LoadedAt.Sub(start)
		return err == nil && l.Files["/etc/config/edit"] == want
	}) {
		t.Errorf("app at %s did not load edit %s within %s", p.app(), want, timeout)
		return 0
	}
	return took
}

func printTimes(t *testing.T, what string, took []time.Duration) {
	t.Helper()
	slices.Sort(took)
	figure(t, "%s: min %.2fs, median %.2fs, max %.2fs (%d edits)", what,
		took[0].Seconds(), took[len(took)/2].Seconds(), took[len(took)-1].Seconds(), len(took))
}
