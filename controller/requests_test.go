package controller

import (
	"net/http"
	"testing"
)

func TestRequestKind(t *testing.T) {
	for _, tc := range []struct{ method, url, verb, resource string }{
		{"GET", "/api/v1/pods?watch=true&resourceVersion=1", "watch", "pods"},
		{"GET", "/api/v1/namespaces/shop/configmaps?limit=500", "list", "configmaps"},
		{"GET", "/api/v1/namespaces/shop/configmaps/app", "get", "configmaps"},
		{"PATCH", "/api/v1/namespaces/shop/pods/app-0", "patch", "pods"},
		{"PUT", "/apis/hotreload.dev/v1alpha1/namespaces/shop/configrollouts/app/status", "update", "configrollouts/status"},
		{"POST", "/api/v1/namespaces/shop/events", "create", "events"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/hotreload-system/leases/hotreload-controller", "update", "leases"},
		{"GET", "/version", "get", "other"},
	} {
		r, err := http.NewRequest(tc.method, "https://api"+tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, res := requestKind(r); v != tc.verb || res != tc.resource {
			t.Errorf("%s %s = %s %s, want %s %s", tc.method, tc.url, v, res, tc.verb, tc.resource)
		}
	}
}
