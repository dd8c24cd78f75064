package controller

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// CountRequests returns a wrapper for the API client's transport (for
// rest.Config.Wrap) that counts every request to the API server in
// hotreload_controller_api_requests_total{verb,resource}: what a rollout
// or a burst of nudges costs the API server, per pod.
func CountRequests(reg prometheus.Registerer) func(http.RoundTripper) http.RoundTripper {
	c := promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "hotreload_controller_api_requests_total",
		Help: "Requests to the API server, by verb (get, list, watch, create, update, patch, delete) and resource (with its subresource, such as configrollouts/status).",
	}, []string{"verb", "resource"})
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			verb, res := requestKind(r)
			c.WithLabelValues(verb, res).Inc()
			return rt.RoundTrip(r)
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestKind names a request to the API server as RBAC does: a verb and a
// resource. Paths are /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUB]].
func requestKind(r *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(r.Method), "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return strings.ToLower(r.Method), "other"
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(r.Method)
	}
	return verb, resource
}
