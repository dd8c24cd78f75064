package e2etest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/poll"
)

// Request is one request that an App received.
type Request struct {
	Method string
	URL    *url.URL // path and query as received
	Header http.Header
	Start  time.Time // when the handler began
	End    time.Time // when the handler answered; zero while in flight
	Status int       // the status answered
	Cut    bool      // the client went away before the delay was over
}

// App is a recording webhook target, an httptest server whose behaviour a
// test changes while hotreload calls it: it answers 200 by default, and can
// be made slow (SetDelay), answer another status (SetStatus, FailNext), or
// be taken down so that connections are refused (Down, Up).
type App struct {
	tb   testing.TB
	addr string // kept across Down and Up

	mu       sync.Mutex
	srv      *httptest.Server
	reqs     []Request
	status   int
	failNext int // answer 500 to this many more requests
	delay    time.Duration
	body     string // body of the answers that fail
	onReq    func(Request)
}

// NewApp starts an App on a free port of 127.0.0.1; it is closed when the
// test ends.
func NewApp(tb testing.TB) *App {
	tb.Helper()
	a := &App{tb: tb, status: http.StatusOK}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	a.addr = ln.Addr().String()
	a.serve(ln)
	tb.Cleanup(a.Close)
	return a
}

func (a *App) serve(ln net.Listener) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(a.handle))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	a.mu.Lock()
	a.srv = srv
	a.mu.Unlock()
}

// URL is the app's URL with path appended, such as URL("/-/reload").
func (a *App) URL(path string) string { return "http://" + a.addr + path }

// Addr is the app's host:port.
func (a *App) Addr() string { return a.addr }

func (a *App) handle(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone(), Start: time.Now()}
	a.mu.Lock()
	i := len(a.reqs)
	a.reqs = append(a.reqs, req)
	delay, status, body, onReq := a.delay, a.status, a.body, a.onReq
	if a.failNext > 0 {
		a.failNext--
		status = http.StatusInternalServerError
	}
	a.mu.Unlock()
	if onReq != nil {
		onReq(req)
	}

	cut := false
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client gave up, or the app closes
			t.Stop()
			cut = true
		}
	}
	if status != http.StatusOK && body != "" {
		http.Error(w, body, status)
	} else {
		w.WriteHeader(status)
	}

	a.mu.Lock()
	a.reqs[i].End, a.reqs[i].Status, a.reqs[i].Cut = time.Now(), status, cut
	a.mu.Unlock()
}

// Requests returns a copy of the requests received so far.
func (a *App) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.reqs...)
}

// Count is the number of requests received so far.
func (a *App) Count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

// Completed is the number of requests answered so far with status (and
// not cut short by the client).
func (a *App) Completed(status int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.reqs {
		if !r.End.IsZero() && r.Status == status && !r.Cut {
			n++
		}
	}
	return n
}

// Pending is the number of requests received and not answered yet.
func (a *App) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.reqs {
		if r.End.IsZero() {
			n++
		}
	}
	return n
}

// WaitCount waits until the app has received at least n requests and fails
// the test if it has not within timeout.
func (a *App) WaitCount(n int, timeout time.Duration) {
	a.tb.Helper()
	poll.Eventually(a.tb, timeout, func() bool { return a.Count() >= n },
		"want at least %d requests; app has %s", n, a)
}

// WaitAfter waits until a request arrives that started after t0, returns
// the first one, and fails the test if none does within timeout.
func (a *App) WaitAfter(t0 time.Time, timeout time.Duration) Request {
	a.tb.Helper()
	var got Request
	poll.Eventually(a.tb, timeout, func() bool {
		for _, r := range a.Requests() {
			if r.Start.After(t0) {
				got = r
				return true
			}
		}
		return false
	}, "no request after %s; app has %s", t0.Format("15:04:05.000"), a)
	return got
}

// SetStatus makes the app answer status (with body, if not empty) from now
// on.
func (a *App) SetStatus(status int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status, a.body = status, body
}

// FailNext makes the app answer 500 with body to its next n requests.
func (a *App) FailNext(n int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failNext, a.body = n, body
}

// SetDelay makes the app take d to answer each request from now on.
func (a *App) SetDelay(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.delay = d
}

// OnRequest calls f, in the handler's goroutine, with each request as it
// arrives, before the app answers.
func (a *App) OnRequest(f func(Request)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onReq = f
}

// Down closes the app's listener and connections: connecting is refused
// until Up.
func (a *App) Down() {
	a.mu.Lock()
	srv := a.srv
	a.srv = nil
	a.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Up listens again on the same address after Down.
func (a *App) Up() {
	a.tb.Helper()
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		a.tb.Fatalf("listen again on %s: %v", a.addr, err)
	}
	a.serve(ln)
}

// Close stops the app.
func (a *App) Close() { a.Down() }

// String describes the requests received, for failure messages.
func (a *App) String() string {
	reqs := a.Requests()
	s := fmt.Sprintf("%d requests", len(reqs))
	for i, r := range reqs {
		s += fmt.Sprintf("\n  %d: %s %s at %s status %d", i, r.Method, r.URL, r.Start.Format("15:04:05.000"), r.Status)
	}
	return s
}
