package rollout

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestParse(t *testing.T) {
	mx := 1.0
	mn := 2.0
	good := Spec{Source: SourceRef{Kind: "ConfigMap", Name: "app"}, Steps: []string{"10%", "50%", "100%"}, BakeTime: "10s"}
	p, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 3 || p.BakeTime != 10*time.Second || p.ProgressDeadline != DefaultProgressDeadline {
		t.Errorf("policy %+v", p)
	}
	for _, tc := range []struct {
		change func(*Spec)
		err    string
	}{
		{func(s *Spec) { s.Source.Kind = "Pod" }, `spec.source.kind "Pod": want ConfigMap or Secret`},
		{func(s *Spec) { s.Source.Name = strings.Repeat("a", 237) }, "too long for the stable copy's name"},
		{func(s *Spec) { s.Steps = nil }, "spec.steps: want 1 to 20 steps, got 0"},
		{func(s *Spec) { s.Steps = []string{"10%", "110%"} }, `spec.steps[1]: step "110%": want a percent from 1% to 100%`},
		{func(s *Spec) { s.Steps = []string{"50%", "10%", "100%"} }, `spec.steps[1] "10%": not more than the step before it (50%)`},
		{func(s *Spec) { s.Steps = []string{"10%", "50%"} }, "the last step is 50%, want 100% (every pod)"},
		{func(s *Spec) { s.Steps = []string{"x"} }, `step "x": want a percent such as 10% or a count of pods such as 3`},
		{func(s *Spec) { s.BakeTime = "ten" }, `spec.bakeTime "ten": want a duration such as 10s or 5m`},
		{func(s *Spec) { s.ProgressDeadline = "1s" }, "spec.progressDeadline 1s: want 10s to 24h0m0s"},
		{func(s *Spec) {
			s.Analysis = &Analysis{Prometheus: &PrometheusAnalysis{Address: "prometheus:9090", Query: "q", Max: &mx}}
		}, `spec.analysis.prometheus.address "prometheus:9090": want an http or https URL`},
		{func(s *Spec) {
			s.Analysis = &Analysis{Prometheus: &PrometheusAnalysis{Address: "http://p", Query: "q"}}
		}, "give max, min or both"},
		{func(s *Spec) {
			s.Analysis = &Analysis{Prometheus: &PrometheusAnalysis{Address: "http://p", Query: "q", Max: &mx, Min: &mn}}
		}, "min 2 is more than max 1"},
	} {
		s := good
		s.Steps = append([]string(nil), good.Steps...)
		tc.change(&s)
		if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Parse(%+v) = %v, want an error with %q", s, err, tc.err)
		}
	}
}

func TestStepPods(t *testing.T) {
	for _, tc := range []struct {
		step       string
		total, got int
	}{
		{"10%", 10, 1}, {"10%", 3, 1}, {"50%", 10, 5}, {"50%", 3, 2}, {"100%", 7, 7}, {"3", 10, 3}, {"3", 2, 2}, {"10%", 0, 0},
	} {
		s, err := ParseStep(tc.step)
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Pods(tc.total); n != tc.got {
			t.Errorf("%s of %d = %d, want %d", tc.step, tc.total, n, tc.got)
		}
	}
	p := RestartPolicy(2)
	if p.StepCount(5) != 3 || p.Target(1, 5) != 2 || p.Target(3, 5) != 5 {
		t.Errorf("restart policy of 2 over 5 pods: %d steps, targets %d, %d", p.StepCount(5), p.Target(1, 5), p.Target(3, 5))
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/-/content":
			fmt.Fprint(w, `{"volumes":[],"views":[{"ref":"configmap/app","dir":"/etc/app","want":"7","running":"7","result":"applied","at":"2026-11-25T10:00:00Z"}]}`)
		case "/slow/-/content":
			time.Sleep(time.Second)
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	r, err := scrape(context.Background(), srv.Client(), srv.URL+"/-/content", "configmap/app")
	if err != nil || r.Running != "7" || r.Result != ResultApplied {
		t.Fatalf("scrape = %+v, %v", r, err)
	}
	if _, err := scrape(context.Background(), srv.Client(), srv.URL+"/-/content", "secret/other"); err == nil || !strings.Contains(err.Error(), "reports no view of secret/other") {
		t.Errorf("a missing view: %v", err)
	}
	if _, err := scrape(context.Background(), srv.Client(), srv.URL+"/nothing", "configmap/app"); err == nil || !strings.Contains(err.Error(), "status 404") {
		t.Errorf("a 404: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := scrape(ctx, srv.Client(), srv.URL+"/slow/-/content", "configmap/app"); err == nil {
		t.Error("a sidecar that does not answer was reported")
	}

	p := &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.1.2.3"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "hotreload", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9533}}}},
	}}
	p.Name, p.Namespace = "a", "shop"
	if u, err := contentURL(p, ""); err != nil || u != "http://10.1.2.3:9533/-/content" {
		t.Errorf("contentURL = %q, %v", u, err)
	}
	if u, _ := contentURL(p, "http://stub:1/{namespace}/{pod}"); u != "http://stub:1/shop/a" {
		t.Errorf("contentURL with the test's address = %q", u)
	}
	p.Spec.InitContainers[0].Name = "sidecar"
	if _, err := contentURL(p, ""); err == nil || !strings.Contains(err.Error(), "no container named hotreload with a port named metrics") {
		t.Errorf("no sidecar: %v", err)
	}
}

func TestQuery(t *testing.T) {
	answer := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.URL.Query().Get("query") != "sum(up)" {
			http.Error(w, `{"status":"error","error":"bad path"}`, http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, answer)
	}))
	defer srv.Close()
	q := &Query{Address: srv.URL, Query: "sum(up)"}
	for _, tc := range []struct {
		answer string
		value  float64
		err    string
	}{
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.25"]}]}}`, 0.25, ""},
		{`{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}`, 3, ""},
		{`{"status":"success","data":{"resultType":"vector","result":[]}}`, 0, "no series (no data)"},
		{`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]},{"value":[1,"2"]}]}}`, 0, "returns 2 series, want one"},
		{`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"NaN"]}]}}`, 0, "NaN"},
		{`{"status":"error","error":"parse error"}`, 0, "parse error"},
		{`<html>`, 0, "invalid character"},
	} {
		answer = tc.answer
		v, err := query(context.Background(), srv.Client(), q)
		if tc.err == "" && (err != nil || v != tc.value) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, %v; want %v or an error with %q", tc.answer, v, err, tc.value, tc.err)
		}
	}
}
