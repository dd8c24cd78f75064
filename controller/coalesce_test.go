package controller

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

func TestDue(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const w = 300 * time.Millisecond
	tests := []struct {
		name   string
		timing podTiming
		window time.Duration
		now    time.Time
		want   time.Time
	}{
		{"never nudged: at once", podTiming{pending: at(0), lastChange: at(0)}, w, at(0), at(0)},
		{"the first change a window or more after the last nudge: at once", podTiming{lastPatch: at(0), pending: at(300), lastChange: at(300)}, w, at(300), at(300)},
		{"the first change long ago, sent late (a retry): at once", podTiming{lastPatch: at(0), pending: at(400), lastChange: at(900)}, w, at(950), at(950)},
		{"coalescing off: at once", podTiming{lastPatch: at(0), pending: at(100), lastChange: at(100)}, 0, at(100), at(100)},
		{"in a burst: a window after the last change", podTiming{lastPatch: at(0), pending: at(100), lastChange: at(250)}, w, at(250), at(550)},
		{"in a burst, a window after the last nudge: still a window after the last change", podTiming{lastPatch: at(0), pending: at(200), lastChange: at(400)}, w, at(400), at(700)},
		{"in a burst that goes on: 10 windows after the first undelivered change", podTiming{lastPatch: at(2900), pending: at(100), lastChange: at(2950)}, w, at(2950), at(3100)},
		{"in a burst, waited 10 windows already: now", podTiming{lastPatch: at(2900), pending: at(-200), lastChange: at(2950)}, w, at(2950), at(2950)},
		{"no change recorded (a retry): as if seen now", podTiming{lastPatch: at(0)}, w, at(100), at(400)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := due(tt.timing, tt.window, tt.now); !got.Equal(tt.want) {
				t.Errorf("due = +%s, want +%s", got.Sub(t0), tt.want.Sub(t0))
			}
		})
	}
}

// burstResult is what the pods saw of a burst of edits.
type burstResult struct {
	patches  map[string][]time.Time // by pod, when each nudge was sent
	last     map[string]string      // by pod, the value of the last nudge
	lastEdit time.Time
}

func (r burstResult) total() int {
	n := 0
	for _, ts := range r.patches {
		n += len(ts)
	}
	return n
}

// burst runs the case of the issue that asked for coalescing: 50 edits of
// one ConfigMap, gap apart, with 5 running pods that mount it, against a
// controller with the coalescing window given. It must run in a synctest
// bubble when the gaps are to be exact.
func burst(t testing.TB, window, gap time.Duration) burstResult {
	t.Helper()
	const pods, edits = 5, 50
	var ps []*corev1.Pod
	for i := range pods {
		ps = append(ps, newPod(fmt.Sprintf("p%d", i), mountConfigMap("app")))
	}
	e := newEnv(t, ps, []*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100")})
	r := burstResult{patches: map[string][]time.Time{}, last: map[string]string{}}
	var mu sync.Mutex
	e.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		var np nudgePatch
		if err := jsonUnmarshal(pa.GetPatch(), &np); err != nil {
			t.Errorf("patch of %s: %v", pa.GetName(), err)
		}
		mu.Lock()
		defer mu.Unlock()
		r.patches[pa.GetName()] = append(r.patches[pa.GetName()], time.Now())
		r.last[pa.GetName()] = np.Metadata.Annotations[AnnotationNudged]
		return false, nil, nil
	})
	e.start(Options{Coalesce: window})
	for i := range edits {
		if i > 0 {
			time.Sleep(gap)
		}
		e.update(ConfigMap, "app", strconv.Itoa(101+i))
	}
	r.lastEdit = time.Now()
	want := fmt.Sprintf("configmap/app@%d", 100+edits)
	waitUntil(t, "every pod is nudged for the last edit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range r.last {
			if v == want {
				n++
			}
		}
		return n == pods
	})
	mu.Lock()
	defer mu.Unlock()
	return r
}

func TestBurstIsCoalescedPerPod(t *testing.T) {
	const window = 300 * time.Millisecond
	tests := []struct {
		name      string
		window    time.Duration
		maxPerPod int
	}{
		// Nudged at the first edit, then at most every 10 windows (3 s)
		// while the edits go on, then once a window after the last: 5.
		{"coalesced", window, 5},
		// One nudge per edit: what the issue measured.
		{"off", 0, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := burst(t, tt.window, 200*time.Millisecond)
				t.Logf("50 edits 200ms apart, 5 pods, --coalesce=%s: %d patches", tt.window, r.total())
				for name, ts := range r.patches {
					if len(ts) > tt.maxPerPod {
						t.Errorf("%s nudged %d times, want at most %d", name, len(ts), tt.maxPerPod)
					}
					if v := r.last[name]; v != "configmap/app@150" {
						t.Errorf("%s last nudged for %s, want the last edit, configmap/app@150", name, v)
					}
					// The last edit arrives within a window of being made.
					if tail := ts[len(ts)-1].Sub(r.lastEdit); tail > tt.window {
						t.Errorf("%s nudged %s after the last edit, want at most %s", name, tail, tt.window)
					}
					for i := 1; i < len(ts); i++ {
						if gap := ts[i].Sub(ts[i-1]); gap > maxDelayFactor*window+200*time.Millisecond {
							t.Errorf("%s waited %s between nudges during the burst, want at most 10 windows and an edit's gap", name, gap)
						}
					}
				}
				if len(r.patches) != 5 {
					t.Errorf("%d pods nudged, want 5", len(r.patches))
				}
				if tt.window == 0 && r.total() != 250 {
					t.Errorf("%d patches without coalescing, want 250: one per pod and edit", r.total())
				}
			})
		})
	}
}

// TestSingleEditsAreNotDelayed: coalescing costs nothing to edits that are
// a window apart or more.
func TestSingleEditsAreNotDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 300 * time.Millisecond
		e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app"))}, []*metav1.PartialObjectMetadata{objectMeta(ConfigMap, "app", "100")})
		var mu sync.Mutex
		var at []time.Time
		e.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			return false, nil, nil
		})
		e.start(Options{Coalesce: window})
		var edits []time.Time
		for i, gap := range []time.Duration{0, window, 2 * time.Second} {
			time.Sleep(gap)
			edits = append(edits, time.Now())
			e.update(ConfigMap, "app", strconv.Itoa(101+i))
			e.waitPatched(fmt.Sprintf("a=configmap/app@%d", 101+i))
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.EqualFunc(at, edits, time.Time.Equal) {
			t.Errorf("nudged at %v for edits at %v: want each at once", at, edits)
		}
	})
}
