package reloader

import (
	"errors"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotreload/hotreload/notifier"
)

// TestRefusedHook: a failure the hook deals with is not retried, for
// whatever time passes; a failure it does not deal with is; newer content
// is delivered as usual. The hook sees the content being delivered.
func TestRefusedHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("status 500")
		f := &fakeTarget{name: "app", errs: []error{refused}}
		var (
			mu   sync.Mutex
			seen []map[string][32]byte
		)
		h := start(t, []notifier.Target{f}, Options{Backoff: fixedBackoff(time.Second), RetryInterval: time.Hour,
			Refused: func(err error, c map[string][32]byte) bool {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, maps.Clone(c))
				return errors.Is(err, refused)
			}})
		h.change("/etc/a")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if n := len(f.times()); n != 1 {
			t.Fatalf("attempts = %d, want 1: a refusal the hook dealt with is not retried", n)
		}
		mu.Lock()
		if len(seen) != 1 || seen[0]["/etc/a"] != [32]byte{1} {
			t.Errorf("the hook saw %v, want the content of the attempt", seen)
		}
		mu.Unlock()
		if got := series(h, "hotreload_last_reload_successful", "app"); got != 0 {
			t.Errorf("last_reload_successful = %v, want 0 after a refusal", got)
		}

		f.mu.Lock()
		f.errs = []error{errors.New("connection refused")} // not dealt with: retried
		f.mu.Unlock()
		h.change("/etc/a")
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(f.times()); n != 3 {
			t.Fatalf("attempts = %d, want 3: the newer content, failed and retried", n)
		}
		h.stop(t)
	})
}

// TestDeliveredHook: the hook is told, once, when every target has new
// content of a directory, and not before.
func TestDeliveredHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fakeTarget{name: "slow", took: 10 * time.Second}
		fast := &fakeTarget{name: "fast"}
		var (
			mu   sync.Mutex
			told []string
		)
		h := start(t, []notifier.Target{fast, slow}, Options{Delivered: func(dir string, hash [32]byte) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, dir+":"+string(rune('0'+hash[0])))
		}})
		h.change("/etc/a")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		if len(told) != 0 {
			t.Errorf("told %v while one target lacks the content", told)
		}
		mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		h.changeTo("/etc/a", 1) // the same content again: nothing new to tell
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		if len(told) != 1 || told[0] != "/etc/a:1" {
			t.Errorf("told %v, want /etc/a:1 once", told)
		}
		mu.Unlock()
		h.stop(t)
	})
}
