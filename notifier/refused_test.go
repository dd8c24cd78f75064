package notifier

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRefused(t *testing.T) {
	base := errors.New("POST http://app/-/reload: status 500, want 200: yaml: line 3: bad")
	err := fmt.Errorf("reload: %w", errors.Join(errors.New("other target"), Refused(base, "POST http://app/-/reload: status 500")))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, base) {
		t.Errorf("%v: want it to match ErrRefused and its cause", err)
	}
	if reason, ok := RefusedReason(err); !ok || reason != "POST http://app/-/reload: status 500" {
		t.Errorf("RefusedReason = %q, %v", reason, ok)
	}
	if got := Refused(base, "x").Error(); got != base.Error() {
		t.Errorf("Error = %q, want the cause's text", got)
	}
	if errors.Is(base, ErrRefused) {
		t.Error("an unmarked error matches ErrRefused")
	}
	if _, ok := RefusedReason(base); ok {
		t.Error("an unmarked error has a refusal reason")
	}
}

// TestStatusRefusedReason: a status that refuses the reload carries a
// reason that quotes none of the answer; one that says to come back later
// is no refusal (TestStatusRefuses covers the codes).
func TestStatusRefusedReason(t *testing.T) {
	for code, refused := range map[int]bool{500: true, 422: true, 503: false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "line 3: password=hunter2 is wrong", code)
		}))
		w, err := NewWebhook(WebhookOptions{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Notify(t.Context())
		srv.Close()
		if got := errors.Is(err, ErrRefused); got != refused {
			t.Errorf("status %d: refused = %v, want %v (%v)", code, got, refused, err)
		}
		reason, ok := RefusedReason(err)
		if ok != refused || refused && reason != fmt.Sprintf("POST %s: status %d", srv.URL, code) {
			t.Errorf("status %d: reason %q, %v", code, reason, ok)
		}
		if got, want := Reason(err), fmt.Sprintf("POST %s: status %d", srv.URL, code); got != want {
			t.Errorf("status %d: Reason = %q, want %q: the answer is never quoted", code, got, want)
		}
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code || !strings.Contains(err.Error(), "hunter2") {
			t.Errorf("status %d: %v: the StatusError and the answer in the error's text are kept", code, err)
		}
	}
}

// TestReason: a failed attempt's reason is one line, bounded, and a
// WithReason mark changes what it says but nothing that errors.Is sees.
func TestReason(t *testing.T) {
	if got := Reason(errors.New("POST http://app/-/reload: connection refused")); got != "POST http://app/-/reload: connection refused" {
		t.Errorf("Reason = %q, want the error's text", got)
	}
	if got := Reason(errors.New("no process named app\nsecond line")); got != "no process named app" {
		t.Errorf("Reason = %q, want the first line only", got)
	}
	long := Reason(errors.New(strings.Repeat("é", 400)))
	if len(long) > maxReason+3 || !strings.HasSuffix(long, "...") || !utf8.ValidString(long) {
		t.Errorf("Reason of a long error = %d bytes %q, want at most %d, cut on a rune", len(long), long, maxReason+3)
	}
	base := errors.New("status 503: the whole answer")
	marked := WithReason(base, "POST http://app/-/reload: status 503")
	if errors.Is(marked, ErrRefused) || !errors.Is(marked, base) || marked.Error() != base.Error() {
		t.Errorf("WithReason changed what the error is: %v", marked)
	}
	if _, ok := RefusedReason(marked); ok {
		t.Error("a WithReason mark counts as a refusal")
	}
	if got := Reason(fmt.Errorf("target: %w", marked)); got != "POST http://app/-/reload: status 503" {
		t.Errorf("Reason = %q, want the mark's", got)
	}
}
