package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/hotreload/hotreload/internal/e2e"
)

// TestMain checks that no goroutine of the harness (process waiters, log
// copiers, test servers, HTTP clients) outlives the tests, and removes the
// binary that the tests built.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		e2e.Cleanup()
		os.Exit(code)
	}))
}
