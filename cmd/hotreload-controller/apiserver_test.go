package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/poll"
)

// fakeAPI is an API server that answers every request with the status the
// test sets, or, at 200, as an empty cluster does: empty lists of pods,
// ConfigMaps and Secrets (the last two as metadata), watches that stay open
// and send nothing. It counts the lists of each resource.
type fakeAPI struct {
	*httptest.Server
	status atomic.Int32

	mu    sync.Mutex
	lists map[string]int
}

func newFakeAPI(t testing.TB, status int) *fakeAPI {
	f := &fakeAPI{lists: map[string]int{}}
	f.status.Store(int32(status))
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) listsOf(resource string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists[resource]
}

var resourcePath = regexp.MustCompile(`^/api/v1/(?:namespaces/[^/]+/)?(pods|configmaps|secrets)$`)

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	m := resourcePath.FindStringSubmatch(r.URL.Path)
	q := r.URL.Query()
	watching := q.Get("watch") == "true" || q.Get("watch") == "1"
	if m != nil && !watching {
		f.mu.Lock()
		f.lists[m[1]]++
		f.mu.Unlock()
	}
	status := int(f.status.Load())
	if status == http.StatusOK && q.Get("sendInitialEvents") == "true" {
		status = http.StatusBadRequest // no watch-list here: the client lists instead
	}
	w.Header().Set("Content-Type", "application/json")
	if status != http.StatusOK || m == nil {
		if m == nil {
			status = http.StatusNotFound
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: int32(status), Reason: metav1.StatusReason(strings.ReplaceAll(http.StatusText(status), " ", "")),
			Message: strings.ToLower(http.StatusText(status)),
		})
		return
	}
	if watching {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	kind := `"kind":"PodList","apiVersion":"v1"`
	if m[1] != "pods" {
		kind = `"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1"`
	}
	fmt.Fprintf(w, `{%s,"metadata":{"resourceVersion":"1"},"items":[]}`, kind)
}

// kubeconfig writes a kubeconfig for server with a bearer token.
func kubeconfig(t testing.TB, server, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(p, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, token)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, 30*time.Second, cond, "waiting until %s", what)
}

// TestAPIServerFailuresAreOneWarningEach runs the controller's main against
// an API server that refuses connections, or answers 401 or 403: each kind
// of call that fails gets one warning with the error, however often it is
// retried, and a line when it works again.
func TestAPIServerFailuresAreOneWarningEach(t *testing.T) {
	const token = "s3cret-t0ken"
	tests := []struct {
		name    string
		status  int // 0: connection refused
		err     string
		hint    string
		recover bool
	}{
		{"connection refused", 0, "connection refused", "", false},
		{"401", http.StatusUnauthorized, "unauthorized", `hint="the API server does not accept the controller's credentials`, true},
		{"403", http.StatusForbidden, "forbidden", `hint="its RBAC does not allow this`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t, tt.status)
			server := api.URL
			if tt.status == 0 {
				api.Close()
			}
			var stderr binary.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() {
				done <- runMain(ctx, []string{"--kubeconfig", kubeconfig(t, server, token), "--no-leader-elect",
					"--web.listen-address", "127.0.0.1:0"}, &stderr, &stderr)
			}()
			defer func() {
				cancel()
				if code := <-done; code != 0 {
					t.Errorf("exit status %d:\n%s", code, stderr.String())
				}
			}()
			warnings := func(call string) int {
				n := 0
				for _, line := range strings.Split(stderr.String(), "\n") {
					if strings.Contains(line, "level=warn") && strings.Contains(line, `call="`+call+`"`) {
						n++
					}
				}
				return n
			}
			calls := []string{"list pods", "list configmaps", "list secrets"}
			// Two failures of each list at least, the second after the
			// reflector's backoff.
			if tt.status != 0 {
				for _, r := range []string{"pods", "configmaps", "secrets"} {
					waitUntil(t, "two lists of "+r, func() bool { return api.listsOf(r) >= 2 })
				}
			} else {
				addr := regexp.MustCompile(`msg=listening address=(\S+)`)
				waitUntil(t, "the metrics endpoint listens", func() bool { return addr.MatchString(stderr.String()) })
				url := "http://" + addr.FindStringSubmatch(stderr.String())[1] + "/metrics"
				for _, r := range []string{"pods", "configmaps", "secrets"} {
					waitUntil(t, "two failed lists of "+r, func() bool {
						return metricValue(url, `hotreload_controller_api_errors_total{resource="`+r+`",verb="list"}`) >= 2
					})
				}
			}
			out := stderr.String()
			for _, c := range calls {
				if n := warnings(c); n != 1 {
					t.Errorf("%d warnings for %s, want 1:\n%s", n, c, out)
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.Contains(line, "level=warn") {
					if strings.Contains(line, "level=error") {
						t.Errorf("an error line: %s", line)
					}
					continue
				}
				if !strings.Contains(line, `msg="API call failed, retrying with backoff"`) || !strings.Contains(line, tt.err) || !strings.Contains(line, tt.hint) {
					t.Errorf("warning %q: want the call, %q and %q", line, tt.err, tt.hint)
				}
			}
			if strings.Contains(out, token) {
				t.Errorf("the token is in the logs:\n%s", out)
			}
			if !tt.recover {
				return
			}
			api.status.Store(http.StatusOK)
			waitUntil(t, "the caches sync", func() bool { return strings.Contains(stderr.String(), `msg="caches synced"`) })
			for _, c := range calls {
				if !strings.Contains(stderr.String(), `msg="API call works again" call="`+c+`"`) {
					t.Errorf("no line says that %s works again:\n%s", c, stderr.String())
				}
			}
		})
	}
}

// metricValue is the value of one series of a Prometheus text endpoint, -1
// if absent.
func metricValue(url, series string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	for _, line := range strings.Split(body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}
