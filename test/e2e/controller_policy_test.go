//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hotreload/hotreload/controller"
)

// applyControllerRBAC applies what examples/controller/controller.yaml
// grants the controller (its namespace, service account and roles, not its
// Deployment) and examples/controller/admission-policy.yaml, as shipped.
func applyControllerRBAC(t *testing.T) {
	t.Helper()
	var keep []object
	for _, o := range decode(t, readManifest(t, "examples/controller/controller.yaml")) {
		if o["kind"] != "Deployment" {
			keep = append(keep, o)
		}
	}
	mustKubectl(t, encode(t, keep), "apply", "-f", "-")
	mustKubectl(t, readManifest(t, "examples/controller/admission-policy.yaml"), "apply", "-f", "-")
}

// controllerClient is a client with the controller's own credentials: a
// token of its service account, from the TokenRequest API.
func controllerClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	token := strings.TrimSpace(mustKubectl(t, nil, "-n", controllerNS, "create", "token", controllerName, "--duration=10m"))
	admin, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.AnonymousClientConfig(admin) // the server and its CA, no credentials
	rc.BearerToken = token
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestControllerAdmissionPolicy shows, with the controller's own token,
// what examples/controller/admission-policy.yaml lets it change on a pod:
// its hotreload.dev/ annotations, and nothing else (RBAC alone lets it
// change the image); that the policy leaves other users alone; and that
// two writers that decided from the same read cannot both win a write
// made with controller.PatchPodAnnotations (issue #26, items 15 and 17).
func TestControllerAdmissionPolicy(t *testing.T) {
	t.Parallel()
	applyControllerRBAC(t)
	as := controllerClient(t)
	admin := k8sClient(t)
	ns := namespace(t)
	ctx := context.Background()

	// A pod bound to a node that does not exist: stored, never run.
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "target"},
			Annotations: map[string]string{controller.AnnotationNudge: "true", "example.com/owner": "team-a"}},
		Spec: corev1.PodSpec{NodeName: "ghost", AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "app", Image: "localhost/hotreload-e2e/pause:e2e"}}},
	}
	created, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No kubelet will confirm its deletion: delete it at once.
		zero := int64(0)
		_ = admin.CoreV1().Pods(ns).Delete(context.Background(), "target", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	patch := func(cs kubernetes.Interface, body string) error {
		_, err := cs.CoreV1().Pods(ns).Patch(ctx, "target", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	// A new image each time: an image change that went through before the
	// policy took effect must not make the next attempt a no-op.
	attempt := 0
	image := func() string {
		attempt++
		return fmt.Sprintf(`{"spec":{"containers":[{"name":"app","image":"localhost/hotreload-e2e/evil:%d"}]}}`, attempt)
	}

	// RBAC and admission policies take effect a moment after they are
	// stored: wait until the image change is refused for the right reason.
	var last error
	waitFor(t, nudgeWait, func() bool {
		last = patch(as, image())
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "not its spec")
	}, func() string {
		return fmt.Sprintf("the controller's image change was not refused by the policy: %v", last)
	})

	for _, c := range []struct {
		name, body, want string // want: "" allowed, else a word of the refusal
	}{
		{"its nudge annotation", fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:"configmap/app@1"}}}`, created.UID, controller.AnnotationNudged), ""},
		{"a new hotreload.dev/ annotation", `{"metadata":{"annotations":{"hotreload.dev/revisions":"{}"}}}`, ""},
		{"the image", image(), "not its spec"},
		{"a label", `{"metadata":{"labels":{"app":"payments"}}}`, "not its labels"},
		{"another annotation", `{"metadata":{"annotations":{"example.com/owner":"team-b"}}}`, "annotations"},
		{"a finalizer", `{"metadata":{"finalizers":["example.com/hold"]}}`, "finalizers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := patch(as, c.body)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want 403 Forbidden naming %s", err, c.want)
			}
		})
	}
	t.Run("other users are not bound by it", func(t *testing.T) {
		if err := patch(admin, `{"metadata":{"labels":{"app":"relabelled"}}}`); err != nil {
			t.Errorf("the cluster admin's label change: %v", err)
		}
	})

	t.Run("two leaders cannot both win a conflicting write", func(t *testing.T) {
		// The controller may list pods (its informer's read), not get one.
		list, err := as.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=target"})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("list the pod as the controller: %v (%d pods)", err, len(list.Items))
		}
		read := &list.Items[0]
		errs := map[string]error{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, leader := range []string{"r1", "r2"} {
			wg.Go(func() {
				v := fmt.Sprintf(`{"configmap/app":%q}`, leader)
				<-start
				_, err := controller.PatchPodAnnotations(ctx, as.CoreV1(), read, map[string]*string{"hotreload.dev/revisions": &v})
				mu.Lock()
				errs[leader] = err
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		var won, lost []string
		for leader, err := range errs {
			switch {
			case err == nil:
				won = append(won, leader)
			case controller.Lost(err) && errors.Is(err, controller.ErrLost):
				lost = append(lost, leader)
			default:
				t.Errorf("%s: %v", leader, err)
			}
		}
		if len(won) != 1 || len(lost) != 1 {
			t.Fatalf("won %v, lost %v: want one each", won, lost)
		}
		after, err := admin.CoreV1().Pods(ns).Get(ctx, "target", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := after.Annotations["hotreload.dev/revisions"], fmt.Sprintf(`{"configmap/app":%q}`, won[0]); got != want {
			t.Errorf("the pod holds %s, want the winner's %s", got, want)
		}
		figure(t, "controller: two writers from one read of a pod, with its resourceVersion: %s won, %s got 409 Conflict", won[0], lost[0])
	})
}
