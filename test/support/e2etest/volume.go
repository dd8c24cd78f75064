package e2etest

import (
	"slices"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/test/support/poll"
)

// Payload builds a kubelet payload from pairs of item path and content:
// Payload("a", "1", "conf.d/b", "2").
func Payload(pathsAndData ...string) map[string]kubelet.File {
	if len(pathsAndData)%2 != 0 {
		panic("e2etest.Payload: odd number of arguments")
	}
	p := make(map[string]kubelet.File, len(pathsAndData)/2)
	for i := 0; i < len(pathsAndData); i += 2 {
		p[pathsAndData[i]] = kubelet.File{Data: []byte(pathsAndData[i+1])}
	}
	return p
}

// Write projects payload into v as the kubelet would and fails the test
// unless the outcome (a swap, or nothing for identical content) is the one
// wanted.
func Write(tb testing.TB, v *kubelet.Volume, wantChanged bool, payload map[string]kubelet.File) {
	tb.Helper()
	changed, err := v.Write(payload)
	if err != nil {
		tb.Fatalf("kubelet write %s: %v", v.Dir, err)
	}
	if changed != wantChanged {
		tb.Fatalf("kubelet write %s: changed=%v, want %v", v.Dir, changed, wantChanged)
	}
}

// Settle waits until everything that hotreload (p) was asked to reload
// before the call has been delivered to app. It makes a values-only change
// to sentinel, a volume that p watches, and waits for the reload that
// covers it to be answered: the watcher handles events in order and the
// reloader handles changes in order, so that reload is the last one that
// can cover an earlier change. It returns that reload's Fire; if its Dirs
// are the sentinel alone, the sentinel's change was delivered on its own.
func Settle(tb testing.TB, p *Proc, app *App, sentinel *kubelet.Volume) binary.Fire {
	tb.Helper()
	before := len(p.Fires())
	Write(tb, sentinel, true, Payload("sentinel", time.Now().Format(time.RFC3339Nano)))
	var fire binary.Fire
	poll.Eventually(tb, settleTimeout, func() bool {
		fires := p.Fires()
		for _, f := range fires[min(before, len(fires)):] {
			if slices.Contains(f.Dirs, sentinel.Dir) {
				fire = f
				return true
			}
		}
		return false
	}, "the sentinel's change in %s was not fired", sentinel.Dir)
	poll.Eventually(tb, settleTimeout, func() bool {
		reqs := app.Requests()
		return len(reqs) > 0 && reqs[len(reqs)-1].Start.After(fire.Time) && app.Pending() == 0
	}, "the sentinel's reload was not answered: %s", app)
	return fire
}

// settleTimeout bounds each wait of Settle.
const settleTimeout = 10 * time.Second
