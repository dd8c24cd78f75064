package controller

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/fakeapi"
)

// fakePods is the fake clientset's pods client, which, as the fake
// clientset itself does, tells the reflector that it cannot send a watch's
// initial events: the reflector then lists.
type fakePods struct{ corev1client.PodsGetter }

func (fakePods) IsWatchListSemanticsUnSupported() bool { return true }

// logLines returns the lines of a log that contain every one of substrs.
func logLines(log *binary.Buffer, substrs ...string) []string {
	var out []string
	for _, l := range strings.Split(log.String(), "\n") {
		if l != "" && !slices.ContainsFunc(substrs, func(s string) bool { return !strings.Contains(l, s) }) {
			out = append(out, l)
		}
	}
	return out
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// histogram is the lag histogram as gathered from reg, nil before any
// observation.
func histogram(t *testing.T, reg *prometheus.Registry) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "hotreload_controller_nudge_lag_seconds" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	return nil
}

// apiServerConcurrency makes the fake clientset check resourceVersions as
// the API server does (see fakeapi.Concurrency).
func apiServerConcurrency(f *k8sfake.Clientset) { fakeapi.Concurrency(f) }
