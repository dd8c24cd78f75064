package web

import (
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// serverLogEvery is how often one kind of line from http.Server is logged
// at most: a client that fails the TLS handshake (a port scanner, a probe
// that speaks plain HTTP) would otherwise log a line per connection.
const serverLogEvery = time.Minute

// serverLog is the ErrorLog of the http.Server: it turns the lines the
// server writes (a failed TLS handshake, a panic in a handler) into lines
// of the logger at warning level, the same kind of message at most once
// every serverLogEvery, the next one saying how many were left out.
type serverLog struct {
	logger log.Logger
	now    func() time.Time

	mu    sync.Mutex
	kinds map[string]*logged // by msg
}

type logged struct {
	last    time.Time
	leftOut int
}

func newServerLog(logger log.Logger) *serverLog {
	return &serverLog{logger: logger, now: time.Now, kinds: map[string]*logged{}}
}

func (l *serverLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	kv := []any{"msg", "http server error", "err", line}
	// "http: TLS handshake error from 10.0.0.7:51234: EOF"
	if rest, ok := strings.CutPrefix(line, "http: TLS handshake error from "); ok {
		if from, reason, ok := strings.Cut(rest, ": "); ok {
			kv = []any{"msg", "TLS handshake failed", "remote", from, "err", reason}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds[kv[1].(string)]
	if k == nil {
		k = &logged{}
		l.kinds[kv[1].(string)] = k
	}
	now := l.now()
	if !k.last.IsZero() && now.Sub(k.last) < serverLogEvery {
		k.leftOut++
		return len(p), nil
	}
	if k.leftOut > 0 {
		kv = append(kv, "left_out", k.leftOut)
	}
	k.last, k.leftOut = now, 0
	level.Warn(l.logger).Log(kv...)
	return len(p), nil
}
