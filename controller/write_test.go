package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestTwoLeadersCannotBothWinAConflictingWrite: two replicas that both
// believe they lead decide, from the same pod as read, to move it to
// different revisions. Written with PatchPodAnnotations, exactly one
// write lands and the other is told it lost; the loser, reading again,
// sees the winner's decision.
func TestTwoLeadersCannotBothWinAConflictingWrite(t *testing.T) {
	const key = "hotreload.dev/revisions"
	tests := []struct {
		name         string
		precondition bool
	}{
		{"with the pod's resourceVersion: one wins", true},
		// Why the precondition: without it both writes land, and the
		// last one silently undoes the other replica's decision.
		{"without: both land", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, []*corev1.Pod{newPod("a", mountConfigMap("app"))}, nil)
			apiServerConcurrency(e.client)
			pods := e.client.CoreV1()
			read, err := pods.Pods(ns).Get(context.Background(), "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			write := func(leader string) error {
				v := fmt.Sprintf(`{"configmap/app":%q}`, leader)
				if tt.precondition {
					_, err := PatchPodAnnotations(context.Background(), pods, read, map[string]*string{key: &v})
					return err
				}
				data := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, v)
				_, err := pods.Pods(ns).Patch(context.Background(), "a", types.MergePatchType, []byte(data), metav1.PatchOptions{})
				return err
			}
			var wg sync.WaitGroup
			errs := map[string]error{}
			var mu sync.Mutex
			start := make(chan struct{})
			for _, leader := range []string{"r1", "r2"} {
				wg.Go(func() {
					<-start
					err := write(leader)
					mu.Lock()
					errs[leader] = err
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()

			after, err := pods.Pods(ns).Get(context.Background(), "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var won, lost []string
			for leader, err := range errs {
				switch {
				case err == nil:
					won = append(won, leader)
				case Lost(err):
					lost = append(lost, leader)
				default:
					t.Errorf("%s: %v", leader, err)
				}
			}
			if !tt.precondition {
				if len(won) != 2 {
					t.Errorf("without a precondition %v won and %v lost, want both to win: the fake does not apply writes as the API server does", won, lost)
				}
				return
			}
			if len(won) != 1 || len(lost) != 1 {
				t.Fatalf("won %v, lost %v: want one each", won, lost)
			}
			if got, want := after.Annotations[key], fmt.Sprintf(`{"configmap/app":%q}`, won[0]); got != want {
				t.Errorf("the pod holds %s, want the winner's %s", got, want)
			}
			if !errors.Is(errs[lost[0]], ErrLost) {
				t.Errorf("the loser's error %v does not wrap ErrLost", errs[lost[0]])
			}
			if after.Annotations[AnnotationNudge] != "true" {
				t.Errorf("the patch changed other annotations: %v", after.Annotations)
			}
		})
	}
}

func TestPodAnnotationPatch(t *testing.T) {
	p := newPod("a")
	v := "x"
	got, err := PodAnnotationPatch(p, map[string]*string{"hotreload.dev/revisions": &v, "hotreload.dev/old": nil})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"uid":"a-uid","resourceVersion":"1","annotations":{"hotreload.dev/old":null,"hotreload.dev/revisions":"x"}}}`
	if string(got) != want {
		t.Errorf("patch = %s, want %s", got, want)
	}
	p.ResourceVersion = ""
	if _, err := PodAnnotationPatch(p, nil); err == nil {
		t.Error("a pod without a resourceVersion gave a patch without a precondition")
	}
}
