package notifier

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("Reachable sent a request: %s %s", r.Method, r.URL)
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	for _, tt := range []struct {
		name, url string
		want      bool
	}{
		{"listening", srv.URL + "/-/reload", true},
		{"refused", "http://" + closed + "/-/reload", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWebhook(WebhookOptions{URL: tt.url})
			if err != nil {
				t.Fatal(err)
			}
			if got := w.Reachable(context.Background()); got != tt.want {
				t.Errorf("Reachable = %v, want %v", got, tt.want)
			}
		})
	}
}
